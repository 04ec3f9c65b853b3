"""Run control's statements: heartbeats, ending a run, handing a run to a new worker, finding idle runs.

Every transition is one conditional UPDATE on ``knowledge.crawl_runs`` (``WHERE status = ANY(...)``,
and for a claim the worker seen before), so two operators, a sweep and a live worker can race and
exactly one of them moves the run. Counters are refreshed in the same transaction as the status.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from gleaner.store.ledger.counters import UNSTORED_STATUS, CounterStore
from gleaner.store.ledger.runstate import ACTIVE, RunStatus


@dataclass(frozen=True, slots=True)
class RunControl:
    """What run control needs to know about one run."""

    run_id: str
    site_domain: str
    status: RunStatus
    worker: str | None
    idle_seconds: float  # since the last heartbeat (or the start); a scraping cloud run: see _IDLE
    mapped: bool  # the map stage finished (its JSON is stored)
    batches_total: int | None  # set when sampling assigned the scrape batches
    target_url: str
    options: dict[str, Any]
    mode: str
    triggered_by: str
    error: str | None


# A cloud run (no worker) that is scraping has batches waiting in the one shared scrape queue: they
# start only as other runs' batches free the instances, and only a batch's start moves the run's own
# heartbeat. Such a run is idle only while the queue is: its idle time counts from the latest
# heartbeat of any scraping cloud run, so a run waiting its turn behind a big crawl is not swept.
_IDLE = (
    "EXTRACT(EPOCH FROM now() - GREATEST(COALESCE(r.heartbeat_at, r.started_at, r.created_at),"
    " CASE WHEN r.status = 'scraping' AND r.worker IS NULL THEN (SELECT max(q.heartbeat_at)"
    " FROM knowledge.crawl_runs q WHERE q.status = 'scraping' AND q.worker IS NULL) END))"
)
_CONTROL_COLUMNS = (
    f"r.id, r.site_domain, r.status::text, r.worker, {_IDLE}, r.raw_map_uri IS NOT NULL,"
    " r.batches_total, r.target_url, r.options, r.mode::text, r.triggered_by::text, r.error"
)


def _control(row: Any) -> RunControl:
    return RunControl(str(row[0]), row[1], RunStatus(row[2]), row[3], float(row[4]), bool(row[5]), row[6], row[7],
                      dict(row[8] or {}), row[9], row[10], row[11])


class RunControlStore(CounterStore):
    def touch_run(self, run_id: str) -> RunStatus | None:
        """Record that a stage works on the run now; the run's status (None if there is no such run)."""
        status = self._write_scalar(
            "UPDATE knowledge.crawl_runs SET heartbeat_at = now() WHERE id = :r RETURNING status::text",
            {"r": run_id},
        )
        return RunStatus(status) if status is not None else None

    def run_control(self, run_id: str) -> RunControl | None:
        row = self._first(
            f"SELECT {_CONTROL_COLUMNS} FROM knowledge.crawl_runs r WHERE r.id = :r",
            {"r": run_id},
        )
        return _control(row) if row is not None else None

    def unsettled_runs(self) -> list[RunControl]:
        """Runs in an active status, the longest idle first."""
        rows = self._all(
            f"SELECT {_CONTROL_COLUMNS} FROM knowledge.crawl_runs r"
            " WHERE r.status IN ('queued', 'mapping', 'mapped', 'sampling', 'scraping')"
            " ORDER BY COALESCE(r.heartbeat_at, r.started_at, r.created_at)",
        )
        return [_control(r) for r in rows]

    def end_run(self, run_id: str, status: RunStatus, error: str | None,
                only_from: Sequence[RunStatus] = ACTIVE) -> bool:
        """Move a run to a terminal status from one of ``only_from``; True if this call moved it."""
        with self._tx() as conn:
            self._refresh_counters(conn, run_id)
            row = conn.execute(
                sa.text(
                    "UPDATE knowledge.crawl_runs SET status = CAST(:st AS knowledge.crawl_status),"
                    " error = COALESCE(:err, error), finished_at = now()"
                    " WHERE id = :r AND status::text = ANY(CAST(:from AS text[])) RETURNING id"
                ),
                {"st": str(status), "err": error, "r": run_id, "from": [str(s) for s in only_from]},
            ).first()
        return row is not None

    def end_run_unstored(self, run_id: str, error: str) -> RunStatus | None:
        """End a scraping run whose bodies can no longer be stored: partial if it stored any page, else
        failed. The new status, or None if the run was no longer scraping."""
        with self._tx() as conn:
            self._refresh_counters(conn, run_id)
            status = conn.execute(
                sa.text(
                    f"UPDATE knowledge.crawl_runs SET status = {UNSTORED_STATUS}, error = :err, finished_at = now()"
                    " WHERE id = :r AND status = 'scraping' RETURNING status::text"
                ),
                {"r": run_id, "err": error},
            ).scalar()
        return RunStatus(status) if status is not None else None

    def claim_run(self, run_id: str, worker: str, status: RunStatus, *, seen_status: RunStatus,
                  seen_worker: str | None) -> bool:
        """Hand the run to ``worker`` in ``status`` if nobody changed it since it was read (resume); the
        error of how it stopped goes: the run ends again with its own."""
        row = self._write_first(
            "UPDATE knowledge.crawl_runs SET status = CAST(:st AS knowledge.crawl_status), worker = :w,"
            " heartbeat_at = now(), finished_at = NULL, error = NULL"
            " WHERE id = :r AND status::text = :seen AND worker IS NOT DISTINCT FROM :seen_w RETURNING id",
            {"st": str(status), "w": worker, "r": run_id, "seen": str(seen_status), "seen_w": seen_worker},
        )
        return row is not None

    def unsettled_pages(self, run_id: str) -> int:
        """Included pages of the run without a fetch outcome, or fetched and not yet versioned."""
        return int(self._scalar(
            "SELECT count(*) FROM knowledge.crawl_page_decisions WHERE run_id = :r AND decision = 'include'"
            " AND (fetch_outcome IS NULL OR (fetch_outcome = 'fetched' AND snapshot_outcome IS NULL))",
            {"r": run_id},
        ))

    def snapshots_without_text(self, site: str, limit: int = 1000) -> list[str]:
        """Current snapshots of the site's documents that have no canonical text (a crash before ingest)."""
        rows = self._all(
            "SELECT d.current_snapshot_id FROM knowledge.documents d"
            " LEFT JOIN knowledge.snapshot_texts t ON t.snapshot_id = d.current_snapshot_id"
            " WHERE d.site_domain = :s AND d.current_snapshot_id IS NOT NULL AND t.snapshot_id IS NULL"
            " AND NOT d.is_deleted AND d.status <> 'blocked' ORDER BY d.id LIMIT :n",
            {"s": site, "n": limit},
        )
        return [str(r[0]) for r in rows]
