"""Erased means gone from the disk: the embedded database's files and write-ahead log rewritten after an erasure.

Deleting a row, or updating it, leaves the old tuple's bytes in the table's file until a VACUUM
reuses the space (and plain VACUUM leaves freed bytes in place), its index entries in the index's
file, its statistics in ``pg_statistic``, and the page as it was in the WAL (a full-page image of
the first change after a checkpoint), until the segment is removed. Anyone who copied the data
directory would read the erased text and URL there. So after an erasure, on the embedded database:

1. ``VACUUM FULL`` every table of the ``knowledge`` schema (their TOAST tables and indexes are
   rebuilt with them): each is written afresh from its live rows, and the old files are unlinked;
2. ``ANALYZE`` them, then ``VACUUM FULL pg_statistic``: the statistics' sample values are taken again
   from live rows only, and the catalog holding the old ones is rewritten;
3. the WAL: with ``wal_recycle`` off (a segment no longer needed is unlinked, not renamed for reuse
   with its bytes), a checkpoint, a switch to a new segment and a second checkpoint leave no segment
   from before the erasure's end in ``pg_wal``.

An external database (``GLEANER_DATABASE_URL``) is the operator's: its files, WAL, replicas and
backups are outside what Gleaner can rewrite (docs/provenance.md says what remains and for how long).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.store.access.rls import ADMIN_OPTION

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ScrubReport:
    tables: int
    seconds: float
    wal_segments_left: int


def scrub_after_erasure(engine: Engine) -> ScrubReport:
    """Rewrite the embedded database's tables, statistics and WAL so no file keeps an erased row's bytes."""
    started = time.monotonic()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT", **{ADMIN_OPTION: True}) as conn:
        tables = [str(name) for name in conn.execute(sa.text(
            "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = 'knowledge'"
            " ORDER BY tablename")).scalars()]
        for table in tables:
            conn.exec_driver_sql(f"VACUUM (FULL) {table}")
        for table in tables:
            conn.exec_driver_sql(f"ANALYZE {table}")
        conn.exec_driver_sql("VACUUM (FULL) pg_catalog.pg_statistic")
        # A segment no longer needed is then unlinked, not kept under a new name with its old bytes.
        conn.exec_driver_sql("ALTER SYSTEM SET wal_recycle = off")
        conn.exec_driver_sql("SELECT pg_reload_conf()")
        # The postmaster passes the reload on to the checkpointer asynchronously: it must have it before the
        # checkpoints below, or they would recycle old segments (their bytes kept) rather than unlink them.
        conn.exec_driver_sql("SELECT pg_sleep(0.5)")
        conn.exec_driver_sql("CHECKPOINT")
        conn.exec_driver_sql("SELECT pg_switch_wal()")
        conn.exec_driver_sql("CHECKPOINT")
        conn.exec_driver_sql("SELECT pg_switch_wal()")
        conn.exec_driver_sql("CHECKPOINT")
        left = int(conn.execute(sa.text(
            "SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'")).scalar_one())
    report = ScrubReport(len(tables), time.monotonic() - started, left)
    log.info("erasure scrub: %d tables rewritten, %d WAL segment(s) left, %.1f s", report.tables,
             report.wal_segments_left, report.seconds)
    return report
