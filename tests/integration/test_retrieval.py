"""Search over the kept copy: paraphrased questions find their page, and only what may be searched is found.

Real components: the embedded PostgreSQL with pgvector, the packaged models (each loaded once per test
session: gleaner.retrieval.embedder.default_embedder; the static model's table is distilled once per
machine and cached), a loopback site of pages on distinct topics.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from gleaner import tenancy
from gleaner.cli.info import _search_mode
from gleaner.demosite.testsite import Page, TestSite
from gleaner.messages import ArticlesAccepted
from gleaner.operator.rules import add_rule
from gleaner.provenance.slices import slice_text_bytes
from gleaner.retrieval import ranking, search
from gleaner.retrieval.index import embed_pending
from gleaner.retrieval.references import embed_references, search_references
from gleaner.runtime.runner import crawl, new_request
from gleaner.stages import dispatch
from gleaner.store.documents.erasure import erase_document
from gleaner.store.feeds.references import ArticleRow
from tests.integration.paraphrase_site import QUESTIONS, TOPICS, recall, topic_html, topic_pages

SITE = "topics.test"


def _crawl(deps, site, site_domain=SITE):
    return crawl(deps, new_request(site.url + "/", site_domain=site_domain))


def _urls(deps, query, site_domain=SITE, limit=3):
    return [r["url"] for r in search(deps, query, site_domain=site_domain, limit=limit)["results"]]


def _scalar(deps, sql, **params):
    with deps.engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar()


@pytest.fixture
def crawled(deps):
    """The topic site crawled (the default static model embeds at ingest): (deps, site)."""
    with TestSite(topic_pages(), max_seconds=300) as site:
        _crawl(deps, site)
        yield deps, site


@pytest.fixture
def topics(crawled):
    """The topic site crawled and embedded (GLEANER_TEST_DATABASE_URL may name a server without pgvector)."""
    deps, site = crawled
    if not deps.search_index.has_vectors():
        pytest.skip("this PostgreSQL has no pgvector: only the full-text fallback applies")
    # Every chunk got its vector in the transaction that ingested its page: nothing is left to embed.
    assert embed_pending(deps.search_index, deps.embedder) == 0
    assert deps.search_index.counts()["embedded"] == {deps.embedder.model: len(TOPICS) + 1}
    return deps, site


def test_without_pgvector_search_ranks_by_full_text_alone(crawled):
    deps, site = crawled
    deps.search_index._vectors = False  # what has_vectors() finds on a server without the extension
    hits = search(deps, "molten magma from the crater", site_domain=SITE)["results"]
    assert hits[0]["url"] == site.url + "/volcanoes"
    assert all(h["embedding_score"] is None and 0 < h["score"] <= 1 for h in hits)
    assert [h["page_rank"] for h in hits] == list(range(1, len(hits) + 1))


def test_paraphrased_questions_find_their_page_in_the_top_three(topics):
    deps, site = topics
    assert len(TOPICS) >= 20 and len(QUESTIONS) >= 20
    answers = {q: search(deps, q, site_domain=SITE, limit=3) for q in QUESTIONS}
    figures = recall({q: [r["url"] for r in a["results"]] for q, a in answers.items()}, site.url)
    print(f"\nparaphrase recall over {figures['questions']} questions: "
          f"@1 {figures['recall@1']:.2f}, @3 {figures['recall@3']:.2f}")
    assert figures["recall@3"] == 1.0  # pages sharing a stray word with a question no longer push its page out
    for answer in answers.values():
        for hit in answer["results"]:
            assert 0 <= hit["embedding_score"] <= 1 and 0 <= hit["fulltext_score"] <= 1 and 0 < hit["score"] <= 1
            # The hit is a verbatim slice: what `gleaner slice` prints is the chunk the preview shows.
            body = deps.provenance.text_bytes(hit["text_hash"])
            piece = slice_text_bytes(hit["text_hash"], body, hit["start"], hit["end"], whole_characters=False)
            assert " ".join(piece.data.decode().split())[:60] == hit["preview"][:60]
        scores = [h["score"] for h in answer["results"]]
        assert scores == sorted(scores, reverse=True)
        # One passage a page: the best pages, ranked.
        assert len({h["url"] for h in answer["results"]}) == len(answer["results"])
        assert [h["page_rank"] for h in answer["results"]] == list(range(1, len(answer["results"]) + 1))


def test_a_long_page_answers_once_with_its_best_passage_and_leaves_room_for_other_pages(deps):
    sections = "".join(
        f"<h2>{name}</h2><p>{text} Volcanoes erupt lava and ash when magma rises through the crater.</p>"
        for name, text in (("Shield volcanoes", "Runny basalt lava flows far from the vent."),
                           ("Stratovolcanoes", "Layers of ash and lava build steep cones."),
                           ("Calderas", "A crater collapses after the magma chamber empties."),
                           ("Fissures", "Lava pours from long cracks in the ground."),
                           ("Monitoring", "Seismometers and gas sensors warn before an eruption."),
                           ("Pumice", "Frothy rock from an explosive eruption floats on water.")))
    pages = topic_pages()
    links = "".join(f'<li><a href="{path}">{title}</a></li>' for path, (title, _a, _b) in TOPICS.items())
    pages["/"] = Page(f"<html><head><title>Topics</title></head><body><ul>{links}"
                      '<li><a href="/volcano-atlas">Volcano atlas</a></li></ul></body></html>')
    pages["/volcano-atlas"] = Page(f"<html><head><title>Volcano atlas</title></head><body><main><article>"
                                   f"<h1>Volcano atlas</h1>{sections}</article></main></body></html>")
    with TestSite(pages, max_seconds=300) as site:
        _crawl(deps, site)
    hits = search(deps, "volcano lava eruption crater", site_domain=SITE, limit=3)["results"]
    urls = [h["url"] for h in hits]
    assert len(urls) == 3 and len(set(urls)) == 3  # not three passages of the atlas
    assert {site.url + "/volcano-atlas", site.url + "/volcanoes"} <= set(urls)
    atlas = next(h for h in hits if h["url"].endswith("/volcano-atlas"))
    body = deps.provenance.text_bytes(atlas["text_hash"])
    assert b"Volcano" in body[atlas["start"]:atlas["end"]] or b"lava" in body[atlas["start"]:atlas["end"]]


def test_a_question_sharing_one_rare_word_with_a_page_finds_it(crawled):
    # Any word of the query selects (BM25), not every word: one rare word among unknown ones is enough.
    deps, site = crawled
    hits = search(deps, "quartz xylophone sourdough ferret", site_domain=SITE)["results"]
    assert hits and hits[0]["url"] == site.url + "/sourdough" and hits[0]["fulltext_score"] > 0


def test_a_question_nothing_answers_gets_no_results_and_a_note_saying_so(crawled):
    deps, _site = crawled
    answer = search(deps, "xyzzy plugh frobnicate", site_domain=SITE)
    assert answer["results"] == [] and "no good match" in answer["note"]
    assert "note" not in search(deps, "why does the sea at the shore rise and fall with the moon", site_domain=SITE)


def test_an_unchanged_recrawl_embeds_nothing_and_a_changed_page_leaves_the_index_with_its_version(topics):
    deps, site = topics
    chunks = _scalar(deps, "SELECT count(*) FROM knowledge.text_chunks")
    _crawl(deps, site)
    assert embed_pending(deps.search_index, deps.embedder) == 0
    assert _scalar(deps, "SELECT count(*) FROM knowledge.text_chunks") == chunks

    old_hash = _scalar(deps, "SELECT i.text_hash FROM knowledge.search_index i JOIN knowledge.documents d"
                             " ON d.id = i.document_id WHERE d.canonical_url = :u", u=site.url + "/volcanoes")
    site.pages["/volcanoes"] = Page(topic_html(
        "Growing tomatoes", "Tomatoes need a sunny spot, support canes and steady watering. Pinch out the side "
        "shoots that grow between the stem and the leaves so the plant puts its strength into the fruit.",
        "Feed them every week once the first flowers open, and pick each tomato when it is fully red."),
        modified=1_700_000_600.0)
    assert _crawl(deps, site)["snapshots"]["changed"] == 1
    # The old version's chunks are out; the new text is in, by its words and (embedded at ingest) its meaning.
    hits = search(deps, "magma pumice crater", site_domain=SITE)["results"]
    assert all(h["text_hash"] != old_hash for h in hits)
    assert _urls(deps, "caring for a red fruit plant in the vegetable patch")[:1] == [site.url + "/volcanoes"]
    assert _scalar(deps, "SELECT count(*) FROM knowledge.text_chunks") == chunks  # one new chunk in, the old out
    assert embed_pending(deps.search_index, deps.embedder) == 0
    assert site.url + "/volcanoes" not in _urls(deps, "mountains that spew molten rock and ash")


def test_with_embedding_after_the_crawl_new_chunks_wait_and_are_found_by_their_words(make_deps):
    deps = make_deps(embed_after_crawl=False)
    if not deps.search_index.has_vectors():
        pytest.skip("this PostgreSQL has no pgvector")
    with TestSite(topic_pages(), max_seconds=300) as site:
        _crawl(deps, site)
    assert deps.search_index.counts()["embedded"] == {}
    assert site.url + "/tides" in _urls(deps, "tides moon bulges")
    assert embed_pending(deps.search_index, deps.embedder) == len(TOPICS) + 1
    assert _urls(deps, "why does the sea at the shore rise and fall with the moon")[:1] == [site.url + "/tides"]


def test_a_model_change_is_a_reembedding_and_search_never_ranks_two_models_together(topics, make_deps):
    deps, site = topics
    question = "why does the sea at the shore rise and fall with the moon"
    minilm = make_deps(embed_model="minilm")
    assert minilm.inline_embedder() is None  # the transformer never runs inside ingest
    # Before the re-embedding, the MiniLM process finds pages by their words only: no vector of its model.
    hits = search(minilm, "moon gravity tides", site_domain=SITE)["results"]
    assert hits and all(h["embedding_score"] == 0 for h in hits)
    dropped = minilm.search_index.drop_other_models(minilm.embedder.model)  # what `gleaner index --reembed` does
    assert dropped == len(TOPICS) + 1
    assert embed_pending(minilm.search_index, minilm.embedder) == len(TOPICS) + 1
    assert minilm.search_index.counts()["embedded"] == {"all-MiniLM-L6-v2-int8": len(TOPICS) + 1}
    assert _urls(minilm, question)[:1] == [site.url + "/tides"]
    hits = search(deps, "moon gravity tides", site_domain=SITE)["results"]
    assert hits and all(h["embedding_score"] == 0 for h in hits)  # the static process: none of its vectors left
    # `gleaner info` in the static process says why: the index holds the other model's vectors.
    mode = _search_mode(deps.engine, "static")
    assert f"{len(TOPICS) + 1} by all-MiniLM-L6-v2-int8" in mode and "gleaner index --reembed" in mode
    assert "another model" not in _search_mode(deps.engine, "minilm")


def test_blocked_erased_and_unrouted_documents_never_appear(topics):
    deps, site = topics
    questions = {path: q for q, path in QUESTIONS.items()}
    before = {path: _urls(deps, questions[path]) for path in ("/jazz", "/wine", "/knitting")}
    assert all(site.url + path in urls for path, urls in before.items())

    add_rule(deps, SITE, "/jazz", "block", reason="not ours to index")
    doc = deps.metadata.document_by_url(site.url + "/wine")
    erase_document(deps.provenance, deps.blobs, deps.blocklist, doc["id"], "asked", "test")
    with deps.engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge.document_routings SET enabled = false WHERE document_id ="
                             " (SELECT id FROM knowledge.documents WHERE canonical_url = :u)"),
                     {"u": site.url + "/knitting"})

    for path in ("/jazz", "/wine", "/knitting"):
        assert site.url + path not in _urls(deps, questions[path], limit=10)
    assert _scalar(deps, "SELECT count(*) FROM knowledge.search_index WHERE document_id = :d", d=doc["id"]) == 0
    assert _scalar(deps, "SELECT kb_indexed FROM knowledge.documents WHERE canonical_url = :u",
                   u=site.url + "/jazz") is False
    # The erased text's chunks went with the text.
    assert _scalar(deps, "SELECT count(*) FROM knowledge.text_chunks c WHERE NOT EXISTS"
                         " (SELECT 1 FROM knowledge.canonical_texts t WHERE t.text_hash = c.text_hash)") == 0


def test_a_site_scope_sees_only_its_site_and_shares_the_chunks_of_identical_text(topics):
    deps, site = topics
    chunks = _scalar(deps, "SELECT count(*) FROM knowledge.text_chunks")
    _crawl(deps, site, site_domain="mirror.test")
    assert embed_pending(deps.search_index, deps.embedder) == 0  # same texts: nothing new to embed
    assert _scalar(deps, "SELECT count(*) FROM knowledge.text_chunks") == chunks
    question = "why does the sea at the shore rise and fall with the moon"
    for tenant in (SITE, "mirror.test"):
        with tenancy.scope(tenant):
            hits = search(deps, question, limit=10)["results"]
        assert hits and {h["site_domain"] for h in hits} == {tenant}
    with tenancy.scope(SITE):
        assert search(deps, question, site_domain="mirror.test")["results"] == []
    assert {h["site_domain"] for h in search(deps, question, limit=10)["results"]} == {SITE, "mirror.test"}


def test_a_text_two_tenants_share_is_found_only_through_a_document_that_may_be_searched(topics):
    # The candidates are scored chunks of texts, shared by content; a hit needs a searchable document
    # of the caller's holding that text: one tenant's block must not hide it from the other, nor the
    # other's document lend it to the blocked one.
    deps, site = topics
    _crawl(deps, site, site_domain="mirror.test")
    add_rule(deps, "mirror.test", "/tides", "block", reason="not for this tenant's assistant")
    question = "why does the sea at the shore rise and fall with the moon"
    with tenancy.scope("mirror.test"):
        mirrored = _urls(deps, question, site_domain=None, limit=10)
    with tenancy.scope(SITE):
        own = _urls(deps, question, site_domain=None, limit=10)
    assert mirrored and site.url + "/tides" not in mirrored
    assert own[0] == site.url + "/tides"
    assert {h["site_domain"] for h in search(deps, question, limit=10)["results"]} == {SITE, "mirror.test"}


def test_a_small_tenant_finds_its_page_when_other_tenants_hold_every_nearest_chunk(topics, monkeypatch):
    deps, _site = topics
    pages = topic_pages({"/lighthouse": ("Keeping a lighthouse",
                                         "The keeper trimmed the wick and wound the clockwork that turned the lens "
                                         "through the night, so ships could fix their position off the rocks.",
                                         "Logbooks recorded the weather, passing vessels and the oil burned.")})
    with TestSite(pages, max_seconds=300) as small:
        _crawl(deps, small, site_domain="small.test")
    embed_pending(deps.search_index, deps.embedder)
    # A question on the topic site's tide page: over every tenant's chunks its nearest is the topic
    # site's, invisible to small.test, whose nearest is then found among its own texts only. (The
    # lighthouse's chunk is the second nearest: one candidate by meaning, one answer.)
    monkeypatch.setattr(ranking, "CANDIDATES", 1)
    question = "why does the sea at the shore rise and fall with the moon"
    assert small.url + "/lighthouse" not in _urls(deps, question, site_domain=None, limit=1)
    with tenancy.scope("small.test"):
        hits = search(deps, question, limit=1)["results"]
    assert [h["url"] for h in hits][:1] == [small.url + "/lighthouse"]
    assert {h["site_domain"] for h in hits} == {"small.test"}


def test_a_small_tenant_finds_its_page_by_meaning_past_more_nearest_chunks_than_the_index_scans(topics):
    # More chunks of another tenant nearer to the question than the HNSW scan looks at (ef_search):
    # filtering that scan's rows to small.test's texts would leave nothing; its own chunks are compared.
    deps, site = topics
    pages = topic_pages({"/lighthouse": ("Keeping a lighthouse",
                                         "The keeper trimmed the wick and wound the clockwork that turned the lens "
                                         "through the night, so ships could fix their position off the rocks.",
                                         "Logbooks recorded the weather, passing vessels and the oil burned.")})
    with TestSite(pages, max_seconds=300) as small:
        _crawl(deps, small, site_domain="small.test")
    embed_pending(deps.search_index, deps.embedder)
    question = "why does the sea at the shore rise and fall with the moon"
    near = deps.embedder.embed([question])[0]
    tides = _scalar(deps, "SELECT i.text_hash FROM knowledge.search_index i JOIN knowledge.documents d"
                          " ON d.id = i.document_id WHERE d.canonical_url = :u", u=site.url + "/tides")
    # 3 x ranking.CANDIDATES chunks of the topic site, each the question's vector a little off (distinct
    # vectors: the index keeps equal ones as one element).
    rng = random.Random(5)
    with deps.engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO knowledge.text_chunks (text_hash, ordinal, chunk_start, chunk_end, tsv, embedding_model,"
            " embedding_dim, embedding) VALUES (:h, :o, 0, 1, to_tsvector(''), :m, 384, CAST(:v AS public.vector))"),
            [{"h": tides, "o": 1000 + n, "m": deps.embedder.model,
              "v": "[" + ",".join(f"{x + rng.uniform(-0.002, 0.002):.6f}" for x in near) + "]"}
             for n in range(3 * ranking.CANDIDATES)])

    def as_on_a_large_table(conn):  # the planner reads a few hundred chunks whole rather than by index
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")

    sa.event.listen(deps.engine, "begin", as_on_a_large_table)
    try:
        with tenancy.scope("small.test"):
            hits = search(deps, question, limit=3)["results"]
    finally:
        sa.event.remove(deps.engine, "begin", as_on_a_large_table)
    assert [h["url"] for h in hits][:1] == [small.url + "/lighthouse"]
    assert {h["site_domain"] for h in hits} == {"small.test"}


def test_feed_references_are_not_site_documents_and_are_never_found_by_site_search(topics):
    deps, site = topics
    (row_id,) = deps.references.record_articles([ArticleRow(
        workspace_id="w", external_url=site.url + "/tides", normalised_url=site.url + "/tides",
        title="Tides", summary=None, published_at=datetime(2026, 6, 1, tzinfo=UTC), feed_source=None)])
    dispatch(ArticlesAccepted(article_ids=(row_id,)), deps)
    assert deps.references.counts()["reference_items"] == 1
    reference_doc = "SELECT id FROM knowledge.documents WHERE site_domain = '_references'"
    assert _scalar(deps, "SELECT count(*) FROM knowledge.document_routings"
                         f" WHERE document_id IN ({reference_doc})") == 0
    assert _scalar(deps, "SELECT count(*) FROM knowledge.document_events WHERE site_domain = '_references'") == 0
    embed_pending(deps.search_index, deps.embedder)
    hits = search(deps, "why does the sea at the shore rise and fall with the moon", limit=20)["results"]
    assert hits and all(h["site_domain"] == SITE for h in hits)

    # The reference's own search: the whole record embedded, both scores and their blend.
    assert embed_references(deps, deps.embedder) == 1
    (ref,) = search_references(deps, "why does the sea at the shore rise and fall with the moon", 5)
    assert ref["source_url"] == site.url + "/tides" and 0 < ref["embedding_score"] <= 1
    assert ref["score"] == pytest.approx(0.6 * ref["embedding_score"] + 0.4 * ref["fulltext_score"], abs=1e-5)
    assert "embedding" not in deps.references.get(ref["reference_id"])


def test_the_search_endpoint_answers_in_the_callers_scope(topics):
    from gleaner.backoffice.api import Access, ApiRequest, handle

    deps, site = topics
    question = "repairing a flat tyre on my bike"
    status, body = handle(ApiRequest("GET", "/v1/search", {"q": question, "site": SITE, "limit": "2"}), deps)
    assert status == 200 and body["query"] == question
    assert len(body["results"]) == 2 and body["results"][0]["url"] == site.url + "/bicycle"
    with tenancy.scope("other.test"):
        answer = handle(ApiRequest("GET", "/v1/search", {"q": question, "site": SITE},
                                   access=Access(site_domain="other.test")), deps)
        assert answer[0] == 404
        status, body = handle(ApiRequest("GET", "/v1/search", {"q": question}, access=Access("other.test")), deps)
        assert status == 200 and body["results"] == []
    assert handle(ApiRequest("GET", "/v1/search", {"q": " "}), deps)[0] == 400
    assert handle(ApiRequest("GET", "/v1/search", {"q": question, "limit": "0"}), deps)[0] == 400


def test_a_skill_routing_gets_one_handover_record_and_event_per_version(topics):
    from gleaner.provenance.canonical import canonicalise

    deps, site = topics
    doc = deps.metadata.document_by_url(site.url + "/taxes")
    with deps.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO knowledge.document_routings (site_domain, document_id, destination,"
                             " target_ref) VALUES (:s, :d, 'skill', 'tax-helper')"), {"s": SITE, "d": doc["id"]})
    item = (doc["current_snapshot_id"], canonicalise(b"# Filing your income tax return\n"))
    for _ in range(2):  # a redelivered ingest hands nothing over twice
        deps.search_index.index_snapshots([item])
    assert _scalar(deps, "SELECT count(*) FROM knowledge.routing_handovers WHERE document_id = :d"
                         " AND destination = 'skill' AND target_ref = 'tax-helper'", d=doc["id"]) == 1
    assert _scalar(deps, "SELECT count(*) FROM knowledge.document_events WHERE document_id = :d"
                         " AND type = 'routing.handover'", d=doc["id"]) == 1


def test_the_candidate_function_gives_keys_and_numbers_never_text(deps):
    # knowledge.search_chunk_candidates reads every tenant's chunks as their owner; what keeps another
    # tenant's words from the caller is that it returns no text, and that only the application role
    # may call it, with a search_path it cannot redirect.
    if not deps.search_index.has_vectors():
        pytest.skip("this PostgreSQL has no pgvector: the function does not exist")
    with deps.engine.connect() as conn:
        row = conn.execute(sa.text(
            "SELECT p.prosecdef, p.proconfig, pg_get_function_result(p.oid) AS result,"
            " has_function_privilege('public', p.oid, 'EXECUTE') AS public,"
            " has_function_privilege('gleaner_app', p.oid, 'EXECUTE') AS app"
            " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'knowledge' AND p.proname = 'search_chunk_candidates'")).mappings().one()
    assert row["prosecdef"] and row["proconfig"] == ["search_path=pg_catalog, pg_temp"]
    assert row["result"] == ("TABLE(text_hash text, ordinal integer, chunk_start integer, chunk_end integer,"
                             " embedding_score double precision, fulltext_score double precision)")
    assert row["app"] and not row["public"]


def test_the_word_function_gives_keys_and_numbers_never_text(deps):
    # knowledge.search_chunk_words (BM25 candidates) reads every tenant's chunks as their owner too.
    with deps.engine.connect() as conn:
        row = conn.execute(sa.text(
            "SELECT p.prosecdef, p.proconfig, pg_get_function_result(p.oid) AS result,"
            " has_function_privilege('public', p.oid, 'EXECUTE') AS public,"
            " has_function_privilege('gleaner_app', p.oid, 'EXECUTE') AS app"
            " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'knowledge' AND p.proname = 'search_chunk_words'")).mappings().one()
    assert row["prosecdef"] and row["proconfig"] == ["search_path=pg_catalog, pg_temp"]
    assert row["result"] == ("TABLE(text_hash text, ordinal integer, chunk_start integer, chunk_end integer,"
                             " chunk_score double precision, page_score double precision, coverage double precision,"
                             " query_weight double precision)")
    assert row["app"] and not row["public"]
