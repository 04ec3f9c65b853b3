"""Why pgvector's HNSW insert is costly: ``python infra/bench/hnsw_insert.py``.

On a scratch embedded server (pgserver, pgvector 0.6.2): tables of 0, 2,000 and 20,000 random
384-dimension vectors, each indexed by a bulk build (m = 16, ef_construction = 64, the build's time
per vector), then 400 more inserted 20 a transaction (a page's chunks): ms and WAL bytes per insert
(right after a checkpoint, so with full-page images, and once more without), the checkpoints the
server made, and the same inserts into a table without the index. Prints lines of figures.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared"))

from gleaner.store.backends import db

GRAPH = "USING hnsw (e vector_cosine_ops) WITH (m = 16, ef_construction = 64)"


def _literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


def _insert(conn: sa.Connection, table: str, vectors: np.ndarray, start: int) -> None:
    payload = json.dumps([{"i": start + i, "v": _literal(v)} for i, v in enumerate(vectors)])
    conn.execute(sa.text(f"INSERT INTO {table} SELECT (r->>'i')::int, CAST(r->>'v' AS public.vector)"
                         " FROM json_array_elements(CAST(:j AS json)) r"), {"j": payload})


def main() -> None:
    import pgserver

    server = pgserver.get_server(tempfile.mkdtemp(prefix="hnsw-insert"), cleanup_mode="delete")
    try:
        url, connect_args = db._pg8000_url(server.get_uri())
        admin = sa.create_engine(url, connect_args=connect_args, isolation_level="AUTOCOMMIT")
        batches = sa.create_engine(url, connect_args=connect_args)
        rng = np.random.default_rng(7)
        with admin.connect() as c:
            c.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
            for setting in ("shared_buffers", "max_wal_size", "checkpoint_timeout", "maintenance_work_mem"):
                print(setting, c.execute(sa.text(f"SHOW {setting}")).scalar())

        def wal(c: sa.Connection) -> Any:
            return c.execute(sa.text("SELECT pg_current_wal_lsn()")).scalar()

        def timed_inserts(table: str, first_id: int, n: int = 400) -> tuple[float, float]:
            vectors = rng.standard_normal((n, 384)).astype(np.float32)
            with admin.connect() as c:
                before = wal(c)
            started = time.perf_counter()
            for at in range(0, n, 20):
                with batches.begin() as c:
                    _insert(c, table, vectors[at:at + 20], first_id + at)
            seconds = time.perf_counter() - started
            with admin.connect() as c:
                written = c.execute(sa.text("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), :a)"), {"a": before}).scalar()
            return seconds / n * 1000, float(written) / n / 1024

        for size in (0, 2000, 20000):
            table = f"t{size}"
            with admin.connect() as c:
                c.execute(sa.text(f"CREATE TABLE {table} (id int PRIMARY KEY, e vector(384))"))
                base = rng.standard_normal((size, 384)).astype(np.float32)
                for at in range(0, size, 2000):
                    _insert(c, table, base[at:at + 2000], at)
                c.execute(sa.text("SET maintenance_work_mem = '512MB'"))
                started = time.perf_counter()
                c.execute(sa.text(f"CREATE INDEX ON {table} {GRAPH}"))
                build = time.perf_counter() - started
                c.execute(sa.text("CHECKPOINT"))
            ms, kib = timed_inserts(table, 1_000_000)
            ms2, kib2 = timed_inserts(table, 2_000_000)
            with admin.connect() as c:
                checkpoints = c.execute(sa.text("SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter")
                                        ).scalar()
            built = f"bulk build {build / size * 1000:.2f} ms a vector" if size else "an empty index"
            print(f"{size} vectors: {built}; insert {ms:.2f} ms,"
                  f" {kib:.1f} KiB WAL a vector after a checkpoint, {ms2:.2f} ms, {kib2:.1f} KiB after;"
                  f" checkpoints so far {checkpoints}", flush=True)
        with admin.connect() as c:
            c.execute(sa.text("CREATE TABLE plain (id int PRIMARY KEY, e vector(384))"))
        ms, kib = timed_inserts("plain", 0)
        print(f"without the index: {ms:.2f} ms, {kib:.1f} KiB WAL a vector")
    finally:
        server.cleanup()
    print("load", os.getloadavg())


if __name__ == "__main__":
    main()
