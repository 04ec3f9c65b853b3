"""Fresh vectors: a page is searchable by meaning the moment it is ingested, before its vectors enter
the HNSW index, and the merge that moves them there changes no answer (gleaner.retrieval.fresh).

Real components: the embedded PostgreSQL with pgvector, the packaged static model, loopback sites of
pages on distinct topics.
"""

from __future__ import annotations

import json
import threading

import pytest
import sqlalchemy as sa

from gleaner import tenancy
from gleaner.demosite.testsite import Page, TestSite
from gleaner.operator.rules import add_rule
from gleaner.retrieval import fresh, search
from gleaner.retrieval.fresh import MergeWay, fresh_count, merge_fresh
from gleaner.runtime.runner import crawl, new_request
from gleaner.store.access.rls import ADMIN_OPTION
from gleaner.store.documents.erasure import erase_document
from tests.integration.paraphrase_site import QUESTIONS, TOPICS, topic_html, topic_pages

SITE = "topics.test"
TIDES = "why does the sea at the shore rise and fall twice a day"
MOON = "why does the sea at the shore rise and fall with the moon"  # tides first (TIDES: top three)


def _crawl(deps, site, site_domain=SITE):
    return crawl(deps, new_request(site.url + "/", site_domain=site_domain))


def _hits(deps, query, site_domain=SITE, limit=3):
    return [(h["url"], h["text_hash"], h["start"], h["end"], h["embedding_score"], h["fulltext_score"])
            for h in search(deps, query, site_domain=site_domain, limit=limit)["results"]]


def _where(deps):
    """(chunks with a fresh vector, with an indexed one, with both)."""
    with deps.engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        return tuple(conn.execute(sa.text(
            "SELECT count(*) FILTER (WHERE fresh_embedding IS NOT NULL), count(*) FILTER (WHERE embedding IS NOT NULL),"
            " count(*) FILTER (WHERE fresh_embedding IS NOT NULL AND embedding IS NOT NULL)"
            " FROM knowledge.text_chunks")).one())


@pytest.fixture
def topics(deps):
    if not deps.search_index.has_vectors():
        pytest.skip("this PostgreSQL has no pgvector: there are no vectors to merge")
    with TestSite(topic_pages(), max_seconds=300) as site:
        _crawl(deps, site)
        yield deps, site


def test_a_page_is_found_by_a_paraphrase_before_the_merge_and_the_same_after_it(topics):
    deps, site = topics
    chunks = len(TOPICS) + 1
    assert _where(deps) == (chunks, 0, 0)  # ingest wrote every vector fresh: none in the HNSW index yet
    before = {q: _hits(deps, q) for q in QUESTIONS}
    assert site.url + "/tides" in [h[0] for h in before[TIDES]]
    assert sum(site.url + path in [h[0] for h in hits] for q, path in QUESTIONS.items()
               for hits in [before[q]]) >= 0.9 * len(QUESTIONS)

    report = merge_fresh(deps.engine)
    assert (report.merged, report.way) == (chunks, MergeWay.REBUILD)  # an empty index: built in bulk
    assert _where(deps) == (0, chunks, 0)
    assert {q: _hits(deps, q) for q in QUESTIONS} == before  # the same hits, the same scores

    again = merge_fresh(deps.engine)  # idempotent: nothing left to move
    assert (again.merged, again.way) == (0, MergeWay.NONE)
    assert {q: _hits(deps, q) for q in QUESTIONS} == before


def test_fresh_vectors_beside_an_indexed_set_are_moved_row_by_row_with_the_same_answers(topics):
    deps, _site = topics
    merge_fresh(deps.engine)  # the topic pages into the HNSW index
    extra = {"/lighthouse": ("Lighthouse keeping", "The keeper trimmed the wick and wound the clockwork that turned"
                             " the lens through the night, so ships could fix their position off the rocks.",
                             "Logbooks recorded the weather, passing vessels and the oil burned.")}
    with TestSite(topic_pages(extra), max_seconds=300) as other:
        _crawl(deps, other, site_domain="coast.test")
    question = "who looked after the lamp that warned sailors away from the reef"
    fresh_now, indexed, _both = _where(deps)
    assert 0 < fresh_now < indexed
    before = _hits(deps, question, site_domain="coast.test")
    assert before[0][0] == other.url + "/lighthouse"
    report = merge_fresh(deps.engine)
    assert (report.merged, report.way) == (fresh_now, MergeWay.MOVE)
    assert _where(deps) == (0, indexed + fresh_now, 0)
    assert _hits(deps, question, site_domain="coast.test") == before


@pytest.mark.parametrize("merged_first", [False, True], ids=["old-version-fresh", "old-version-indexed"])
def test_a_changed_page_s_old_chunks_leave_search_with_the_version_from_either_set(topics, merged_first):
    deps, site = topics
    if merged_first:
        merge_fresh(deps.engine)
    question = "mountains that spew molten rock and ash"
    old = {h[1] for h in _hits(deps, question) if h[0] == site.url + "/volcanoes"}
    assert old
    site.pages["/volcanoes"] = Page(topic_html(
        "Growing tomatoes", "Tomatoes need a sunny spot, support canes and steady watering. Pinch out the side "
        "shoots that grow between the stem and the leaves so the plant puts its strength into the fruit.",
        "Feed them every week once the first flowers open, and pick each tomato when it is fully red."),
        modified=1_700_000_600.0)
    assert _crawl(deps, site)["snapshots"]["changed"] == 1
    for hits in (_hits(deps, question, limit=10), _hits(deps, "magma pumice crater", limit=10)):
        assert not old & {h[1] for h in hits}
    new = _hits(deps, "caring for a red fruit plant in the vegetable patch")
    assert new[0][0] == site.url + "/volcanoes" and new[0][1] not in old
    merge_fresh(deps.engine)
    # The same hits and cosines; the word scores may move in their last digits: the merge's VACUUM counts
    # the table's rows anew (the recrawl added chunks since), and BM25's IDF reads that count.
    assert [h[:5] for h in _hits(deps, "caring for a red fruit plant in the vegetable patch")] == [h[:5] for h in new]
    assert not old & {h[1] for h in _hits(deps, question, limit=10)}


def test_blocked_and_erased_documents_never_come_back_from_the_fresh_set(topics):
    deps, site = topics
    questions = {path: q for q, path in QUESTIONS.items()}
    assert site.url + "/jazz" in [h[0] for h in _hits(deps, questions["/jazz"])]
    add_rule(deps, SITE, "/jazz", "block", reason="not ours to index")
    doc = deps.metadata.document_by_url(site.url + "/wine")
    erase_document(deps.provenance, deps.blobs, deps.blocklist, doc["id"], "asked", "test")
    assert _where(deps)[0] == len(TOPICS) - 1  # the blocked and the erased texts' fresh chunks went with them
    for _ in range(2):  # fresh, then merged
        for path in ("/jazz", "/wine"):
            assert site.url + path not in [h[0] for h in _hits(deps, questions[path], limit=10)]
        merge_fresh(deps.engine)


def test_another_tenant_s_fresh_chunks_stay_out_of_a_site_scope(topics):
    deps, _site = topics
    extra = {"/lighthouse": ("Lighthouse keeping", "The keeper trimmed the wick and wound the clockwork that turned"
                             " the lens through the night, so ships could fix their position off the rocks.",
                             "Logbooks recorded the weather, passing vessels and the oil burned.")}
    with TestSite(topic_pages(extra), max_seconds=300) as other:
        _crawl(deps, other, site_domain="coast.test")
    question = "who looked after the lamp that warned sailors away from the reef"
    assert fresh_count(deps.engine) > len(TOPICS)  # both tenants' chunks are fresh
    with tenancy.scope(SITE):
        seen = search(deps, question, limit=10)["results"]
        assert seen and {h["site_domain"] for h in seen} == {SITE}
        assert search(deps, question, site_domain="coast.test")["results"] == []
    with tenancy.scope("coast.test"):
        assert search(deps, question, limit=1)["results"][0]["url"] == other.url + "/lighthouse"


def _segments(deps):
    """(segments, keys in them) of the fresh scan (gleaner.retrieval.fresh_scan)."""
    with deps.engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        return tuple(conn.execute(sa.text(
            "SELECT count(*), COALESCE(sum(cardinality(hashes)), 0) FROM knowledge.fresh_segments")).one())


def test_a_crawl_never_merges_and_search_finds_its_vectors_through_their_sign_bits(deps, monkeypatch):
    if not deps.search_index.has_vectors():
        pytest.skip("this PostgreSQL has no pgvector")
    calls: list[str] = []
    monkeypatch.setattr(fresh, "merge_fresh", lambda *a, **k: calls.append("merge"))
    with TestSite(topic_pages(), max_seconds=300) as site:
        _crawl(deps, site)
    chunks = len(TOPICS) + 1
    assert calls == [] and _where(deps) == (chunks, 0, 0)
    assert _segments(deps)[1] == chunks  # every fresh vector's bits, for the scan
    monkeypatch.setattr("gleaner.retrieval.fresh_scan.EXACT_BELOW", 0)  # the scan even for a few vectors
    monkeypatch.setattr("gleaner.retrieval.fresh_scan.RESCORED", 4)  # the bits choose 4 of 23 to compare
    assert _hits(deps, MOON)[0][0] == site.url + "/tides"


@pytest.mark.parametrize("rebuild", [False, True], ids=["moving", "rebuilding"])
def test_a_merge_racing_a_crawl_loses_and_doubles_no_vector(deps, monkeypatch, rebuild):
    if not deps.search_index.has_vectors():
        pytest.skip("this PostgreSQL has no pgvector")
    monkeypatch.setattr(fresh, "MERGE_BATCH", 2)
    stop = threading.Event()
    ways: list[MergeWay] = []

    def keep_merging():  # a merger racing the crawl's inserts (a rebuild drops and builds the graph meanwhile)
        while not stop.is_set():
            ways.append(merge_fresh(deps.engine, allow_rebuild=rebuild).way)

    merger = threading.Thread(target=keep_merging)
    merger.start()
    try:
        with TestSite(topic_pages(), max_seconds=300) as site:
            _crawl(deps, site)
    finally:
        stop.set()
        merger.join()
    assert (MergeWay.REBUILD if rebuild else MergeWay.MOVE) in ways
    fresh_left, indexed, both = _where(deps)
    assert both == 0 and fresh_left + indexed == len(TOPICS) + 1  # every vector once, in one of the two sets
    assert merge_fresh(deps.engine).merged == fresh_left
    assert _where(deps) == (0, len(TOPICS) + 1, 0) and _segments(deps) == (0, 0)
    assert _hits(deps, MOON)[0][0] == site.url + "/tides"


def test_while_the_graph_is_rebuilt_its_vectors_are_found_by_the_scan(topics):
    deps, site = topics
    merge_fresh(deps.engine)
    before = _hits(deps, MOON)
    assert _segments(deps) == (0, 0) and before[0][0] == site.url + "/tides"
    with deps.engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:  # a rebuild, stopped midway
        fresh._graph_segments(conn)
        conn.execute(sa.text("DROP INDEX knowledge.text_chunks_embedding"))
        conn.commit()
    # No graph: the scan compares the same vectors, so the answering page is found (the pages that do not
    # answer, and a page's best passage, may differ: they are fused from the candidates each way brings).
    assert _hits(deps, MOON)[0][0] == site.url + "/tides"
    report = merge_fresh(deps.engine)  # no valid graph: built again, the graph's segments dropped
    assert report.way == MergeWay.REBUILD and _segments(deps) == (0, 0)
    assert _hits(deps, MOON)[0][0] == site.url + "/tides"


def test_gleaner_index_merges_what_ingest_left_fresh_and_says_so(topics, database_url, tmp_path):
    from click.testing import CliRunner

    from gleaner.cli import main

    env = {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "cli-home")}
    chunks = len(TOPICS) + 1
    first = CliRunner().invoke(main, ["index", "--json"], env=env)
    assert first.exit_code == 0, first.output
    report = json.loads(first.output)
    assert (report["embedded_now"], report["merged_now"], report["merge"], report["fresh"]) == (
        0, chunks, "rebuild", 0)
    deps, _site = topics
    assert _where(deps) == (0, chunks, 0)
    again = json.loads(CliRunner().invoke(main, ["index", "--json"], env=env).output)
    assert (again["merged_now"], again["merge"]) == (0, "none")


def test_the_binary_vectors_ingest_copies_are_the_embedder_s_float4s_bit_for_bit(deps):
    """Ingest copies vectors in binary (gleaner.retrieval.vectors), under the application role: pgvector
    must store exactly the float4s the text form of the same values gives, signs, zeros, the smallest
    and largest values included, and the temporary table must empty itself at commit."""
    if not deps.search_index.has_vectors():
        pytest.skip("this PostgreSQL has no pgvector")
    import numpy as np

    from gleaner.retrieval.prepare import vector_rows
    from gleaner.retrieval.vectors import TABLE, copy_vectors

    rng = np.random.default_rng(11)
    vectors = rng.uniform(-1, 1, (40, 384)).astype(np.float32)
    edges = np.zeros((4, 384), dtype=np.float32)
    edges[0, -1], edges[1, 0] = 1.0, -1.0
    edges[2] = rng.uniform(-1e-5, 1e-5, 384)
    edges[3] = np.float32(2e-38) * rng.choice([-1, 1], 384)  # near float4's smallest normal magnitude
    vectors = np.vstack([vectors, edges])
    keys = [(f"h{i % 7}", i) for i in range(len(vectors))]
    with deps.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT current_user")).scalar() == "gleaner_app"  # under row-level security
        copy_vectors(conn, vector_rows(keys, vectors.tolist()))
        stored = dict(conn.execute(sa.text(f"SELECT o, CAST(v AS real[]) FROM {TABLE}")).all())
        for (_h, o), vector in zip(keys, vectors, strict=True):
            literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"  # a float4's shortest exact form
            assert conn.execute(sa.text(f"SELECT v = CAST(:a AS public.vector) FROM {TABLE} WHERE o = :o"),
                                {"a": literal, "o": o}).scalar(), o
            assert np.array_equal(np.asarray(stored[o], dtype=np.float32), vector), o
        conn.commit()
        assert conn.execute(sa.text(f"SELECT count(*) FROM {TABLE}")).scalar() == 0  # emptied at commit


def test_the_nearest_of_a_store_whose_vectors_are_all_fresh_are_those_nearest_and_no_others(topics):
    # With every vector fresh, the graph's branch has nothing to offer; read from the table rather than
    # the index, it returned k arbitrary chunks in storage order, so two crawls of the same pages offered
    # search different candidates (migration 0055).
    deps, _site = topics
    vector = "[" + ",".join(f"{x:.6f}" for x in deps.embedder.embed([TIDES])[0]) + "]"
    with deps.engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        exact = conn.execute(sa.text(
            "SELECT text_hash, ordinal FROM knowledge.text_chunks WHERE fresh_embedding IS NOT NULL"
            " ORDER BY fresh_embedding <=> CAST(:v AS vector), text_hash, ordinal LIMIT 3"), {"v": vector}).all()
        conn.execute(sa.text("SET LOCAL enable_indexscan = off"))  # the table read, as a small store's plan
        got = conn.execute(sa.text(
            "SELECT text_hash, ordinal FROM knowledge.search_chunk_candidates(CAST(NULL AS tsquery),"
            " CAST(NULL AS tsquery), CAST(:v AS public.vector), :m, 3, 0, CAST(NULL AS text[]),"
            " CAST(NULL AS text[]), CAST(NULL AS int[]))"), {"v": vector, "m": deps.embedder.model}).all()
        conn.rollback()
    assert sorted(got) == sorted(exact)
