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
- a run is settled (its summary made, its notifications flushed) as soon as its last message is
  done, on the engine's finisher threads: the others go on meanwhile, and nothing waits for the slowest
  (runs of the same size end together, and each settling is a few database round trips: several at once);
- ``gleaner watch`` keeps one engine :meth:`serve` ing: the runs each tick adds start at once, whatever
  runs are still going;
- Ctrl-C (or SIGTERM) marks every run still active ``interrupted``; ``gleaner runs resume RUN_ID``
  finishes each.

Every run is recorded with this process as its worker, as ``gleaner crawl`` records it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.bus.local import LocalBus
from gleaner.errors import GleanerError
from gleaner.messages import CrawlRequested, Message, ScrapeBatch
from gleaner.runtime.runner import SCRAPE_BATCHES_IN_FLIGHT, finish_run, local_bus, notify, settle
from gleaner.store.ledger.runstate import RunStatus

log = logging.getLogger(__name__)

# Bus threads per run under way: a run has at most two scrape batches in flight, and its snapshot
# and ingest messages overlap them; one more thread serves the work of no run (an operator's re-ingest).
THREADS_PER_RUN = SCRAPE_BATCHES_IN_FLIGHT + 1
# Runs settled at once (their round trips overlap); a display's on_run_end is called from these threads.
FINISHERS = 4

OnDispatch = Callable[[Message], None] | None
OnRunEnd = Callable[["RunRef", dict[str, Any]], None] | None


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

    def __init__(self, deps: Deps, on_dispatch: OnDispatch = None, on_run_end: OnRunEnd = None) -> None:
        self.deps = deps
        self.bus: LocalBus = local_bus(deps)  # also records this process as the runs' worker
        self.on_dispatch = on_dispatch
        self.on_run_end = on_run_end
        self._runs: dict[str, RunRef] = {}
        self._lock = threading.Lock()
        self._given_up: dict[str, str] = {}
        self._finished: dict[str, Future[dict[str, Any]]] = {}
        self._ended_unknown: set[str] = set()  # runs whose last message was done before add() named them
        self._serving = False  # serve() keeps no summaries: a watch runs for months
        # Runs are settled here as they end, off the draining thread (which goes on dispatching).
        self._finisher = ThreadPoolExecutor(max_workers=FINISHERS, thread_name_prefix="gleaner-engine-finish")
        self._settling: list[Future[dict[str, Any]]] = []  # what serve() waits for before it returns
        self.interrupted: list[str] = []  # the runs Ctrl-C marked interrupted

    def crawl(self, requests: Sequence[CrawlRequested]) -> list[dict[str, Any]]:
        """Publish one crawl request per site and drive them all; a summary per request, in order."""
        runs = [RunRef.of(request) for request in requests]
        self.add(runs)
        for request in requests:
            self.bus.publish(request, ordering_key=request.site_domain)
        return self.drive(runs)

    def add(self, runs: Sequence[RunRef]) -> None:
        """Runs this engine drives (their requests on the bus already, or published next)."""
        with self._lock:
            for run in runs:
                self._runs[run.run_id] = run
                if run.run_id in self._ended_unknown and run.run_id not in self._finished:
                    self._finished[run.run_id] = self._settle(run)
        # A question per site until one is new: beside the runs' start, not before it (a tick of fifty
        # known sites asked fifty times before its first request).
        threading.Thread(target=self._warm, args=(list(runs),), name="gleaner-engine-warm", daemon=True).start()

    def drive(self, runs: Sequence[RunRef]) -> list[dict[str, Any]]:
        """Drain the bus until every run ended; a summary per run, in order."""
        self.add(runs)
        with self._bounded(len(runs)):
            try:
                self.bus.drain(on_dispatch=self._dispatched)
            except KeyboardInterrupt:
                self.interrupt()
                raise
        return [self._result(run) for run in runs]

    def serve(self, until: threading.Event) -> None:
        """Drive the runs :meth:`add` hands over, as they come, until ``until`` is set and every run ended
        (``gleaner watch``: its ticks add runs while others are still going)."""
        self._serving = True
        with self._bounded(self.deps.settings.max_runs or 1):
            self.bus.drain(on_dispatch=self._dispatched, until=until)
        with self._lock:
            settling = list(self._settling)
        for future in settling:  # the last runs' settling done
            future.result()

    def _dispatched(self, message: Message) -> None:
        if self.on_dispatch is not None:
            self.on_dispatch(message)
        run_id = getattr(message, "run_id", None)
        if not isinstance(run_id, str) or self.bus.active(run_id):
            return
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:  # a tick publishes its requests before it hands their runs over
                self._ended_unknown.add(run_id)
            elif run_id not in self._finished:
                self._finished[run_id] = self._settle(run)

    def _finish(self, run: RunRef) -> dict[str, Any]:
        """A run's last message is done: settle it, send what it has to say, make its summary."""
        try:
            notify(self.deps)
        except GleanerError as exc:  # the run is done; `gleaner deliver` sends what is left
            log.warning("could not deliver the notifications of run %s: %s", run.run_id, exc)
        summary = self._summary(run)
        if self.on_run_end is not None:
            try:
                self.on_run_end(run, summary)
            except Exception:  # a display's failure is no run's
                log.exception("on_run_end failed for run %s", run.run_id)
        if self._serving:
            with self._lock:
                self._runs.pop(run.run_id, None)
                self._finished.pop(run.run_id, None)
                self._ended_unknown.discard(run.run_id)
        return summary

    def _result(self, run: RunRef) -> dict[str, Any]:
        with self._lock:
            finished = self._finished.get(run.run_id)
        if finished is None:  # never dispatched (interrupted before it started)
            with self._lock:
                finished = self._finished.get(run.run_id) or self._settle(run)
                self._finished[run.run_id] = finished
        return finished.result()

    def _settle(self, run: RunRef) -> Future[dict[str, Any]]:
        """Hand a run that ended to the finishers (called with the lock held)."""
        future = self._finisher.submit(self._finish, run)
        self._settling = [f for f in self._settling if not f.done()]  # a watch settles runs for months
        self._settling.append(future)
        return future

    def close(self) -> None:
        self._finisher.shutdown(wait=True)

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
        with self._lock:
            sites = {run_id: run.site_domain for run_id, run in self._runs.items()}
        for run_id, site in sites.items():
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
                    "warnings": [], "error": self._given_up.get(run_id, "the run was not created")}
        dead = [f"{type(d.message).__name__}: {d.error}" for d in self.bus.dead_letters
                if getattr(d.message, "run_id", None) == run_id]
        if dead:
            summary["dead_letters"] = dead
        return summary

