"""Run a whole crawl in one process over the in-process bus (what ``gleaner crawl`` does), or resume one.

Every run this process drives records it as its worker (``host:pid:start``), so run control can
tell a live local run from a dead one. However the drive ends, the run ends in a terminal status:
Ctrl-C / SIGTERM (KeyboardInterrupt here) marks it ``interrupted``; a drive that ran out of
messages with pages unsettled (a message the bus gave up on) marks it ``failed``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.errors import ConfigError, GleanerError, PermanentError, RetryableError
from gleaner.messages import CrawlMapped, CrawlRequested, Message, ScrapeBatch, SnapshotsWritten
from gleaner.runtime.drivenruns import driving, wait_released
from gleaner.stages import acting_for, dispatch, tenant_of
from gleaner.stages.upkeep import settle_bodies
from gleaner.store.ledger.runcontrol import RunControl
from gleaner.store.ledger.runstate import RunStatus, Worker

log = logging.getLogger(__name__)

# Scrape batches in flight at once in a local run: batch N+1 fetches while batch N's pages are
# extracted and handed off, so the extraction processes never wait for a batch to start.
SCRAPE_BATCHES_IN_FLIGHT = 2
# Ingest messages in flight at once in a local run. Ingest (canonical text, chunks, vectors, the
# database's word index) costs about as much CPU as extraction; one at a time, it fell behind while
# pages were fetched and extracted, and ended a first crawl with seconds of one busy core after the
# last page was scraped. Two keep both cores busy to the end; ingest is safe to run concurrently
# (the cloud runs it so), and its queued messages still go as one (gleaner.bus.coalesce).
INGESTS_IN_FLIGHT = 2

Progress = Callable[[str, Message], None] | None


# How long a resume waits for this process's previous driver of the run to let go (after a cancel).
RELEASE_WAIT_SECONDS = 30.0


class CrawlFailed(GleanerError):
    """The run could not proceed at all (the message says why)."""


def crawl(deps: Deps, request: CrawlRequested, progress: Progress = None) -> dict[str, Any]:
    """Map, sample, scrape, snapshot and ingest one site; returns the run summary.

    The map stage runs first and directly, so that a run that cannot start (bad
    URL, robots.txt unreadable, start page unreachable) raises a clear error.
    """
    bus = local_bus(deps)
    # The run's own bookkeeping (settling it, its summary) acts for its tenant (row-level security);
    # each stage sets the same scope for the messages it handles.
    with acting_for(request), driving(request.run_id):
        with _driving(deps, bus, request.run_id):
            warm_for_first_crawl(deps, request)
            _map(deps, bus, request)
            bus.drain(on_dispatch=(lambda m: progress(m.topic, m)) if progress else None)
        return _summary(deps, bus, request.run_id, request.target_url)


def resume(deps: Deps, run_id: str, progress: Progress = None) -> dict[str, Any]:
    """Finish what a stopped run left: pages it fetched are not fetched again; returns the run summary."""
    return drive_resumed(deps, claim_resume(deps, run_id), progress)


def claim_resume(deps: Deps, run_id: str) -> RunControl:
    """Take a stopped run over for this process (RunNotFound, RunNotResumable); drive_resumed goes on.

    Split from the drive so that a server can answer the claim at once and drive in the background."""
    from gleaner.runtime.runcontrol import RunNotResumable, claim_for_resume

    local_bus(deps)
    worker = Worker.current()
    deps.worker = str(worker)
    if not wait_released(run_id, RELEASE_WAIT_SECONDS):
        why = (f"run {run_id} is still winding down in this process (after a cancel its batch in flight completes"
               f" before it lets go); resume it again in a few seconds")
        log.warning("resume refused: %s", why)
        raise RunNotResumable(why)
    try:
        return claim_for_resume(deps.metadata, run_id, worker, deps.settings.sweep_idle_seconds)
    except RunNotResumable as exc:
        log.warning("resume refused: %s", exc)  # the server's log says why, as the answer does
        raise


def drive_resumed(deps: Deps, run: RunControl, progress: Progress = None) -> dict[str, Any]:
    """Drive a run claim_resume took over to its end; returns the run summary."""
    bus = local_bus(deps)
    run_id = run.run_id
    log.info("resuming run %s from %s", run_id, run.status)
    with tenancy.scope(run.site_domain), driving(run_id):
        with _driving(deps, bus, run_id):
            deps.extract_pool.warm()  # a stopped run has pages left to fetch, and most will need extraction
            if run.status is RunStatus.MAPPING:
                options = run.options
                politeness = dict(options.get("politeness") or {})
                _map(deps, bus, CrawlRequested(
                    request_id=str(options.get("request_id") or run_id), target_url=run.target_url,
                    site_domain=run.site_domain, limit=options.get("limit"), max_depth=options.get("max_depth"),
                    include=tuple(options.get("include", ())), exclude=tuple(options.get("exclude", ())),
                    feeds=tuple(options.get("feeds", ())), mode=run.mode, triggered_by=run.triggered_by,
                    honour_lastmod=bool(options.get("honour_lastmod", False)), render=options.get("render"),
                    **dict(options.get("budget", {})),
                    delay=politeness.get("host_delay"), concurrency=politeness.get("host_concurrency")))
            else:
                # Sample decides a mapped run; for a scraping one it sends the batches again, and scrape
                # fetches only the pages without an outcome (fetched ones are announced to snapshot again).
                bus.publish(CrawlMapped(run_id=run_id, site_domain=run.site_domain))
            bus.drain(on_dispatch=(lambda m: progress(m.topic, m)) if progress else None)
        return _summary(deps, bus, run_id, run.target_url)


def local_bus(deps: Deps) -> LocalBus:
    bus = deps.local_bus
    if bus is None:
        raise ConfigError("a crawl on this machine runs the in-process bus; unset GLEANER_BUS (it is 'gcp')")
    if deps.worker is None:
        deps.worker = str(Worker.current())
    return bus


def warm_for_first_crawl(deps: Deps, request: CrawlRequested) -> bool:
    """A site's first crawl extracts every page: its extraction processes start while map and sample run.

    A recrawl starts them when scrape hands them its first page (``ExtractPool.submit``), so one whose
    pages all come back unchanged starts none. Whether it started them.
    """
    try:
        known = deps.browse.site_exists(tenant_of(request))
    except GleanerError:  # the map stage meets the same failure, and reports or retries it
        return False
    if not known:
        deps.extract_pool.warm()
    return not known


def _map(deps: Deps, bus: LocalBus, request: CrawlRequested) -> None:
    """Run the map stage here (its errors are the crawl's), retrying transient failures like the bus."""
    attempts = 0
    while True:
        attempts += 1
        try:
            dispatch(request, deps)
            return
        except PermanentError as exc:
            _record_map_failure(deps, request, str(exc))
            raise CrawlFailed(str(exc)) from exc
        except RetryableError as exc:
            if attempts >= bus.max_attempts:
                _record_map_failure(deps, request, f"gave up after {attempts} attempts: {exc}")
                raise CrawlFailed(f"could not map {request.target_url}: {exc}") from exc
            log.warning("retrying the map stage (attempt %d): %s", attempts, exc)
            time.sleep(bus.retry_delay(attempts))


def _record_map_failure(deps: Deps, request: CrawlRequested, reason: str) -> None:
    from gleaner.runtime.deadletters import record_failure

    try:
        record_failure(request, deps, reason)
    except GleanerError:
        log.warning("could not record the failure of run %s", request.run_id, exc_info=True)


def notify(deps: Deps) -> None:
    """Publish the run's change events and hand its webhooks to a background sender, waiting for it at
    most ``notify_run_wait`` seconds (default 0): a run ends when its pages are done, whatever its
    subscribers do; what is left stays pending for ``gleaner deliver``, ``watch`` and ``serve``."""
    from gleaner.changes import outbox
    from gleaner.changes.sender import DeliverySender

    outbox.flush(deps)
    if deps.settings.notify_run_wait > 0:
        DeliverySender(deps, seconds=deps.settings.notify_run_wait).start().join()


@contextmanager
def _driving(deps: Deps, bus: LocalBus, run_id: str) -> Iterator[None]:
    """Let scrape batches, and ingests, overlap while this process drives the run; settle it if cut off.

    Every fetcher of the process shares one per-host table (``Deps.host_table``) and the run's
    robots.txt decisions, so overlapping batches neither double a host's politeness nor read
    robots.txt again.
    """
    limits, concurrency = dict(bus.topic_limits), bus.concurrency
    bus.topic_limits[ScrapeBatch.topic] = SCRAPE_BATCHES_IN_FLIGHT
    bus.topic_limits[SnapshotsWritten.topic] = INGESTS_IN_FLIGHT
    # Both scrape batches, a snapshot message and both ingests at once.
    bus.concurrency = max(concurrency, SCRAPE_BATCHES_IN_FLIGHT + 1 + INGESTS_IN_FLIGHT)
    try:
        yield
    except KeyboardInterrupt:
        settle(deps, run_id, RunStatus.INTERRUPTED, "interrupted (Ctrl-C or SIGTERM)")
        raise
    finally:
        bus.topic_limits, bus.concurrency = limits, concurrency


def settle(deps: Deps, run_id: str, status: RunStatus, reason: str) -> bool:
    """End an active run with this status; whether it was active (and is now settled)."""
    try:
        return deps.metadata.end_run(run_id, status, reason)
    except GleanerError as exc:  # the database may be what is failing: sweep settles the run later
        log.warning("could not mark run %s %s: %s", run_id, status, exc)
        return False


def _summary(deps: Deps, bus: LocalBus, run_id: str, target_url: str) -> dict[str, Any]:
    notify(deps)
    summary = finish_run(deps, run_id)
    meta = deps.metadata
    if summary is None:  # pragma: no cover - map always creates the run
        raise CrawlFailed("the run was not created")
    host = deps.host_table.peek(urlsplit(target_url).hostname or "")
    if host is not None:  # what the start page's host was fetched with, and why (docs/configuration.md)
        summary["politeness"] = {"delay": host.delay, "delay_source": str(host.delay_source),
                                 "concurrency": host.concurrency, "concurrency_source": str(host.concurrency_source)}
    try:
        with tenancy.all_tenants():  # a subscription may cover every site
            summary["notifications_pending"] = meta.pending_delivery_count()
    except GleanerError:  # only a hint for the reader: the run itself is settled
        log.debug("could not count pending deliveries", exc_info=True)
    if bus.dead_letters:
        summary["dead_letters"] = [f"{type(d.message).__name__}: {d.error}" for d in bus.dead_letters]
    return summary


def finish_run(deps: Deps, run_id: str) -> dict[str, Any] | None:
    """Settle a run nothing is left to deliver for, and its summary (None: no such run).

    Nothing else will settle an active run now: finish it if every page is done, otherwise say what
    is left (a message the bus gave up on) and how to go on."""
    meta = deps.metadata
    status = meta.run_status(run_id)
    if status is not None and not RunStatus(status).terminal and meta.try_finish_run(run_id) is None:
        settle(deps, run_id, RunStatus.FAILED, f"stopped while {status} with {meta.unsettled_pages(run_id)} pages"
               f" unsettled (see the log); `gleaner runs resume {run_id}` tries them again")
    settle_bodies(deps, run_id)  # however the run ended: its fetched bodies go once it has settled
    return meta.run_summary(run_id)


def new_request(url: str, **kw: Any) -> CrawlRequested:
    return CrawlRequested(request_id=str(uuid.uuid4()), target_url=url, **kw)
