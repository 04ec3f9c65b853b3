"""Pages that answer 304 are settled once in the ledger, and their documents record when they were last seen."""

from __future__ import annotations

from gleaner.messages import ScrapeBatch
from gleaner.runtime.runner import crawl, new_request
from gleaner.stages import dispatch

from .db_helpers import rows
from .sites import demo_site

SITE = "demo.test"


def _documents(deps):
    return {r[0]: r[1:] for r in rows(
        deps, "SELECT path, last_seen_at, last_fetched_at, http_etag, title, status::text FROM knowledge.documents"
              " WHERE current_snapshot_id IS NOT NULL")}


def _ledger(deps, run_id):
    return {r[0]: r[1:] for r in rows(
        deps, "SELECT d.path, c.fetch_outcome::text, c.fetch_status, c.snapshot_outcome::text, c.fetched_at,"
              " c.fetched_content_hash FROM knowledge.crawl_page_decisions c"
              " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r AND c.decision = 'include'"
              " AND c.fetch_outcome IS NOT NULL", r=run_id)}


def test_a_304_settles_the_page_unchanged_and_moves_its_document_seen_and_fetched_times_only(deps):
    with demo_site() as site:
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        before = _documents(deps)
        second = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        after = _documents(deps)
        ledger = _ledger(deps, second["run_id"])
        asked = len(site.log)
        for no, ids in enumerate(deps.metadata.batches_of(second["run_id"])):  # a redelivery of every task
            dispatch(ScrapeBatch(run_id=second["run_id"], site_domain=SITE, batch_no=no, document_ids=tuple(ids)),
                     deps)
        assert len(site.log) == asked  # settled pages are not fetched again
    settled = {p: v for p, v in ledger.items() if v[0] == "not-modified"}
    assert len(settled) == len(before) == second["not_modified"]
    assert all((status, snap, content) == (304, "unchanged", None) for _o, status, snap, _at, content in
               settled.values())
    for path, (seen, fetched, etag, title, status) in after.items():
        old_seen, old_fetched, *unchanged = before[path]
        assert seen > old_seen and fetched > old_fetched and [etag, title, status] == unchanged
    assert _ledger(deps, second["run_id"]) == ledger and _documents(deps) == after
    assert deps.metadata.run_summary(second["run_id"])["status"] == "finished"
