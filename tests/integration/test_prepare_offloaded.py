"""A crawl's new texts are chunked and embedded beside the extraction processes, with the rows the
crawl's own process would write, and a failed job there loses no text.

Real components: the embedded PostgreSQL with pgvector, the extraction pool's processes (two workers
and the process beside them), the packaged static model (loaded once per process), a loopback site.
"""

from __future__ import annotations

import json
import os
import signal

import pytest
import sqlalchemy as sa

from gleaner.demosite.testsite import TestSite
from gleaner.retrieval.embedder import EmbedModel, default_embedder
from gleaner.retrieval.index import embed_pending
from gleaner.retrieval.prepare import NewText, prepare_in_worker, prepare_texts
from gleaner.retrieval.vectors import TABLE as VECTORS
from gleaner.retrieval.vectors import copy_vectors
from gleaner.runtime.runner import crawl, new_request
from tests.integration.paraphrase_site import TOPICS, topic_pages

SITE = "topics.test"

# The rows a crawl wrote (positions, heading, full-text vector, vector), and how many of them match
# the rows prepared here in this process: pgvector compares the stored float4s with those copied here.
_SAME = sa.text(
    "SELECT count(*) FROM json_to_recordset(CAST(:rows AS json)) AS r(h text, o int, s int, e int, hd text)"
    " JOIN knowledge.text_chunks c ON c.text_hash = r.h AND c.ordinal = r.o"
    f" JOIN {VECTORS} v ON v.h = r.h AND v.o = r.o"
    " WHERE c.chunk_start = r.s AND c.chunk_end = r.e AND c.heading = r.hd AND c.fresh_embedding = v.v")


def _texts(deps) -> list[NewText]:
    """The texts the crawl chunked, with their span ledgers, as ingest had them."""
    with deps.engine.connect() as conn:
        bodies = conn.execute(sa.text("SELECT t.text_hash, t.body FROM knowledge.canonical_texts t"
                                      " WHERE EXISTS (SELECT 1 FROM knowledge.text_chunks c"
                                      "   WHERE c.text_hash = t.text_hash) ORDER BY t.text_hash")).all()
        spans: dict[str, list[list[object]]] = {}
        for h, start, end, kind in conn.execute(sa.text(
                "SELECT text_hash, span_start, span_end, kind FROM knowledge.text_spans ORDER BY text_hash, ordinal")):
            spans.setdefault(h, []).append([start, end, kind])
    return [NewText(h, body.encode("utf-8"), json.dumps(spans.get(h, []))) for h, body in bodies]


def _topic_text(number: int, title: str, first: str, second: str) -> NewText:
    text = f"# {title}\n\n{first}\n\n{second}\n".encode()
    heading = len(f"# {title}".encode())
    middle = heading + 2 + len(first.encode())
    spans = [[0, heading, "heading"], [heading + 2, middle, "paragraph"], [middle + 2, len(text) - 1, "paragraph"]]
    return NewText(f"h{number}", text, json.dumps(spans))


def _chunk_count(deps) -> int:
    with deps.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM knowledge.text_chunks")).scalar_one())


def _same_as_in_process(deps) -> tuple[int, int]:
    """(chunks stored, of which identical to this process's preparation of their texts)."""
    prepared = prepare_texts(_texts(deps), default_embedder(EmbedModel.STATIC))
    payload = "[" + ",".join(t.rows_json for t in prepared.texts.values() if t.chunks) + "]"
    with deps.engine.connect() as conn:
        copy_vectors(conn, b"".join(t.vectors for t in prepared.texts.values()))
        same = int(conn.execute(_SAME, {"rows": payload}).scalar_one())
    return _chunk_count(deps), same


@pytest.fixture
def pooled(make_deps):
    deps = make_deps(extract_workers=2, embed_beside_extraction=True)
    if not deps.search_index.has_vectors():
        pytest.skip("this PostgreSQL has no pgvector")
    return deps


def test_the_process_beside_extraction_prepares_the_rows_this_process_does_bit_for_bit(pooled):
    pool = pooled.extract_pool
    pool.warm()
    pool.call(os.getpid).result(timeout=120)  # the workers are up: call_aside needs them
    texts = [_topic_text(i, *page) for i, page in enumerate(TOPICS.values())]
    there = pool.call_aside(prepare_in_worker, texts, EmbedModel.STATIC.value, None).result(timeout=120)
    here = prepare_texts(texts, default_embedder(EmbedModel.STATIC))
    assert there == here  # the same rows: positions, headings, texts and every vector's bytes
    assert there.model == default_embedder(EmbedModel.STATIC).model and sum(t.chunks for t in there.texts.values())
    # The process beside extraction keeps its embedder: a second job loads nothing (same process, same answer).
    assert pool.call_aside(os.getpid).result(timeout=60) == pool.call_aside(os.getpid).result(timeout=60)


def test_a_crawl_embeds_beside_extraction_the_same_rows_and_an_unchanged_recrawl_sends_nothing(pooled):
    deps = pooled
    with TestSite(topic_pages(), max_seconds=300) as site:
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        preparer = deps.search_index._preparer
        sent = preparer.sent
        assert sent >= len(TOPICS) and not preparer.failed  # every new text went to the process beside extraction
        stored, same = _same_as_in_process(deps)
        assert stored > len(TOPICS) and same == stored
        assert embed_pending(deps.search_index, deps.embedder) == 0  # each with its vector, in its transaction
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        assert preparer.sent == sent  # an unchanged recrawl chunks and embeds nothing anywhere
        assert _chunk_count(deps) == stored


def test_a_crash_beside_extraction_loses_no_text_the_crawl_prepares_it_in_process(pooled):
    deps = pooled
    pool = deps.extract_pool
    pool.warm()
    pool.call(os.getpid).result(timeout=120)
    os.kill(pool.call_aside(os.getpid).result(timeout=120), signal.SIGKILL)  # the process beside extraction dies
    with TestSite(topic_pages(), max_seconds=300) as site:
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    assert summary["fetched"] >= len(TOPICS)
    assert deps.search_index._preparer.failed  # noticed, and the rest of the run prepared in-process
    stored, same = _same_as_in_process(deps)
    assert stored > len(TOPICS) and same == stored
    with deps.engine.connect() as conn:  # every searchable document's text has its chunks, with vectors
        assert conn.execute(sa.text(
            "SELECT count(*) FROM knowledge.search_index i WHERE NOT EXISTS (SELECT 1 FROM knowledge.text_chunks c"
            " WHERE c.text_hash = i.text_hash AND c.fresh_embedding IS NOT NULL)")).scalar_one() == 0
