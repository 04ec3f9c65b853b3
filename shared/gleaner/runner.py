"""Run a whole crawl in one process over the in-process bus (what ``gleaner crawl`` does)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.errors import GleanerError, PermanentError
from gleaner.messages import CrawlRequested, Message, ScrapeBatch
from gleaner.stages import dispatch

# Scrape batches in flight at once in a local run: batch N+1 fetches while batch N's pages are
# extracted and handed off, so the extraction processes never wait for a batch to start.
SCRAPE_BATCHES_IN_FLIGHT = 2


class CrawlFailed(GleanerError):
    """The run could not proceed at all (the message says why)."""


def crawl(deps: Deps, request: CrawlRequested, progress: Callable[[str, Message], None] | None = None,
          ) -> dict[str, Any]:
    """Map, sample, scrape, snapshot and ingest one site; returns the run summary.

    The map stage runs first and directly, so that a run that cannot start (bad
    URL, robots.txt unreadable, start page unreachable) raises a clear error.
    """
    bus = deps.bus
    if not isinstance(bus, LocalBus):
        raise TypeError("the local runner needs the in-process bus")
    from gleaner.stages import wire

    if not bus.handlers:
        wire(bus, deps)
    deps.extract_pool.start()  # starting the extraction processes overlaps map and sample
    with _overlapping_batches(bus):
        try:
            dispatch(request, deps)
        except PermanentError as exc:
            raise CrawlFailed(str(exc)) from exc
        bus.drain(on_dispatch=(lambda m: progress(m.topic, m)) if progress else None)
    _notify(deps)
    summary = deps.metadata.run_summary(request.run_id)
    if summary is None:  # pragma: no cover - map always creates the run
        raise CrawlFailed("the run was not created")
    if bus.dead_letters:
        summary["dead_letters"] = [f"{type(d.message).__name__}: {d.error}" for d in bus.dead_letters]
    return summary


def _notify(deps: Deps) -> None:
    """Publish the run's change events and deliver its webhooks, retrying for a while, before returning
    (DESIGN.md: locally the run retries before it returns; ``gleaner deliver`` retries the rest)."""
    from gleaner.changes import delivery, outbox

    outbox.flush(deps)
    delivery.deliver_due(deps, wait_seconds=deps.settings.notify_run_wait)


@contextmanager
def _overlapping_batches(bus: LocalBus) -> Iterator[None]:
    """Let scrape batches of this run overlap: batch N+1 fetches while batch N is extracted.

    Every fetcher of the process shares one per-host table (``Deps.host_table``) and the run's
    robots.txt decisions, so overlapping batches neither double a host's politeness nor read
    robots.txt again.
    """
    limits = dict(bus.topic_limits)
    bus.topic_limits[ScrapeBatch.topic] = SCRAPE_BATCHES_IN_FLIGHT
    try:
        yield
    finally:
        bus.topic_limits = limits


def new_request(url: str, **kw: Any) -> CrawlRequested:
    return CrawlRequested(request_id=str(uuid.uuid4()), target_url=url, **kw)

