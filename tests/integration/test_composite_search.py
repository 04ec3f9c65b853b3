"""Composite documents in search: the composite answers for the pages folded into it, its hits are citations,
and it leaves search with the change that makes it unsearchable.

Real components: the embedded PostgreSQL with pgvector, the packaged model (loaded once per session),
the loopback topic site of tests/integration/paraphrase_site.py.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from gleaner import tenancy
from gleaner.cli.operating import drain_local
from gleaner.demosite.testsite import Page, TestSite
from gleaner.operator import composites
from gleaner.operator.routing import create_composite
from gleaner.operator.rules import add_rule, remove_rule
from gleaner.provenance.citations import check_slice
from gleaner.retrieval import search
from gleaner.retrieval.composites import index_unindexed_composites
from gleaner.retrieval.index import embed_pending
from gleaner.runtime.runner import crawl, new_request
from gleaner.serving.textsapi import TextReader, text_slice
from gleaner.store.documents.erasure import erase_document
from tests.integration.paraphrase_site import topic_html, topic_pages

SITE = "topics.test"
VOLCANOES = "mountains that erupt molten lava and ash"
JAZZ = "origins of improvised music from Louisiana"


def _crawl(deps, site):
    return crawl(deps, new_request(site.url + "/", site_domain=SITE))


@pytest.fixture
def folded(deps):
    """The topic site crawled, /volcanoes and /jazz folded into one composite, everything embedded."""
    with TestSite(topic_pages(), max_seconds=300) as site:
        _crawl(deps, site)
        made = create_composite(deps, SITE, "Field notes", [site.url + "/volcanoes", site.url + "/jazz"])
        drain_local(deps)  # the composite's version is ingested (and indexed) as the CLI's create does
        if deps.search_index.has_vectors():  # ingest embeds inline; anything it left waits for embed_pending
            embed_pending(deps.search_index, deps.embedder)
            assert deps.search_index.unembedded(deps.embedder.model, 1) == []
        yield deps, site, made


def _hits(deps, query, limit=5, site_domain=None):
    return search(deps, query, site_domain=site_domain, limit=limit)["results"]


def _composite_found(deps, made, query):
    return any(h.get("composite_id") == made.id for h in _hits(deps, query, limit=10))


def test_a_composite_answers_for_its_pages_with_hits_that_are_verbatim_citable_slices(folded):
    deps, site, made = folded
    with deps.engine.connect() as conn:  # folding took the pages out of the index with their routing
        left = conn.execute(sa.text(
            "SELECT count(*) FILTER (WHERE d.kb_indexed), count(i.document_id) FROM knowledge.documents d"
            " LEFT JOIN knowledge.search_index i ON i.document_id = d.id WHERE d.canonical_url = ANY(:u)"),
            {"u": [site.url + "/volcanoes", site.url + "/jazz"]}).one()
    assert tuple(left) == (0, 0)
    for query in (VOLCANOES, JAZZ):
        hits = _hits(deps, query, limit=3)
        top = hits[0]
        # The folded pages lost their rag routing to the composite: the composite answers, they do not.
        assert top["composite_id"] == made.id and top["url"] == f"gleaner://composites/{made.id}"
        assert (top["title"], top["site_domain"], top["version"], top["document_id"]) == (
            "Field notes", SITE, 1, None)
        assert not {site.url + "/volcanoes", site.url + "/jazz"} & {h["url"] for h in hits}
        assert 0 < top["embedding_score"] <= 1
        assert top["page_rank"] == 1 and 0 < top["score"] <= 1  # ranked with the documents, by fusion
        # A citation: /v1/texts (and `gleaner slice`, the same reader) return exactly these bytes, which hash
        # to text_hash and hold the preview's words at [start, end).
        status, piece = text_slice(deps, top["text_hash"], {"start": str(top["start"]), "end": str(top["end"])},
                                   TextReader.site(SITE))
        assert status == 200
        assert " ".join(piece["text"].split())[:60] == top["preview"][:60]
        body = deps.provenance.text_bytes(top["text_hash"])
        check = check_slice(body, top["text_hash"], top["start"], top["end"], piece["text"])
        assert check.intact and check.holds

    # Another site's scope sees nothing of it, nor can it read its text; full text alone finds it too.
    with tenancy.scope("other.test"):
        assert _hits(deps, VOLCANOES, limit=10) == []
    assert text_slice(deps, top["text_hash"], {}, TextReader.site("other.test"))[0] == 404
    deps.search_index._vectors = False  # what has_vectors() finds on a server without pgvector
    assert _hits(deps, "volcano lava pumice", limit=1)[0]["composite_id"] == made.id


def _set(deps, sql, **params):
    with deps.engine.begin() as conn:
        conn.execute(sa.text(sql), params)


def test_a_composite_leaves_search_when_its_routing_its_status_or_a_source_makes_it_unsearchable(folded):
    deps, site, made = folded
    assert _composite_found(deps, made, VOLCANOES)

    routing = "UPDATE knowledge.document_routings SET enabled = :e WHERE composite_document_id = :c"
    _set(deps, routing, e=False, c=made.id)
    assert not _composite_found(deps, made, VOLCANOES)
    _set(deps, routing, e=True, c=made.id)
    assert _composite_found(deps, made, VOLCANOES)

    rule, _applied = add_rule(deps, SITE, "/jazz", "block", reason="not ours to index")  # gate 2, alone or combined
    assert not _composite_found(deps, made, VOLCANOES)
    remove_rule(deps, rule.id)
    assert _composite_found(deps, made, VOLCANOES)

    superseded = "UPDATE knowledge.composite_documents SET status = CAST(:s AS knowledge.composite_status)" \
                 " WHERE id = :c"
    _set(deps, superseded, s="superseded", c=made.id)
    assert not _composite_found(deps, made, VOLCANOES)
    _set(deps, superseded, s="generated", c=made.id)

    # A source's new version makes the composite stale: it no longer says what the page says.
    site.pages["/volcanoes"] = Page(topic_html(
        "Growing tomatoes", "Tomatoes need a sunny spot, support canes and steady watering. Pinch out the side "
        "shoots that grow between the stem and the leaves so the plant puts its strength into the fruit.",
        "Feed them every week once the first flowers open, and pick each tomato when it is fully red."),
        modified=1_700_000_600.0)
    assert _crawl(deps, site)["snapshots"]["changed"] == 1
    assert composites.history(deps, made.id)[-1].to_status == "stale"
    assert not _composite_found(deps, made, JAZZ)
    composites.move(deps, made.id, "in_validation", "operator")  # under review again: its text is searchable
    assert _composite_found(deps, made, JAZZ)

    doc = deps.metadata.document_by_url(site.url + "/jazz")
    erase_document(deps.provenance, deps.blobs, deps.blocklist, doc["id"], "asked", "test")
    assert not _composite_found(deps, made, JAZZ)


def test_a_composite_made_before_search_knew_composites_is_indexed_by_gleaner_index(folded):
    deps, _site, made = folded
    # What a composite made before migration 0036 looks like: no index row, its text never chunked.
    _set(deps, "DELETE FROM knowledge.text_chunks WHERE text_hash = (SELECT text_hash FROM"
               " knowledge.composite_search_index WHERE composite_document_id = :c)", c=made.id)
    _set(deps, "DELETE FROM knowledge.composite_search_index WHERE composite_document_id = :c", c=made.id)
    assert not _composite_found(deps, made, VOLCANOES)

    assert index_unindexed_composites(deps) == 1
    assert index_unindexed_composites(deps) == 0  # once
    embed_pending(deps.search_index, deps.embedder)
    assert deps.search_index.unembedded(deps.embedder.model, 1) == []
    assert _hits(deps, VOLCANOES, limit=1)[0]["composite_id"] == made.id
