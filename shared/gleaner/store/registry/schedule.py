"""Claiming due sites (``knowledge.sites``) for a tick; when a site is due and what its run asks for is
:mod:`gleaner.operator.schedule`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gleaner.operator.schedule import DueSite
from gleaner.store.backends.sqlstore import SqlStore


class DueSites:
    """The due sites one tick holds (locked until the tick's transaction ends), and their claim."""

    def __init__(self, conn: Connection, sites: list[DueSite]) -> None:
        self._conn = conn
        self.sites = sites

    def claim(self, site_id: str, next_at: datetime, interval: int, run_id: str, now: datetime) -> None:
        """Move the site's due time past ``now``: the claim commits with the tick's transaction."""
        self._conn.execute(
            sa.text("UPDATE knowledge.sites SET next_run_at = :n, every_seconds = :e, last_run_id = :r,"
                    " last_run_at = :now, updated_at = now() WHERE id = :i"),
            {"n": next_at, "e": interval, "r": run_id, "now": now, "i": site_id},
        )


class ScheduleStore(SqlStore):
    @contextmanager
    def claim_due_sites(self, now: datetime) -> Iterator[DueSites]:
        """The sites due at ``now`` that no concurrent tick holds (``FOR UPDATE SKIP LOCKED``), in one
        transaction: what the caller claims commits when the block ends, or not at all."""
        with self._tx() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT s.id, s.site_domain, s.target_url, s.include, s.exclude, s.url_limit, s.max_depth,"
                    " s.next_run_at, s.every_seconds, s.adaptive, s.min_interval_seconds, s.max_interval_seconds,"
                    " r.status::text, r.snapshots_changed, r.snapshots_unchanged, s.run_max_requests,"
                    " s.run_max_bytes, s.run_max_seconds, s.render"
                    " FROM knowledge.sites s LEFT JOIN knowledge.crawl_runs r ON r.id = s.last_run_id"
                    " WHERE s.next_run_at <= :now AND s.every_seconds IS NOT NULL"
                    " ORDER BY s.next_run_at, s.id FOR UPDATE OF s SKIP LOCKED"
                ),
                {"now": now},
            ).all()
            yield DueSites(conn, [
                DueSite(str(r[0]), r[1], r[2], tuple(r[3] or ()), tuple(r[4] or ()), r[5], r[6], r[7], int(r[8]),
                        bool(r[9]), r[10], r[11], r[12], int(r[13] or 0), int(r[14] or 0), r[15], r[16], r[17], r[18])
                for r in rows])

    def next_due_at(self) -> datetime | None:
        """When the next scheduled site falls due (None: no site is on a schedule); ``watch`` sleeps
        until then rather than to its next tick."""
        value: datetime | None = self._scalar(
            "SELECT min(next_run_at) FROM knowledge.sites WHERE every_seconds IS NOT NULL AND next_run_at IS NOT NULL")
        return value
