"""The map stage's writes: known documents are found, not rewritten; new ones and the ledger rows land once."""

from __future__ import annotations

from gleaner.store.ledger.discovery import record_discovery
from gleaner.urls import url_hash

from .db_helpers import rows, scalar

SITE = "map.test"


def _rows(*paths, base="http://127.0.0.1:9"):
    return [(base + p, url_hash(base + p), p, base + p) for p in paths]


def _versions(deps):
    """Each document's row version (xmin changes whenever the row is written)."""
    return dict(rows(deps, "SELECT canonical_url, xmin::text FROM knowledge.documents WHERE site_domain = :s", s=SITE))


def test_rediscovered_documents_keep_their_ids_and_are_not_rewritten(deps):
    meta = deps.metadata
    host = meta.upsert_source_host(SITE, "127.0.0.1", own_site=True)
    first = meta.upsert_documents(SITE, host, _rows("/a", "/b"))
    versions = _versions(deps)
    again = meta.upsert_documents(SITE, host, _rows("/a", "/b", "/c"))
    assert {k: again[k] for k in first} == first and len(again) == 3
    assert {k: _versions(deps)[k] for k in versions} == versions


def test_a_known_document_without_a_source_host_adopts_the_runs(deps):
    meta = deps.metadata
    (doc,) = meta.upsert_documents(SITE, None, _rows("/landed")).values()
    host = meta.upsert_source_host(SITE, "127.0.0.1", own_site=True)
    meta.upsert_documents(SITE, host, _rows("/landed"))
    assert str(scalar(deps, "SELECT source_host_id FROM knowledge.documents WHERE id = :d", d=doc)) == host


def test_a_runs_discovery_lands_documents_and_ledger_rows_once(deps):
    meta = deps.metadata
    host = meta.upsert_source_host(SITE, "127.0.0.1", own_site=True)
    meta.create_run("00000000-0000-0000-0000-00000000000a", SITE, host, "http://127.0.0.1:9/", {}, "manual", "api")
    known = meta.upsert_documents(SITE, host, _rows("/a"))
    found = [(*row, depth, via) for row, depth, via in zip(_rows("/", "/a"), (0, 1), ("start", "sitemap"),
                                                            strict=True)]
    run = "00000000-0000-0000-0000-00000000000a"
    assert record_discovery(meta.engine, run, SITE, host, found) == 2
    assert record_discovery(meta.engine, run, SITE, host, found) == 0  # a redelivery adds nothing
    ledger = dict(rows(deps, "SELECT d.path, (c.depth, c.discovered_via)::text FROM knowledge.crawl_page_decisions c"
                             " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r", r=run))
    assert ledger == {"/": "(0,start)", "/a": "(1,sitemap)"}
    assert str(scalar(deps, "SELECT document_id FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d"
                            " ON d.id = c.document_id WHERE d.path = '/a'")) == known["http://127.0.0.1:9/a"]


def test_a_large_discovery_leaves_the_planner_knowing_the_runs_ledger(deps):
    # Scrape updates the ledger 100 URLs at a time; planned against statistics from before the run (a
    # nearly empty table), each update scanned the whole ledger per row: quadratic at 20,000 pages.
    meta = deps.metadata
    host = meta.upsert_source_host(SITE, "127.0.0.1", own_site=True)
    run = "00000000-0000-0000-0000-00000000000b"
    meta.create_run(run, SITE, host, "http://127.0.0.1:9/", {}, "manual", "api")
    found = [(*row, 1, "sitemap") for row in _rows(*(f"/p{i}" for i in range(1200)))]
    assert record_discovery(meta.engine, run, SITE, host, found) == 1200
    known = {name: float(scalar(deps, f"SELECT reltuples FROM pg_class WHERE oid = 'knowledge.{name}'::regclass"))
             for name in ("crawl_page_decisions", "documents")}
    assert known["crawl_page_decisions"] >= 1200 and known["documents"] >= 1200


def test_statistics_that_already_know_enough_rows_are_not_gathered_again(deps, monkeypatch):
    from gleaner.store.ledger import discovery

    monkeypatch.setattr(discovery, "STATISTICS_COVER", 1)  # enough: as many rows as a run adds

    def ledger_rows_known() -> float:
        return float(scalar(deps, "SELECT reltuples FROM pg_class"
                                  " WHERE oid = 'knowledge.crawl_page_decisions'::regclass"))

    meta = deps.metadata
    host = meta.upsert_source_host(SITE, "127.0.0.1", own_site=True)
    found = [(*row, 1, "sitemap") for row in _rows(*(f"/p{i}" for i in range(1200)))]
    for run in ("00000000-0000-0000-0000-00000000000c", "00000000-0000-0000-0000-00000000000d"):
        meta.create_run(run, SITE, host, "http://127.0.0.1:9/", {}, "manual", "api")
        assert record_discovery(meta.engine, run, SITE, host, found) == 1200
        if run.endswith("c"):
            assert ledger_rows_known() >= 1200  # the first run's statistics were gathered
    assert ledger_rows_known() < 2400  # the second run's were not: the first already knew a run's size


def test_a_discovery_larger_than_one_statement_lands_every_url_and_its_decision(deps, monkeypatch):
    from gleaner.store.backends import sqlstore
    from gleaner.store.ledger.records import Decision

    monkeypatch.setattr(sqlstore, "ROWS_PER_STATEMENT", 2)
    meta = deps.metadata
    host = meta.upsert_source_host(SITE, "127.0.0.1", own_site=True)
    run = "00000000-0000-0000-0000-00000000000b"
    meta.create_run(run, SITE, host, "http://127.0.0.1:9/", {}, "manual", "api")
    paths = ("/", "/a", "/b", "/c", "/d")
    found = [(*row, 1, "sitemap") for row in _rows(*paths)]
    assert record_discovery(meta.engine, run, SITE, host, found) == 5
    ids = dict(rows(deps, "SELECT d.path, d.id::text FROM knowledge.crawl_page_decisions c"
                          " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r", r=run))
    assert sorted(ids) == sorted(paths)
    meta.record_decisions(run, [Decision(ids[p], "exclude" if p == "/d" else "include", "rule", "why", 1.0,
                                         {"content_kind": "page", "evidence": []}) for p in paths])
    decided = dict(rows(deps, "SELECT d.path, c.decision::text FROM knowledge.crawl_page_decisions c"
                              " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r", r=run))
    assert decided == {p: "exclude" if p == "/d" else "include" for p in paths}
