"""The sites registry in PostgreSQL: ``knowledge.sites``, and per-host politeness on ``source_hosts``.

What a registration means (schedules, globs, budgets) is :mod:`gleaner.operator.sites`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from gleaner.operator.sites import Site, SiteSpec
from gleaner.store.backends.sqlstore import SqlStore

_COLUMNS = (
    "s.id, s.site_domain, s.target_url, s.every_seconds, s.adaptive, s.min_interval_seconds,"
    " s.max_interval_seconds, s.include, s.exclude, s.url_limit, s.max_depth, h.host_delay_seconds,"
    " h.host_concurrency, s.run_max_requests, s.run_max_bytes, s.run_max_seconds, s.next_run_at, s.last_run_id,"
    " s.last_run_at, s.created_at, s.render"
)
_FROM = " FROM knowledge.sites s LEFT JOIN knowledge.source_hosts h ON h.id = s.source_host_id"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _site(r: Sequence[Any]) -> Site:
    return Site(id=str(r[0]), site_domain=r[1], target_url=r[2], every_seconds=r[3], adaptive=bool(r[4]),
                min_interval_seconds=r[5], max_interval_seconds=r[6], include=tuple(r[7] or ()),
                exclude=tuple(r[8] or ()), limit=r[9], max_depth=r[10], delay=r[11], concurrency=r[12],
                run_max_requests=r[13], run_max_bytes=r[14], run_max_seconds=r[15], next_run_at=_iso(r[16]),
                last_run_id=str(r[17]) if r[17] else None, last_run_at=_iso(r[18]), created_at=r[19].isoformat(),
                render=r[20])


class SiteStore(SqlStore):
    def save_site(self, spec: SiteSpec, host_id: str, due_at: datetime | None) -> None:
        """Insert the site, or update the one under the same key (a newly scheduled one is due at ``due_at``);
        politeness goes onto its host's row."""
        with self._tx() as conn:
            # The site is replaced whole: politeness it no longer names goes back to the settings' values.
            conn.execute(
                sa.text("UPDATE knowledge.source_hosts SET host_delay_seconds = :d, host_concurrency = :c,"
                        " updated_at = now() WHERE id = :h"),
                {"d": spec.delay, "c": spec.concurrency, "h": host_id},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO knowledge.sites AS s (site_domain, target_url, source_host_id, every_seconds,"
                    " adaptive, min_interval_seconds, max_interval_seconds, include, exclude, url_limit, max_depth,"
                    " run_max_requests, run_max_bytes, run_max_seconds, next_run_at, render)"
                    " VALUES (:s, :t, :h, :e, :a, :lo, :hi, CAST(:inc AS jsonb), CAST(:exc AS jsonb), :lim, :dep,"
                    " :mr, :mb, :ms, :due, :rm)"
                    " ON CONFLICT (site_domain) DO UPDATE SET target_url = EXCLUDED.target_url,"
                    " source_host_id = EXCLUDED.source_host_id, every_seconds = EXCLUDED.every_seconds,"
                    " adaptive = EXCLUDED.adaptive, min_interval_seconds = EXCLUDED.min_interval_seconds,"
                    " max_interval_seconds = EXCLUDED.max_interval_seconds, include = EXCLUDED.include,"
                    " exclude = EXCLUDED.exclude, url_limit = EXCLUDED.url_limit, max_depth = EXCLUDED.max_depth,"
                    " run_max_requests = EXCLUDED.run_max_requests, run_max_bytes = EXCLUDED.run_max_bytes,"
                    " run_max_seconds = EXCLUDED.run_max_seconds, render = EXCLUDED.render,"
                    # a changed schedule keeps a pending due time; a newly scheduled site is due now
                    " next_run_at = CASE WHEN EXCLUDED.every_seconds IS NULL THEN NULL"
                    "   ELSE COALESCE(s.next_run_at, EXCLUDED.next_run_at) END, updated_at = now()"
                ),
                {"s": spec.site_domain, "t": spec.target_url, "h": host_id, "e": spec.every_seconds,
                 "a": spec.adaptive, "lo": spec.min_interval_seconds, "hi": spec.max_interval_seconds,
                 "inc": json.dumps(list(spec.include)), "exc": json.dumps(list(spec.exclude)), "lim": spec.limit,
                 "dep": spec.max_depth, "mr": spec.run_max_requests, "mb": spec.run_max_bytes,
                 "ms": spec.run_max_seconds, "due": due_at, "rm": spec.render},
            )

    def sites(self) -> list[Site]:
        return [_site(r) for r in self._all(f"SELECT {_COLUMNS}{_FROM} ORDER BY s.site_domain")]

    def find_site(self, site: str) -> Site | None:
        row = self._first(f"SELECT {_COLUMNS}{_FROM} WHERE s.site_domain = :s", {"s": site})
        return _site(row) if row else None

    def delete_site(self, site_id: str) -> None:
        """Remove the site and the politeness it set on its host (a site's settings go with the site)."""
        with self._tx() as conn:
            conn.execute(sa.text(
                "UPDATE knowledge.source_hosts h SET host_delay_seconds = NULL, host_concurrency = NULL,"
                " updated_at = now() FROM knowledge.sites s WHERE s.id = :i AND h.id = s.source_host_id"),
                {"i": site_id})
            conn.execute(sa.text("DELETE FROM knowledge.sites WHERE id = :i"), {"i": site_id})
