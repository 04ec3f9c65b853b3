"""The vector graph's upkeep when nothing else runs: ``gleaner serve``'s idle merger and the cloud's job
(and the word index tidied there too: gleaner.retrieval.tidy).

A crawl never merges (gleaner.retrieval.fresh). The fresh vectors enter the HNSW graph when a
process has nothing better to do: ``gleaner watch`` between cycles (gleaner.cli.many), ``gleaner
serve`` on a thread of its own (:class:`IdleMerger`), ``gleaner index`` on demand, and in the cloud
Cloud Scheduler's ``{"index": true}`` call to map-http (:func:`merge_if_idle`, moving for at most
``CLOUD_BUDGET`` seconds of the function's minute: batches are committed, the next call goes on). "Idle" is read in
the database: no run of any process active (a run whose heartbeat stopped long ago is a crashed
one, not an active one), so a merge never competes with a crawl for the machine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.retrieval.fresh import MergeReport, MergeWay, fresh_count, merge_fresh
from gleaner.retrieval.tidy import tidy_words

log = logging.getLogger(__name__)

IDLE_CHECK_SECONDS = 60.0  # how often serve's merger looks for an idle moment
CLOUD_BUDGET = 40.0  # seconds of map-http's 60 s timeout the scheduled upkeep may spend moving
STALLED_SECONDS = 900  # a run without a heartbeat this long is not holding the machine (crashed)

_RUN_ACTIVE = sa.text(
    "SELECT EXISTS (SELECT 1 FROM knowledge.crawl_runs WHERE status IN ('queued', 'mapping', 'mapped', 'sampling',"
    " 'scraping') AND COALESCE(heartbeat_at, created_at) > now() - make_interval(secs => :stalled))")


def runs_active(engine: Engine) -> bool:
    """Whether any process's run is under way (every tenant's: the machine is shared)."""
    from gleaner import tenancy

    with tenancy.all_tenants(), engine.connect() as conn:
        return bool(conn.execute(_RUN_ACTIVE, {"stalled": STALLED_SECONDS}).scalar())


def merge_if_idle(engine: Engine, budget: float | None = None) -> MergeReport:
    """Unless a run is active: tidy the word index, and merge the fresh vectors unless nothing is fresh
    (then way ``none``); with a ``budget`` (seconds), moves only, until it is spent
    (gleaner.retrieval.fresh.merge_fresh)."""
    if runs_active(engine):
        return MergeReport(0, MergeWay.NONE, 0.0)
    tidy_words(engine)
    if not fresh_count(engine, 1):
        return MergeReport(0, MergeWay.NONE, 0.0)
    return merge_fresh(engine, budget=budget)


class IdleMerger:
    """A daemon thread merging fresh vectors whenever ``idle()`` says nothing waits for the machine."""

    def __init__(self, engine: Engine, idle: Callable[[], bool] = lambda: True,
                 every: float | None = None) -> None:
        self._engine = engine
        self._idle = idle
        self._every = IDLE_CHECK_SECONDS if every is None else every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gleaner-idle-merge", daemon=True)
        self.reports: list[MergeReport] = []  # the merges that moved something (tests, logs)

    def start(self) -> IdleMerger:
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 30) -> None:
        """Stop looking; a merge under way finishes its batch (a rebuild, its build) first."""
        self._stop.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            try:
                if not self._idle():
                    continue
                report = merge_if_idle(self._engine)
            except sa.exc.SQLAlchemyError as exc:  # the next idle moment tries again
                log.warning("merging fresh vectors when idle failed: %s", exc)
                continue
            if report.merged:
                self.reports.append(report)
                log.info("moved %d fresh vectors into the vector index (%s) in %.1f s",
                         report.merged, report.way, report.seconds)
