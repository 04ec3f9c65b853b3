"""Fresh vectors into the HNSW graph, off the crawl's path (migrations 0037 and 0042).

Ingest writes each new chunk's vector to ``text_chunks.fresh_embedding``, which no graph index
covers, and its sign bits to a ``fresh_segments`` row: search ranks every fresh vector by those bits
in its own process and compares the nearest exactly (gleaner.retrieval.fresh_scan), beside the HNSW
graph's nearest over ``embedding``. So a page is searchable by meaning in the transaction that
ingests it, and a crawl never pays, waits for, or contends with the graph. :func:`merge_fresh` moves
fresh vectors into ``embedding`` (and so into the graph), in one of two ways, neither of which locks
ingest or search out of ``text_chunks``:

- **rebuild**, when the fresh set is at least as large as the graph (a first crawl into an empty
  index, a re-embedding) or the graph is missing or invalid (an interrupted rebuild): the graph's
  vectors get segments too (so they stay searchable by the scan), the graph is dropped
  (``DROP INDEX CONCURRENTLY``), the fresh vectors moved in short batches (cheap without a graph),
  and the graph built again in bulk (``CREATE INDEX CONCURRENTLY``). Search reads the graph only
  while it is valid, and the scan covers every vector meanwhile;
- **move**, otherwise: batches of ``MERGE_BATCH`` rows, each its own transaction, each row updated
  once, paying the graph's insert per vector.

Then the segments whose vectors are all in the valid graph are deleted, and ``text_chunks`` vacuumed
(every moved row left a dead version: gleaner.retrieval.tidy). Who merges: ``gleaner
index`` always, ``gleaner watch`` and ``gleaner serve`` when no run is active, and in the cloud the
scheduled upkeep job (gleaner.retrieval.upkeep); never a crawl, ``demo`` or ``tick``. One merge at
a time per database (an advisory lock); a second caller returns at once. Runs as the login role (the
tables' owner): it moves rows of every tenant, and a rebuild is DDL.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner.retrieval.tidy import vacuum_chunks
from gleaner.store.access.rls import ADMIN_OPTION

MERGE_BATCH = 500  # rows a transaction when moving: short transactions beside a running crawl
REBUILD_MEMORY = "256MB"  # maintenance_work_mem of a rebuild: the graph of ~100,000 vectors built in memory
_LOCK_KEY = 0x6C65616E_66726573  # advisory lock: one merge at a time per database

_COUNT_FRESH = sa.text("SELECT count(*) FROM (SELECT 1 FROM knowledge.text_chunks"
                       " WHERE fresh_embedding IS NOT NULL LIMIT :cap) f")
_COUNT_INDEXED = sa.text("SELECT count(*) FROM (SELECT 1 FROM knowledge.text_chunks"
                         " WHERE embedding IS NOT NULL LIMIT :cap) i")
_GRAPH_VALID = sa.text("SELECT COALESCE((SELECT indisvalid FROM pg_index"
                       " WHERE indexrelid = to_regclass('knowledge.text_chunks_embedding')), false)")
# Segments whose every key is no longer fresh (in the graph, or erased): the scan needs them no more.
_DROP_SEGMENTS = sa.text(
    "DELETE FROM knowledge.fresh_segments s WHERE NOT EXISTS (SELECT 1 FROM unnest(s.hashes, s.ordinals) g(h, o)"
    " JOIN knowledge.text_chunks c ON c.text_hash = g.h AND c.ordinal = g.o WHERE c.fresh_embedding IS NOT NULL)")
# The graph's vectors' sign bits, as '0'/'1' text (before a rebuild drops the graph).
_GRAPH_SIGNS = sa.text(
    "SELECT text_hash, ordinal, embedding_model, array_to_string(ARRAY(SELECT CASE WHEN x > 0 THEN 1 ELSE 0 END"
    " FROM unnest(CAST(embedding AS real[])) x), '') FROM knowledge.text_chunks"
    " WHERE embedding IS NOT NULL AND (text_hash, ordinal) > (:h, :o) ORDER BY text_hash, ordinal LIMIT :n")
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


def merge_fresh(engine: Engine, *, allow_rebuild: bool = True, budget: float | None = None) -> MergeReport:
    """Move every fresh vector into the HNSW graph (see the module docstring); safe to repeat.

    With a ``budget`` (seconds: a request's timeout), only moves, stopping after the batch that
    passes it; a missing graph is then left for a merge without one (``gleaner index``)."""
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
            valid = bool(conn.execute(_GRAPH_VALID).scalar())
            conn.commit()
            if not fresh and valid:
                conn.execute(_DROP_SEGMENTS)  # an erasure's, or a merge's that stopped before this
                conn.commit()
                return MergeReport(0, MergeWay.NONE, time.perf_counter() - started)
            if budget is not None and not valid:
                return MergeReport(0, MergeWay.NONE, time.perf_counter() - started)
            if budget is not None:
                merged, way = _move(conn, started + budget), MergeWay.MOVE
            elif not valid or (allow_rebuild and indexed <= fresh):
                merged = _rebuild(conn, graph_signs=valid and indexed > 0)
                way = MergeWay.REBUILD
            else:
                merged, way = _move(conn), MergeWay.MOVE
            conn.execute(_DROP_SEGMENTS)
            conn.commit()
        finally:
            conn.rollback()
            conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": _LOCK_KEY})
            conn.commit()
    if merged:  # every moved row left a dead version (gleaner.retrieval.tidy)
        vacuum_chunks(engine)
    return MergeReport(merged, way, time.perf_counter() - started)


def _move(conn: Connection, deadline: float | None = None) -> int:
    merged = 0
    while moved := int(conn.execute(_MOVE_BATCH, {"n": MERGE_BATCH}).rowcount or 0):
        conn.commit()
        merged += moved
        if deadline is not None and time.perf_counter() > deadline:
            break
    conn.commit()
    return merged


def _rebuild(conn: Connection, *, graph_signs: bool) -> int:
    """Drop the graph, move every fresh vector, build the graph in bulk; nothing waits on a lock.

    Every vector stays searchable throughout: the graph's get segments first (``graph_signs``), and
    a fresh vector's segment is deleted only once the new graph is valid."""
    if graph_signs:
        _graph_segments(conn)
    conn.execution_options(isolation_level="AUTOCOMMIT")  # CONCURRENTLY runs outside a transaction
    try:
        conn.execute(sa.text("DROP INDEX CONCURRENTLY IF EXISTS knowledge.text_chunks_embedding"))
        merged = _move(conn)
        conn.execute(sa.text(f"SET maintenance_work_mem = '{REBUILD_MEMORY}'"))
        conn.execute(sa.text(INDEX_DDL.replace("CREATE INDEX", "CREATE INDEX CONCURRENTLY")))
        conn.execute(sa.text("RESET maintenance_work_mem"))
    finally:
        conn.rollback()  # ends SQLAlchemy's own (no-op) transaction, so the level may change back
        conn.execution_options(isolation_level=conn.default_isolation_level)
    return merged


def _graph_segments(conn: Connection, batch: int = 2000) -> None:
    """Segments for the vectors in the graph, so that the scan finds them while it is rebuilt."""
    from gleaner.retrieval.fresh_scan import write_segment

    after: tuple[str, int] = ("", -1)
    while rows := conn.execute(_GRAPH_SIGNS, {"h": after[0], "o": after[1], "n": batch}).all():
        by_model: dict[str, list[tuple[str, int, bytes]]] = {}
        for h, o, model, bits in rows:
            by_model.setdefault(str(model), []).append((h, int(o), int(bits, 2).to_bytes(len(bits) // 8, "big")))
        for model, part in by_model.items():
            write_segment(conn, model, [(h, o) for h, o, _b in part], b"".join(b for _h, _o, b in part))
        conn.commit()
        after = (rows[-1][0], int(rows[-1][1]))
