"""Fresh vectors into the HNSW index, off the crawl's path (migration 0037).

Ingest writes each new chunk's vector to ``text_chunks.fresh_embedding``, which no graph index
covers: search compares the query with every fresh vector exactly, beside the HNSW index's nearest
over ``embedding``, so a page is searchable by meaning in the transaction that ingests it, and the
crawl does not pay pgvector's insert into the graph. :func:`merge_fresh` moves fresh vectors into
``embedding`` (and so into the graph), in one of two ways:

- **rebuild**, when the fresh set is at least as large as the indexed one (a first crawl into an
  empty index, say): the HNSW index is dropped, the vectors moved and the index built again in
  bulk, in one transaction. pgvector's bulk build costs a small part of its insert per vector, and
  the index rebuilt is at most twice the fresh set; the table is locked for that transaction
  (searches and ingest wait), so it is never longer than a bulk build of ``2 * FRESH_MAX`` vectors
  after the crawl's own merges;
- **move**, otherwise: batches of ``MERGE_BATCH`` rows, each its own transaction, each row updated
  once (the graph's insert is paid here, not in ingest).

Who merges: ingest when the fresh set passes ``FRESH_MAX`` (the bound on what search compares
exactly), the CLI after a crawl or ``tick`` only past that bound, ``gleaner watch`` when idle, and
``gleaner index`` always (gleaner.cli.search). One merge at a time per database (an advisory lock); a second caller
returns at once. Runs as the login role (the tables' owner): it moves rows of every tenant, and a
rebuild is DDL. Where that role may not drop the index, the rebuild falls back to moving.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner.store.access.rls import ADMIN_OPTION

FRESH_MAX = 4000  # fresh vectors beyond which ingest merges: search compares each of them exactly
MERGE_BATCH = 500  # rows a transaction when moving: short transactions beside a running crawl
REBUILD_MEMORY = "256MB"  # maintenance_work_mem of a rebuild: the graph of ~100,000 vectors built in memory
LOCK_WAIT = "10s"  # a rebuild waits this long for the table, else it moves instead
_LOCK_KEY = 0x6C65616E_66726573  # advisory lock: one merge at a time per database

_COUNT_FRESH = sa.text("SELECT count(*) FROM (SELECT 1 FROM knowledge.text_chunks"
                       " WHERE fresh_embedding IS NOT NULL LIMIT :cap) f")
_COUNT_INDEXED = sa.text("SELECT count(*) FROM (SELECT 1 FROM knowledge.text_chunks"
                         " WHERE embedding IS NOT NULL LIMIT :cap) i")
_MOVE_ALL = sa.text("UPDATE knowledge.text_chunks SET embedding = fresh_embedding, fresh_embedding = NULL"
                    " WHERE fresh_embedding IS NOT NULL")
# A batch: rows another merge or an erasure holds are left for later (SKIP LOCKED); the outer
# condition is checked again on the row's latest version.
_MOVE_BATCH = sa.text(
    "UPDATE knowledge.text_chunks c SET embedding = c.fresh_embedding, fresh_embedding = NULL"
    " FROM (SELECT text_hash, ordinal FROM knowledge.text_chunks WHERE fresh_embedding IS NOT NULL"
    "   LIMIT :n FOR UPDATE SKIP LOCKED) f"
    " WHERE c.text_hash = f.text_hash AND c.ordinal = f.ordinal AND c.fresh_embedding IS NOT NULL")
INDEX_DDL = ("CREATE INDEX text_chunks_embedding ON knowledge.text_chunks"
             " USING hnsw (embedding public.vector_cosine_ops) WITH (m = 16, ef_construction = 64)")


class MergeWay(StrEnum):
    MOVE = "move"
    REBUILD = "rebuild"
    BUSY = "busy"  # another merge holds the lock
    NONE = "none"  # nothing fresh, or no pgvector


@dataclass(frozen=True)
class MergeReport:
    merged: int
    way: MergeWay
    seconds: float


def has_fresh_column(conn: Connection) -> bool:
    return bool(conn.execute(sa.text(
        "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'knowledge'"
        " AND table_name = 'text_chunks' AND column_name = 'fresh_embedding')")).scalar())


def fresh_count(engine: Engine, cap: int = 1_000_000_000) -> int:
    """How many vectors are fresh (not in the HNSW index yet), counted up to ``cap``."""
    with engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        if not has_fresh_column(conn):
            return 0
        return int(conn.execute(_COUNT_FRESH, {"cap": cap}).scalar_one())


def merge_fresh(engine: Engine, *, allow_rebuild: bool = True) -> MergeReport:
    """Move every fresh vector into the HNSW index (see the module docstring); safe to repeat."""
    started = time.perf_counter()
    with engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        if not has_fresh_column(conn):
            conn.rollback()
            return MergeReport(0, MergeWay.NONE, 0.0)
        if not conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": _LOCK_KEY}).scalar():
            conn.rollback()
            return MergeReport(0, MergeWay.BUSY, 0.0)
        conn.commit()
        try:
            fresh = int(conn.execute(_COUNT_FRESH, {"cap": 1_000_000_000}).scalar_one())
            indexed = int(conn.execute(_COUNT_INDEXED, {"cap": fresh + 1}).scalar_one()) if fresh else 0
            conn.commit()
            if not fresh:
                return MergeReport(0, MergeWay.NONE, time.perf_counter() - started)
            if allow_rebuild and indexed <= fresh:
                merged = _rebuild(conn)
                if merged is not None:
                    return MergeReport(merged, MergeWay.REBUILD, time.perf_counter() - started)
            merged = 0
            while moved := int(conn.execute(_MOVE_BATCH, {"n": MERGE_BATCH}).rowcount or 0):
                conn.commit()
                merged += moved
            conn.commit()
            return MergeReport(merged, MergeWay.MOVE, time.perf_counter() - started)
        finally:
            conn.rollback()
            conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": _LOCK_KEY})
            conn.commit()


def _rebuild(conn: Connection) -> int | None:
    """Drop the HNSW index, move every fresh vector, build the index in bulk: one transaction.

    None when the table could not be locked in time or the role may not rebuild (the caller moves)."""
    try:
        conn.execute(sa.text(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'"))
        conn.execute(sa.text(f"SET LOCAL maintenance_work_mem = '{REBUILD_MEMORY}'"))
        # The strongest lock first, so no weaker one of this transaction waits to be upgraded.
        conn.execute(sa.text("LOCK TABLE knowledge.text_chunks IN ACCESS EXCLUSIVE MODE"))
        conn.execute(sa.text("DROP INDEX knowledge.text_chunks_embedding"))
        merged = int(conn.execute(_MOVE_ALL).rowcount or 0)
        conn.execute(sa.text(INDEX_DDL))
        conn.commit()
        return merged
    except sa.exc.DBAPIError:
        conn.rollback()
        return None
