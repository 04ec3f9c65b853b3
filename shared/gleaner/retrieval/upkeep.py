"""The search index's upkeep off the crawl's path: the word index tidied when a crawl ends, and the
vector graph's merges when nothing else runs (``gleaner serve``'s idle merger, the cloud's job).

The word index (GIN over ``text_chunks.tsv``) takes ingest's new entries into a pending list, which
every word search reads whole until it is merged into the index (at 4 MB, by the insert that fills
it, or by VACUUM). Right after a first crawl of 63 real pages (Node.js's reference, 6,287 chunks) the
list held 498 pages and a search took 88 ms at the median, 121 at p95; merged (43 ms), 14 and 20.
:func:`tidy_words` merges it, and takes ``tsv``'s statistics again once the table has grown by a tenth
since they were taken (the word function reads common words' counts from them): ``gleaner crawl``,
``demo`` and ``tick`` call it when their runs end, and the idle merger and the cloud's job too.

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

from gleaner.errors import GleanerError
from gleaner.retrieval.fresh import MergeReport, MergeWay, fresh_count, merge_fresh
from gleaner.store.access.rls import ADMIN_OPTION

log = logging.getLogger(__name__)

IDLE_CHECK_SECONDS = 60.0  # how often serve's merger looks for an idle moment
CLOUD_BUDGET = 40.0  # seconds of map-http's 60 s timeout the scheduled upkeep may spend moving
STALLED_SECONDS = 900  # a run without a heartbeat this long is not holding the machine (crashed)

_RUN_ACTIVE = sa.text(
    "SELECT EXISTS (SELECT 1 FROM knowledge.crawl_runs WHERE status IN ('queued', 'mapping', 'mapped', 'sampling',"
    " 'scraping') AND COALESCE(heartbeat_at, created_at) > now() - make_interval(secs => :stalled))")


_CLEAN_PENDING = sa.text("SELECT gin_clean_pending_list(CAST('knowledge.text_chunks_tsv' AS regclass))")
# Both need the index's and the table's owner: a login role that is not (a Cloud SQL IAM user beside the
# migrating role) leaves them to autovacuum.
_OWNER = sa.text("SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c"
                 " WHERE c.oid = CAST('knowledge.text_chunks_tsv' AS regclass)")
# As autovacuum's own threshold (50 rows and a tenth of the table); a never analysed table counts as grown.
_STALE_STATISTICS = sa.text(
    "SELECT s.n_mod_since_analyze > 50 + 0.1 * GREATEST(c.reltuples, 0)"
    " OR (s.last_analyze IS NULL AND s.last_autoanalyze IS NULL) FROM pg_stat_user_tables s"
    " JOIN pg_class c ON c.oid = s.relid WHERE s.relid = CAST('knowledge.text_chunks' AS regclass)")


def tidy_words(engine: Engine) -> None:
    """Merge the word index's pending entries and, when ``text_chunks`` grew by a tenth, analyse its
    words. As the tables' owner (the migration role; where the login role is not the owner, nothing):
    neither is the application role's to do; no tenant's rows are read. A failure is logged, never
    raised: the index is correct either way."""
    try:
        with engine.execution_options(**{ADMIN_OPTION: True}).begin() as conn:
            if not conn.execute(_OWNER).scalar():
                return
            conn.execute(_CLEAN_PENDING)
            if conn.execute(_STALE_STATISTICS).scalar():
                conn.execute(sa.text("ANALYZE knowledge.text_chunks (tsv)"))
    except (sa.exc.SQLAlchemyError, GleanerError) as exc:
        log.warning("tidying the word index failed (%s); searches read its pending entries until it is", exc)


def runs_active(engine: Engine) -> bool:
    """Whether any process's run is under way (every tenant's: the machine is shared)."""
    from gleaner import tenancy

    with tenancy.all_tenants(), engine.connect() as conn:
        return bool(conn.execute(_RUN_ACTIVE, {"stalled": STALLED_SECONDS}).scalar())


def merge_if_idle(engine: Engine, budget: float | None = None) -> MergeReport:
    """Unless a run is active: tidy the word index, and merge the fresh vectors unless nothing is fresh
    (then way ``none``); with a
    ``budget`` (seconds), moves only, until it is spent (gleaner.retrieval.fresh.merge_fresh)."""
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
