"""Run control in the store: the cloud's sweep tells a run waiting its turn in the scrape queue from a
stuck one, and a run's URL listing gives every included URL a status whatever stopped the run."""

from __future__ import annotations

import sqlalchemy as sa

from gleaner.errors import PermanentError
from gleaner.runtime.runcontrol import claim_for_resume, sweep
from gleaner.store.ledger.discovery import record_discovery
from gleaner.store.ledger.runstate import RunStatus, Worker
from gleaner.urls import url_hash

LIMIT = 1800.0
WAITING, BUSY = "00000000-0000-0000-0000-0000000000b1", "00000000-0000-0000-0000-0000000000b2"


def _cloud_run(deps, run_id: str, site: str, idle: float) -> None:
    meta = deps.metadata
    host = meta.upsert_source_host(site, site, own_site=True)
    meta.create_run(run_id, site, host, f"https://{site}/", {}, "manual", "api")
    with deps.engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge.crawl_runs SET status = 'scraping', batches_total = 4,"
                             " heartbeat_at = now() - make_interval(secs => :idle) WHERE id = :r"),
                     {"idle": idle, "r": run_id})


def test_a_scraping_run_is_not_swept_while_other_runs_batches_keep_the_queue_busy(deps):
    _cloud_run(deps, WAITING, "waiting.test", idle=2 * LIMIT)  # its batches queued behind the big crawl
    _cloud_run(deps, BUSY, "busy.test", idle=5)
    assert sweep(deps.metadata, LIMIT) == []
    # Nor can a resume take it from under the queue.
    try:
        claim_for_resume(deps.metadata, WAITING, Worker.current(), LIMIT)
    except PermanentError as exc:
        assert "may still be running it" in str(exc)
    else:
        raise AssertionError("a run waiting in the queue was taken over")


def test_once_the_whole_queue_is_quiet_past_the_limit_the_stuck_runs_are_settled(deps):
    _cloud_run(deps, WAITING, "waiting.test", idle=2 * LIMIT)
    _cloud_run(deps, BUSY, "busy.test", idle=LIMIT + 60)
    settled = {s.run_id: s.now for s in sweep(deps.metadata, LIMIT)}
    assert set(settled) == {WAITING, BUSY}  # (a run without included pages left settles finished)
    assert settled[WAITING] in (RunStatus.INTERRUPTED, RunStatus.FINISHED)


def test_an_included_url_is_pending_while_its_run_is_active_and_not_attempted_once_it_stopped(deps):
    """`runs RUN_ID --urls` accounts for every included URL whatever stopped the run."""
    meta = deps.metadata
    host = meta.upsert_source_host("stopped.test", "stopped.test", own_site=True)
    run = "00000000-0000-0000-0000-0000000000c1"
    meta.create_run(run, "stopped.test", host, "https://stopped.test/", {}, "manual", "api")
    found = [("https://stopped.test/a", url_hash("https://stopped.test/a"), "/a", "https://stopped.test/a", 1,
              "sitemap")]
    record_discovery(meta.engine, run, "stopped.test", host, found)
    with deps.engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge.crawl_page_decisions SET decision = 'include' WHERE run_id = :r"),
                     {"r": run})
    assert [u["status"] for u in meta.run_urls(run)] == ["pending"]
    assert meta.end_run(run, RunStatus.CANCELLED, "cancelled by the operator")
    (url,) = meta.run_urls(run)
    assert (url["status"], url["reason"]) == ("not-attempted", "the run ended cancelled before this URL was fetched")
    assert meta.outcome_breakdown(run) == {"not-attempted": 1}
