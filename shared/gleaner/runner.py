"""Run a whole crawl in one process over the in-process bus (what ``gleaner crawl`` does)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.config import Settings
from gleaner.errors import GleanerError, PermanentError
from gleaner.messages import CrawlRequested, Message, ScrapeBatch
from gleaner.stages import dispatch

if TYPE_CHECKING:
    from gleaner.fetch.fetcher import Fetcher

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
    with _one_fetcher_per_run(deps, bus):
        try:
            dispatch(request, deps)
        except PermanentError as exc:
            raise CrawlFailed(str(exc)) from exc
        bus.drain(on_dispatch=(lambda m: progress(m.topic, m)) if progress else None)
    summary = deps.metadata.run_summary(request.run_id)
    if summary is None:  # pragma: no cover - map always creates the run
        raise CrawlFailed("the run was not created")
    if bus.dead_letters:
        summary["dead_letters"] = [f"{type(d.message).__name__}: {d.error}" for d in bus.dead_letters]
    return summary


class _Borrowed:
    """A run's fetcher lent to one stage: ``with`` yields it, leaving does not close it."""

    def __init__(self, fetcher: Fetcher) -> None:
        self._fetcher = fetcher

    def __enter__(self) -> Fetcher:
        return self._fetcher

    def __exit__(self, *exc: object) -> None:
        pass


@contextmanager
def _one_fetcher_per_run(deps: Deps, bus: LocalBus) -> Iterator[None]:
    """Every stage of this run borrows one fetcher.

    robots.txt is then read once per host per run (DESIGN.md) instead of once per batch, connections
    are kept across batches, and one per-host limit holds however many scrape batches are in flight,
    which is what lets two overlap without doubling the politeness a host gets.
    """
    previous, limits = deps.fetcher_factory, dict(bus.topic_limits)
    fetcher = deps.new_fetcher()

    def lend(settings: Settings) -> Fetcher:
        if settings is not deps.settings:  # a stage asked for other settings: give it its own
            return previous(settings) if previous is not None else _own_fetcher(settings)
        return cast("Fetcher", _Borrowed(fetcher))

    deps.fetcher_factory = lend
    bus.topic_limits[ScrapeBatch.topic] = SCRAPE_BATCHES_IN_FLIGHT
    try:
        yield
    finally:
        deps.fetcher_factory = previous
        bus.topic_limits = limits
        fetcher.close()


def _own_fetcher(settings: Settings) -> Fetcher:
    from gleaner.fetch.fetcher import Fetcher

    return Fetcher(settings)


def new_request(url: str, **kw: Any) -> CrawlRequested:
    return CrawlRequested(request_id=str(uuid.uuid4()), target_url=url, **kw)

