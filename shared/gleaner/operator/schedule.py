"""Sites on a schedule: ``tick`` starts a crawl of every due site, exactly once per due time.

A tick claims due sites in one short transaction (``SELECT … FOR UPDATE SKIP LOCKED`` on
``knowledge.sites``, then ``next_run_at`` moves past ``now``): a concurrent tick skips the rows the
first one holds and, once it commits, no longer finds them due, so two ticks at once start one run
per site. The run's request id derives from the site and the due time it was claimed for, and the
crawl request is published before the claim commits: a tick that dies between the two publishes
the same request again next time, which the map stage recognises as the same run.

A site still running its previous crawl is left due (two crawls of one site never overlap); the
next tick starts it once that run has settled.

``--every auto`` adapts each site's interval to the change it observed, multiplicatively and within
bounds, as StormCrawler's adaptive scheduler (after Nutch's AdaptiveFetchSchedule) does per URL:
the last run changed pages -> shorter; it saw pages and none changed -> longer; a run that saw
nothing (a first crawl, only new pages, or a failure) leaves it as it is. ``now`` is a parameter
everywhere, so tests drive the clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from gleaner.messages import CrawlRequested, run_id_for

if TYPE_CHECKING:
    from gleaner.app import Deps

log = logging.getLogger(__name__)

# How far one run moves an `auto` interval: changed pages shorten it by half, an unchanged run
# lengthens it by half. Large steps settle within a few runs; the bounds keep them sane.
SHORTEN_RATE = 0.5
LENGTHEN_RATE = 0.5
# Run statuses that mean the site's previous crawl is still going.
RUNNING = ("queued", "mapping", "mapped", "sampling", "scraping")


@dataclass(frozen=True, slots=True)
class Observed:
    """What a site's last run saw: pages whose content changed, and pages it saw unchanged."""

    changed: int
    unchanged: int


def adapt_interval(current: int, observed: Observed | None, lowest: int, highest: int) -> int:
    """The next interval of an ``auto`` site, in seconds (pure)."""
    if observed is None or (observed.changed == 0 and observed.unchanged == 0):
        new = float(current)
    elif observed.changed > 0:
        new = current * (1 - SHORTEN_RATE)
    else:
        new = current * (1 + LENGTHEN_RATE)
    return int(min(max(new, lowest), highest))


@dataclass(frozen=True, slots=True)
class StartedRun:
    site_domain: str
    run_id: str
    request_id: str
    due_at: str
    interval_seconds: int
    next_run_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TickReport:
    started: tuple[StartedRun, ...]
    still_running: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"started": [s.to_dict() for s in self.started], "still_running": list(self.still_running)}


def _request(row: Any, request_id: str) -> CrawlRequested:
    _id, site, target, include, exclude, limit, depth = row[:7]
    max_requests, max_bytes, max_seconds, adaptive = row[15], row[16], row[17], bool(row[9])
    return CrawlRequested(request_id=request_id, target_url=target, site_domain=site, limit=limit, max_depth=depth,
                          include=tuple(include or ()), exclude=tuple(exclude or ()), mode="website_mapping",
                          triggered_by="cron", max_requests=max_requests, max_bytes=max_bytes,
                          max_seconds=max_seconds, honour_lastmod=adaptive)


def tick(deps: Deps, now: datetime | None = None) -> TickReport:
    """Start a crawl of every site due at ``now``; idempotent under concurrent and repeated ticks."""
    now = now or datetime.now(UTC)
    settings = deps.settings
    started: list[StartedRun] = []
    running: list[str] = []
    with deps.metadata.engine.begin() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT s.id, s.site_domain, s.target_url, s.include, s.exclude, s.url_limit, s.max_depth,"
                " s.next_run_at, s.every_seconds, s.adaptive, s.min_interval_seconds, s.max_interval_seconds,"
                " r.status::text, r.snapshots_changed, r.snapshots_unchanged, s.run_max_requests, s.run_max_bytes,"
                " s.run_max_seconds"
                " FROM knowledge.sites s LEFT JOIN knowledge.crawl_runs r ON r.id = s.last_run_id"
                " WHERE s.next_run_at <= :now AND s.every_seconds IS NOT NULL"
                " ORDER BY s.next_run_at, s.id FOR UPDATE OF s SKIP LOCKED"
            ),
            {"now": now},
        ).all()
        for row in rows:
            site_id, site, due, every, adaptive, lowest, highest, last_status, changed, unchanged = (
                str(row[0]), row[1], row[7], int(row[8]), bool(row[9]), row[10], row[11], row[12], row[13], row[14])
            if last_status in RUNNING:
                running.append(site)
                continue
            interval = every
            if adaptive:
                observed = (Observed(int(changed or 0), int(unchanged or 0))
                            if last_status in ("finished", "partial") else None)
                interval = adapt_interval(every, observed, lowest or settings.schedule_min_seconds,
                                          highest or settings.schedule_max_seconds)
            request_id = f"site:{site_id}:{due.isoformat()}"
            message = _request(row, request_id)
            # Published before the claim commits: a crash in between re-publishes the same request id.
            deps.bus.publish(message, ordering_key=site)
            next_at = now + timedelta(seconds=interval)
            conn.execute(
                sa.text("UPDATE knowledge.sites SET next_run_at = :n, every_seconds = :e, last_run_id = :r,"
                        " last_run_at = :now, updated_at = now() WHERE id = :i"),
                {"n": next_at, "e": interval, "r": run_id_for(request_id), "now": now, "i": site_id},
            )
            started.append(StartedRun(site, run_id_for(request_id), request_id, due.isoformat(), interval,
                                      next_at.isoformat()))
    for run in started:
        log.info("tick: started run %s of %s (next in %ss)", run.run_id, run.site_domain, run.interval_seconds)
    return TickReport(tuple(started), tuple(running))


def watch(deps: Deps, *, every: float, rounds: int | None = None, after_tick: Callable[[TickReport], None],
          sleep: Callable[[float], None], clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> int:
    """Tick every ``every`` seconds (``rounds`` times, or until interrupted); returns the runs started."""
    total = 0
    done = 0
    while rounds is None or done < rounds:
        report = tick(deps, clock())
        after_tick(report)
        total += len(report.started)
        done += 1
        if rounds is None or done < rounds:
            sleep(every)
    return total
