"""Workspace tokens through MCP, with the SDK's own client over HTTP: the feed's two-step reference retrieval.

Two workspaces' feeds each bring one page of a loopback topic site (landed as reference items, embedded
whole by the packaged model); a workspace token finds its own items with both scores, reads one verbatim
without its embedding, and reaches nothing of the sites and nothing of the other workspace; a site
token never sees references.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from mcp import ClientSession

from gleaner import tenancy
from gleaner.cli.operating import drain_local
from gleaner.demosite.testsite import TestSite
from gleaner.messages import ArticlesAccepted
from gleaner.retrieval.index import embed_pending
from gleaner.retrieval.references import embed_references
from gleaner.stages import dispatch
from gleaner.store.feeds.references import ArticleRow
from tests.integration.paraphrase_site import topic_pages

from .conftest import SITE, Served
from .test_mcp import _http_session, _structured

VOLCANOES = "mountains that spew molten rock and ash"


@dataclass
class Feeds:
    tokens: dict[str, str]  # caller -> bearer token
    items: dict[str, str]  # workspace -> its reference item's id
    topics_url: str


@pytest.fixture(scope="module")
def feeds(served: Served) -> Iterator[Feeds]:
    deps = served.deps
    brought = {"ws-volcanoes": "/volcanoes", "ws-jazz": "/jazz"}
    with TestSite(topic_pages(), max_seconds=300) as topics, tenancy.all_tenants():
        ids = deps.references.record_articles([ArticleRow(
            workspace_id=workspace, external_url=topics.url + path, normalised_url=topics.url + path,
            title=path.strip("/").title(), summary=None, published_at=datetime(2026, 6, 1, tzinfo=UTC),
            feed_source=None) for workspace, path in brought.items()])
        dispatch(ArticlesAccepted(article_ids=tuple(i for i in ids if i is not None)), deps)
        drain_local(deps)  # the landed pages' canonical texts (ingest), as serve's background drain makes them
        if deps.search_index.has_vectors():
            assert embed_references(deps, deps.embedder) >= 2
            embed_pending(deps.search_index, deps.embedder)  # the site's chunks too: site search ranks by meaning
        items = {}
        for workspace, path in brought.items():
            [found] = [r for r in deps.references.search(path.strip("/"), 10) if r["source_url"] == topics.url + path]
            items[workspace] = found["reference_id"]
        tokens = {workspace: deps.tokens.add(workspace)["token"] for workspace in brought}
        tokens["site"] = deps.tokens.add_site(SITE)["token"]
        yield Feeds(tokens, items, topics.url)


async def _calls(session: ClientSession, calls: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    listed = {t.name for t in (await session.list_tools()).tools}
    answers: dict[str, Any] = {"tools": listed}
    for name, (tool, args) in calls.items():
        answers[name] = await session.call_tool(tool, args)
    return answers


def test_a_workspace_token_finds_and_reads_its_own_references_and_nothing_else(served, feeds):
    own, other = feeds.items["ws-volcanoes"], feeds.items["ws-jazz"]
    site_text = served.current_text("/docs/install")
    calls = {"found": ("refs_search", {"query": VOLCANOES, "limit": 5}),
             "anything": ("refs_search", {"query": "improvised music from Louisiana", "limit": 5}),
             "item": ("refs_get", {"reference_id": own}),
             "other_item": ("refs_get", {"reference_id": other}),
             "site_search": ("search", {"query": "install"}),
             "site_text": ("get", {"text_hash": site_text.text_hash, "start": 0, "end": 40}),
             "changes": ("changes", {})}
    seen = anyio.run(_http_session, served.url, feeds.tokens["ws-volcanoes"], lambda s: _calls(s, calls))

    assert {"refs_search", "refs_get"} <= seen["tools"]
    hits = _structured(seen["found"])["results"]
    assert [h["reference_id"] for h in hits] == [own]  # its own item, ranked with both scores
    (hit,) = hits
    assert hit["source_url"] == feeds.topics_url + "/volcanoes"
    assert 0 < hit["embedding_score"] <= 1 and 0 <= hit["fulltext_score"] <= 1
    assert hit["score"] == pytest.approx(0.6 * hit["embedding_score"] + 0.4 * hit["fulltext_score"], abs=1e-5)
    # Never another workspace's item, however closely it matches.
    assert other not in {h["reference_id"] for h in _structured(seen["anything"])["results"]}
    assert seen["other_item"].is_error and "no reference item" in seen["other_item"].content[0].text

    item = _structured(seen["item"])
    assert "embedding" not in item and "volcano" in item["body"].lower()
    assert [a["workspace_id"] for a in item["articles"]] == ["ws-volcanoes"]
    for name in ("site_search", "changes"):  # nothing of the sites
        assert seen[name].is_error and "workspace token reaches the feed's reference items only" in \
            seen[name].content[0].text, name
    assert seen["site_text"].is_error and "no canonical text" in seen["site_text"].content[0].text

    # The verbatim step reaches the item's canonical text through `get`, as /v1/texts does for the token.
    async def read(session: ClientSession) -> dict[str, Any]:
        return _structured(await session.call_tool("get", {"text_hash": item["text_hash"]}))

    got = anyio.run(_http_session, served.url, feeds.tokens["ws-volcanoes"], read)
    assert got["text"].encode("utf-8") == served.deps.provenance.text_bytes(item["text_hash"])
    assert "volcano" in got["text"].lower()


def test_a_site_token_never_sees_references_and_the_operator_sees_every_workspaces(served, feeds):
    calls = {"search": ("refs_search", {"query": VOLCANOES}),
             "item": ("refs_get", {"reference_id": feeds.items["ws-volcanoes"]})}
    as_site = anyio.run(_http_session, served.url, feeds.tokens["site"], lambda s: _calls(s, calls))
    for name in calls:
        assert as_site[name].is_error and "site token" in as_site[name].content[0].text, name

    operator = anyio.run(_http_session, served.url, None, lambda s: _calls(s, {
        "volcanoes": ("refs_search", {"query": VOLCANOES, "limit": 5}),
        "jazz": ("refs_search", {"query": "improvised music from Louisiana", "limit": 5})}))
    assert _structured(operator["volcanoes"])["results"][0]["reference_id"] == feeds.items["ws-volcanoes"]
    assert _structured(operator["jazz"])["results"][0]["reference_id"] == feeds.items["ws-jazz"]
    # Site search never answers with references, for the operator either: not for the references' own
    # topic (where the relevance floor may leave no site page at all), nor for what the site holds.
    found = anyio.run(_http_session, served.url, None, lambda s: _calls(s, {
        "volcanoes": ("search", {"query": VOLCANOES}), "site": ("search", {"query": "how do I install it"})}))
    for name in ("volcanoes", "site"):  # (the answers also hold the tools listed)
        results = _structured(found[name])["results"]
        assert not [r for r in results if r["site_domain"] == "_references" or r["url"].startswith(feeds.topics_url)]
    assert _structured(found["site"])["results"], "the site's own pages answer its own question"


def test_a_workspaces_search_by_meaning_ranks_its_own_items_when_anothers_is_the_nearest(served, feeds,
                                                                                      monkeypatch):
    from gleaner.retrieval import references

    if not served.deps.search_index.has_vectors():
        pytest.skip("this PostgreSQL has no pgvector: reference search is full text only")
    # One candidate by meaning, and no word of the question in either item: over every item the nearest
    # is ws-jazz's, which ws-volcanoes may not see; its own item is ranked by meaning among its own.
    monkeypatch.setattr(references, "CANDIDATES", 1)
    with tenancy.scope("_references"):
        [hit] = references.search_references(served.deps, "improvised music from Louisiana", 5, "ws-volcanoes")
        [nearest] = references.search_references(served.deps, "improvised music from Louisiana", 5)
    assert nearest["reference_id"] == feeds.items["ws-jazz"]
    assert hit["reference_id"] == feeds.items["ws-volcanoes"] and hit["fulltext_score"] == 0
    assert hit["embedding_score"] > 0
