"""The run ledger (one row per URL per run) is written as few times as its stages allow.

Map inserts each row with what it knows (depth, how it was found, the sitemap's
lastmod, the walk's kept answer); sample writes each row's decision with its scrape
batch in one update. A row version is a transaction's: ``xmin`` tells which
transaction last wrote a row, so rows that share it were written together.
"""

from __future__ import annotations

from datetime import UTC, datetime

from gleaner.demosite.testsite import TestSite
from gleaner.messages import CrawlMapped
from gleaner.operator.lastmod import parse_lastmod
from gleaner.runtime.runner import new_request
from gleaner.store.ledger.discovery import record_discovery
from gleaner.store.ledger.records import Decision
from gleaner.urls import url_hash

from .db_helpers import rows
from .test_operator_control import lastmod_site

SITE = "ledger.test"
RUN = "00000000-0000-0000-0000-0000000000e1"


def ledger(deps, run_id: str) -> dict[str, tuple]:
    """path -> (xmin, sitemap_lastmod, prefetched outcome, decision, batch_no) of the run's ledger rows."""
    return {r[0]: tuple(r[1:]) for r in rows(
        deps, "SELECT d.path, c.xmin::text, c.sitemap_lastmod, c.prefetched ->> 'outcome', c.decision::text,"
              " c.batch_no FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id"
              " WHERE c.run_id = :r", r=run_id)}


def test_map_inserts_each_ledger_row_once_with_its_sitemap_lastmod_and_the_walks_answer(deps):
    from gleaner.stages import map as map_stage

    pages: dict = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(lastmod_site(site.url, {"a": "2020-01-01", "b": "2021-06-01T10:00:00Z"}))
        request = new_request(site.url + "/", site_domain=SITE)
        map_stage.handle(request, deps)
    rows_ = ledger(deps, request.run_id)
    assert sorted(rows_) == ["/", "/docs/a", "/docs/b"]
    assert len({xmin for xmin, *_ in rows_.values()}) == 1  # one transaction wrote them all, none since
    assert rows_["/docs/a"][1] == parse_lastmod("2020-01-01")  # a day alone reads as its end
    assert rows_["/docs/b"][1] == datetime(2021, 6, 1, 10, tzinfo=UTC)
    assert rows_["/"][2] == "fetched"  # the walk read the start page: scrape will not ask again


def test_sample_writes_each_ledger_rows_decision_and_scrape_batch_in_one_update(deps):
    from gleaner.stages import map as map_stage
    from gleaner.stages import sample as sample_stage

    pages: dict = {}
    with TestSite(pages, max_seconds=60) as site:
        pages.update(lastmod_site(site.url, {f"p{i}": "2020-01-01" for i in range(5)}))
        request = new_request(site.url + "/", site_domain=SITE)
        map_stage.handle(request, deps)
        mapped = {path: row[0] for path, row in ledger(deps, request.run_id).items()}
        tasks = sample_stage.handle(CrawlMapped(run_id=request.run_id, site_domain=SITE), deps)
    rows_ = ledger(deps, request.run_id)
    assert len({xmin for xmin, *_ in rows_.values()}) == 1  # the decisions' write, and no batch write after it
    assert all(rows_[path][0] != xmin for path, xmin in mapped.items())
    included = {path for path, row in rows_.items() if row[3] == "include"}
    assert len(included) == 6 and all(rows_[path][4] is not None for path in included)
    assert deps.metadata.batches_of(request.run_id) == [sorted(t.document_ids) for t in tasks]


def _run_with_pages(deps, paths: tuple[str, ...]) -> dict[str, str]:
    meta = deps.metadata
    host = meta.upsert_source_host(SITE, "127.0.0.1", own_site=True)
    meta.create_run(RUN, SITE, host, "http://127.0.0.1:9/", {}, "manual", "api")
    base = "http://127.0.0.1:9"
    found = [(base + p, url_hash(base + p), p, base + p, 1, "sitemap") for p in paths]
    assert record_discovery(meta.engine, RUN, SITE, host, found) == len(paths)
    meta.set_run_status(RUN, "sampling")
    return {r[0]: r[1] for r in rows(deps, "SELECT d.path, d.id::text FROM knowledge.crawl_page_decisions c"
                                           " JOIN knowledge.documents d ON d.id = c.document_id"
                                           " WHERE c.run_id = :r", r=RUN)}


def _include(ids: dict[str, str]) -> list[Decision]:
    return [Decision(doc, "include", "rule", "why", 1.0, {"content_kind": "page", "evidence": []})
            for doc in ids.values()]


def test_a_redelivered_map_fills_in_what_the_first_delivery_left_out_and_adds_no_row(deps):
    ids = _run_with_pages(deps, ("/a", "/b"))
    base = "http://127.0.0.1:9"
    found = [(base + p, url_hash(base + p), p, base + p, 1, "sitemap") for p in ("/a", "/b")]
    host = deps.metadata.upsert_source_host(SITE, "127.0.0.1", own_site=True)
    lastmod = datetime(2020, 1, 1, tzinfo=UTC)
    answer = {"outcome": "not-modified", "status": 304}
    assert record_discovery(deps.metadata.engine, RUN, SITE, host, found, {base + "/a": lastmod},
                            {base + "/b": answer}) == 0
    rows_ = ledger(deps, RUN)
    assert rows_["/a"][1:3] == (lastmod, None) and rows_["/b"][1:3] == (None, "not-modified")
    assert len(ids) == 2


def test_a_redelivered_sample_of_a_run_already_scraping_leaves_its_enqueued_batches_alone(deps):
    meta = deps.metadata
    ids = _run_with_pages(deps, ("/a", "/b", "/c"))
    a, b, c = ids["/a"], ids["/b"], ids["/c"]
    meta.record_decisions(RUN, _include(ids), {a: 0, b: 0, c: 1})
    assert meta.start_scrape(RUN, [[a, b], [c]])
    meta.record_decisions(RUN, _include(ids), {a: 0, b: 1, c: 2})  # decided again, batched otherwise
    assert meta.batches_of(RUN) == [sorted([a, b]), [c]]


def test_two_samples_racing_end_with_the_batches_of_the_one_that_started_the_scrape(deps):
    meta = deps.metadata
    ids = _run_with_pages(deps, ("/a", "/b", "/c"))
    a, b, c = ids["/a"], ids["/b"], ids["/c"]
    meta.record_decisions(RUN, _include(ids), {a: 0, b: 0, c: 1})  # the first delivery
    meta.record_decisions(RUN, _include(ids), {a: 0, b: 1, c: 2})  # the second, before either starts the scrape
    assert meta.start_scrape(RUN, [[a, b], [c]])  # the first wins: its tasks are the ones enqueued
    assert not meta.start_scrape(RUN, [[a], [b], [c]])
    assert meta.batches_of(RUN) == [sorted([a, b]), [c]]


def test_a_late_sample_delivery_does_not_replace_the_decisions_the_scrape_acts_on(deps):
    """A sample pushed again while its first delivery was still sampling (a slow render past the ack
    deadline) may decide otherwise (its render timed out): once the first started the scrape, the late
    one's decisions are not written, so the enqueued batches' pages stay included."""
    meta = deps.metadata
    ids = _run_with_pages(deps, ("/app/a", "/app/b"))
    a, b = ids["/app/a"], ids["/app/b"]
    meta.record_decisions(RUN, _include(ids), {a: 0, b: 0})
    assert meta.start_scrape(RUN, [[a, b]])
    late = [Decision(doc, "exclude", "rule", "too little text", 0.9, {"content_kind": "thin", "evidence": []})
            for doc in ids.values()]
    meta.record_decisions(RUN, late, {})
    decided = rows(deps, "SELECT decision::text, batch_no FROM knowledge.crawl_page_decisions WHERE run_id = :r",
                   r=RUN)
    assert sorted(decided) == [("include", 0), ("include", 0)]
    assert {r[0] for r in rows(deps, "SELECT scrape_policy::text FROM knowledge.documents WHERE id = ANY("
                                     "CAST(:ids AS uuid[]))", ids=[a, b])} == {"scrape"}
