"""One engine for many sites: the runs of every due site driven at once in this process.

``gleaner tick``, ``gleaner watch`` and ``gleaner crawl URL URL ...`` hand their crawl requests to
:class:`Engine`, which drains them together on the one in-process bus, the way Scrapy's engine
crawls many domains in one reactor:

- every run's stages interleave on the bus's threads (scrape batches bounded per run, so one large
  site cannot take every thread), and ``GLEANER_MAX_RUNS`` runs are under way at once (the bus's
  ``max_runs``; the others start as these end);
- every fetch goes through the process's one per-host table (:mod:`gleaner.fetch.politeness`): each
  host keeps its own slot (delay, concurrency, Crawl-delay, Retry-After back-off) whichever run asks,
  and ``GLEANER_FETCH_CONCURRENCY`` bounds the requests on the wire across all of them;
- extraction goes to the one shared process pool (``Deps.extract_pool``);
- a run's failure stays its own: an unexpected error in one handler gives that message up and
  records it on its run (the bus's ``isolate``), the other runs go on;
- Ctrl-C (or SIGTERM) marks every run still active ``interrupted``; ``gleaner runs resume RUN_ID``
  finishes each.

Every run is recorded with this process as its worker, as ``gleaner crawl`` records it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.errors import GleanerError
from gleaner.messages import CrawlRequested, Message, ScrapeBatch
from gleaner.runner import SCRAPE_BATCHES_IN_FLIGHT, finish_run, local_bus, notify, settle
from gleaner.runstate import RunStatus

log = logging.getLogger(__name__)

# Bus threads per run under way: a run has at most two scrape batches in flight, and its snapshot
# and ingest messages overlap them; one more thread serves the work of no run (an operator's re-ingest).
THREADS_PER_RUN = SCRAPE_BATCHES_IN_FLIGHT + 1

OnDispatch = Callable[[Message], None] | None


@dataclass(frozen=True, slots=True)
class RunRef:
    """A run the engine drives: its id, its tenant and where it starts."""

    run_id: str
    site_domain: str
    target_url: str

    @classmethod
    def of(cls, request: CrawlRequested) -> RunRef:
        from gleaner.stages import tenant_of

        return cls(request.run_id, tenant_of(request), request.target_url)


class Engine:
    """Drives several runs to their ends at once; :meth:`crawl` for new requests, :meth:`drive` for
    runs whose requests are already on the bus (a tick publishes them itself)."""

    def __init__(self, deps: Deps, on_dispatch: OnDispatch = None) -> None:
        self.deps = deps
        self.bus: LocalBus = local_bus(deps)  # also records this process as the runs' worker
        self.on_dispatch = on_dispatch
        self._sites: dict[str, str] = {}
        self._given_up: dict[str, str] = {}
        self.interrupted: list[str] = []  # the runs Ctrl-C marked interrupted

    def crawl(self, requests: Sequence[CrawlRequested]) -> list[dict[str, Any]]:
        """Publish one crawl request per site and drive them all; a summary per request, in order."""
        runs = [RunRef.of(request) for request in requests]
        for request in requests:
            self.bus.publish(request, ordering_key=request.site_domain)
        return self.drive(runs)

    def drive(self, runs: Sequence[RunRef]) -> list[dict[str, Any]]:
        """Drain the bus until every run ended; a summary per run, in order."""
        for run in runs:
            self._sites[run.run_id] = run.site_domain
        self._warm(runs)
        with self._bounded(len(runs)):
            try:
                self.bus.drain(on_dispatch=self.on_dispatch)
            except KeyboardInterrupt:
                self.interrupt()
                raise
        try:
            notify(self.deps)
        except GleanerError as exc:  # the runs are done; `gleaner deliver` sends what is left
            log.warning("could not deliver the runs' notifications: %s", exc)
        return [self._summary(run) for run in runs]

    def _warm(self, runs: Sequence[RunRef]) -> None:
        """Start the shared extraction processes now if any site is crawled for the first time (every
        page of it needs extraction); otherwise the first page that needs one starts them."""
        for run in runs:
            try:
                with tenancy.scope(run.site_domain):
                    known = self.deps.browse.site_exists(run.site_domain)
            except GleanerError:  # the map stage meets the same failure, and records it on the run
                continue
            if not known:
                self.deps.extract_pool.warm()
                return

    def interrupt(self) -> list[str]:
        """Mark every run of this engine that is still active ``interrupted``; the ids marked."""
        marked = []
        for run_id, site in self._sites.items():
            with tenancy.scope(site):
                if settle(self.deps, run_id, RunStatus.INTERRUPTED, "interrupted (Ctrl-C or SIGTERM)"):
                    marked.append(run_id)
        self.interrupted = marked
        return marked

    @contextmanager
    def _bounded(self, runs: int) -> Iterator[None]:
        """The bus's bounds for many runs: runs under way, scrape batches per run, threads, isolation."""
        bus = self.bus
        saved = (dict(bus.topic_limits), bus.max_runs, bus.concurrency, bus.isolate, bus.on_give_up)
        max_runs = self.deps.settings.max_runs
        bus.topic_limits[ScrapeBatch.topic] = SCRAPE_BATCHES_IN_FLIGHT
        bus.max_runs = max_runs
        bus.concurrency = max(bus.concurrency, min(runs, max_runs) * THREADS_PER_RUN + 1)
        bus.isolate = True
        recorded = bus.on_give_up

        def given_up(message: Message, reason: str) -> None:
            run_id = getattr(message, "run_id", None)
            if isinstance(run_id, str):
                self._given_up.setdefault(run_id, reason)
            if recorded is not None:
                recorded(message, reason)

        bus.on_give_up = given_up
        try:
            yield
        finally:
            bus.topic_limits, bus.max_runs, bus.concurrency, bus.isolate, bus.on_give_up = saved

    def _summary(self, run: RunRef) -> dict[str, Any]:
        run_id, site = run.run_id, run.site_domain
        with tenancy.scope(site):
            try:
                summary = finish_run(self.deps, run_id)
            except GleanerError as exc:
                summary = None
                self._given_up.setdefault(run_id, str(exc))
        if summary is None:  # the run was never created: map refused its request
            return {"run_id": run_id, "site_domain": site, "target_url": run.target_url, "status": "failed",
                    "discovered": 0, "included": 0, "excluded": 0, "fetched": 0, "not_modified": 0, "refused": 0,
                    "failed": 0, "limited": 0, "snapshots": {"new": 0, "changed": 0, "unchanged": 0},
                    "error": self._given_up.get(run_id, "the run was not created")}
        dead = [f"{type(d.message).__name__}: {d.error}" for d in self.bus.dead_letters
                if getattr(d.message, "run_id", None) == run_id]
        if dead:
            summary["dead_letters"] = dead
        return summary

