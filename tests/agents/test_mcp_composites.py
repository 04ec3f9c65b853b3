"""A composite document through MCP (the SDK's own client over HTTP): `search` finds it, `get` returns the
bytes `gleaner slice` prints, `verify` accepts the range; another site's token reaches none of it."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import ClientSession

from gleaner import tenancy
from gleaner.cli.operating import drain_local
from gleaner.operator.routing import create_composite
from gleaner.retrieval.index import embed_pending

from .conftest import SITE, Served
from .test_mcp import _env, _http_session, _slice_cli, _structured


@pytest.fixture(scope="module")
def composite(served: Served) -> Any:
    """/pricing folded into a composite (no other agent test reads /pricing), ingested and embedded."""
    deps = served.deps
    with tenancy.all_tenants():
        made = create_composite(deps, SITE, "Plans and prices", [served.site.url + "/pricing"])
        drain_local(deps)
        embed_pending(deps.search_index, deps.embedder)
        return made


def test_a_composite_hit_through_mcp_is_a_slice_gleaner_slice_prints_and_verify_accepts(served, composite,
                                                                                        tmp_path):
    with tenancy.all_tenants():
        own = served.deps.tokens.add_site(SITE)["token"]
        other = served.deps.tokens.add_site("other.test")["token"]

    async def as_owner(session: ClientSession) -> dict[str, Any]:
        found = _structured(await session.call_tool("search", {"query": "pricing plans", "limit": 5}))
        hit = next(h for h in found["results"] if h.get("composite_id") == composite.id)
        span = {"text_hash": hit["text_hash"], "start": hit["start"], "end": hit["end"]}
        got = _structured(await session.call_tool("get", span))
        verified = _structured(await session.call_tool("verify", {**span, "quote": got["text"]}))
        wrong = _structured(await session.call_tool("verify", {**span, "quote": got["text"][:-1] + "!"}))
        return {"hit": hit, "found": found, "got": got, "verified": verified, "wrong": wrong}

    seen = anyio.run(_http_session, served.url, own, as_owner)
    hit = seen["hit"]
    assert hit["url"] == f"gleaner://composites/{composite.id}" and hit["title"] == "Plans and prices"
    assert hit["site_domain"] == SITE and hit["document_id"] is None and hit["version"] == 1
    # The folded page answers through its composite only.
    assert served.site.url + "/pricing" not in {h["url"] for h in seen["found"]["results"]}
    assert seen["got"]["text"].encode("utf-8") == _slice_cli(_env(served, tmp_path), hit["text_hash"],
                                                              hit["start"], hit["end"])
    assert (seen["verified"]["state"], seen["verified"]["reason"]) == ("verified", None)
    assert (seen["wrong"]["state"], seen["wrong"]["reason"]) == ("rejected", "not-verbatim")

    async def as_other(session: ClientSession) -> dict[str, Any]:
        span = {"text_hash": hit["text_hash"], "start": hit["start"], "end": hit["end"]}
        return {"search": await session.call_tool("search", {"query": "pricing plans", "limit": 10}),
                "get": await session.call_tool("get", span),
                "verify": await session.call_tool("verify", {**span, "quote": seen["got"]["text"]})}

    other_seen = anyio.run(_http_session, served.url, other, as_other)
    assert _structured(other_seen["search"])["results"] == []
    for name in ("get", "verify"):
        assert other_seen[name].is_error and "no canonical text" in other_seen[name].content[0].text, name
