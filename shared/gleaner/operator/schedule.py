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
everywhere, so tests drive the clock. The claim's statements are :mod:`gleaner.store.registry.schedule`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from gleaner.messages import CrawlRequested, run_id_for
from gleaner.operator.values import Plain
from gleaner.tenancy import across_tenants

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
class StartedRun(Plain):
    site_domain: str
    run_id: str
    request_id: str
    due_at: str
    interval_seconds: int
    next_run_at: str


@dataclass(frozen=True, slots=True)
class TickReport(Plain):
    started: tuple[StartedRun, ...]
    still_running: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DueSite:
    """A registered site whose next run is due, with what its last run observed."""

    id: str
    site_domain: str
    target_url: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    limit: int | None
    max_depth: int | None
    due_at: datetime
    every_seconds: int
    adaptive: bool
    min_interval_seconds: int | None
    max_interval_seconds: int | None
    last_status: str | None
    changed: int
    unchanged: int
    run_max_requests: int | None
    run_max_bytes: int | None
    run_max_seconds: float | None
    render: str = "never"  # the site's render mode, for each of its runs


def next_interval(site: DueSite, lowest: int, highest: int) -> int:
    """The interval to the site's next run: its own, or adapted to what its last run saw (``auto``)."""
    if not site.adaptive:
        return site.every_seconds
    observed = Observed(site.changed, site.unchanged) if site.last_status in ("finished", "partial") else None
    return adapt_interval(site.every_seconds, observed, site.min_interval_seconds or lowest,
                          site.max_interval_seconds or highest)


def crawl_request(site: DueSite, request_id: str) -> CrawlRequested:
    return CrawlRequested(request_id=request_id, target_url=site.target_url, site_domain=site.site_domain,
                          limit=site.limit, max_depth=site.max_depth, include=site.include, exclude=site.exclude,
                          mode="website_mapping", triggered_by="cron", max_requests=site.run_max_requests,
                          max_bytes=site.run_max_bytes, max_seconds=site.run_max_seconds,
                          honour_lastmod=site.adaptive, render=site.render)


@across_tenants  # the scheduler serves every site: Cloud Scheduler's tick and `gleaner tick` alike
def tick(deps: Deps, now: datetime | None = None, *, upkeep: bool = True) -> TickReport:
    """Start a crawl of every site due at ``now``; idempotent under concurrent and repeated ticks.

    ``upkeep=False``: the caller runs :func:`upkeep` itself (``gleaner tick`` beside its runs, whose
    first requests then wait for none of it)."""
    now = now or datetime.now(UTC)
    settings = deps.settings
    started: list[StartedRun] = []
    running: list[str] = []
    with deps.metadata.claim_due_sites(now) as due:
        for site in due.sites:
            if site.last_status in RUNNING:
                running.append(site.site_domain)
                continue
            interval = next_interval(site, settings.schedule_min_seconds, settings.schedule_max_seconds)
            request_id = f"site:{site.id}:{site.due_at.isoformat()}"
            # Published before the claim commits: a crash in between re-publishes the same request id.
            deps.bus.publish(crawl_request(site, request_id), ordering_key=site.site_domain)
            next_at = now + timedelta(seconds=interval)
            due.claim(site.id, next_at, interval, run_id_for(request_id), now)
            started.append(StartedRun(site.site_domain, run_id_for(request_id), request_id, site.due_at.isoformat(),
                                      interval, next_at.isoformat()))
    for run in started:
        log.info("tick: started run %s of %s (next in %ss)", run.run_id, run.site_domain, run.interval_seconds)
    if upkeep:
        _upkeep(deps)
    return TickReport(tuple(started), tuple(running))


@across_tenants
def run_upkeep(deps: Deps) -> None:
    """A tick's retention on its own (see ``tick(upkeep=False)``); it may run while the tick's runs go on,
    as the cloud's sweep runs it beside every crawl."""
    _upkeep(deps)


def _upkeep(deps: Deps) -> None:
    """Retention on every tick (stages/upkeep.py); a failure there never stops the schedule."""
    from gleaner.stages.upkeep import upkeep

    try:
        upkeep(deps)
    except Exception:
        log.warning("upkeep failed; the next tick tries again", exc_info=True)


def watch(deps: Deps, *, every: float, rounds: int | None = None, after_tick: Callable[[TickReport], None],
          sleep: Callable[[float], None], clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> int:
    """Tick (``rounds`` times, or until interrupted), each time as soon as the next site falls due and at
    least every ``every`` seconds; returns the runs started. ``sleep`` may return early (``gleaner watch``
    wakes it when a run ends, so a site left due behind its previous run starts then)."""
    total = 0
    done = 0
    while rounds is None or done < rounds:
        now = clock()
        report = tick(deps, now)
        after_tick(report)
        total += len(report.started)
        done += 1
        if rounds is None or done < rounds:
            sleep(seconds_to_next_tick(deps, now, every))
    return total


@across_tenants  # every tenant's sites are on the one schedule
def seconds_to_next_tick(deps: Deps, now: datetime, every: float) -> float:
    """Until the next site falls due, at most ``every``. A site due already is one left due behind its
    running previous run: its run's end wakes the watch, so it does not tick again at once for it."""
    due = deps.metadata.next_due_at()
    if due is None or due <= now:
        return every
    return min(every, (due - now).total_seconds())
