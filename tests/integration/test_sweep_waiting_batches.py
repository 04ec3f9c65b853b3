"""The cloud's sweep (no worker, heartbeats only) tells a run waiting its turn in the scrape queue from a
stuck one: batches of one run wait while other runs' batches hold the instances."""

from __future__ import annotations

import sqlalchemy as sa

from gleaner.errors import PermanentError
from gleaner.runcontrol import claim_for_resume, sweep
from gleaner.runstate import RunStatus, Worker

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
