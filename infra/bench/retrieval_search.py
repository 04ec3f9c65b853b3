"""Part 2 of ``retrieval.py``: search latency over many synthetic chunks, and the helpers both use.

``search_latency`` seeds database "big" of the server (``--chunks`` chunks, one document per 20, the
HNSW index built after the load) unless a kept data directory already holds them, adds ``--fresh``
chunks written fresh (outside the HNSW index, as ingest writes them), and times ``search()``
alternated query by query against a baseline statement: session 9's, or with a fresh set migration
0033's HNSW-only candidate function, to show what comparing the fresh set costs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "shared"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import _WORDS  # noqa: E402

from gleaner.app import Deps  # noqa: E402
from gleaner.retrieval.embedder import EmbedModel, default_embedder  # noqa: E402
from gleaner.settings.config import Settings, parse_networks  # noqa: E402  # noqa: E402
from gleaner.store.backends import db  # noqa: E402


def _deps(server: Any, name: str, work: Path, model: str = "static") -> Deps:
    sa_url, connect_args = db._pg8000_url(server.get_uri())
    admin = sa.create_engine(sa_url, connect_args=connect_args, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    admin.dispose()
    settings = Settings(data_dir=work / name, database_url=server.get_uri(database=name),
                        allow_networks=parse_networks("127.0.0.0/8"), host_delay=0.0, host_concurrency=8,
                        embed_model=model)
    deps = Deps(settings)
    db.upgrade(deps.engine)
    return deps


def _size(deps: Deps, *tables: str) -> int:
    with deps.engine.connect() as conn:
        return sum(int(conn.execute(sa.text(f"SELECT pg_total_relation_size('{t}')")).scalar_one()) for t in tables)


def _owner(server: Any, name: str) -> sa.Engine:
    """The login role (the tables' owner) on database ``name``: for what the application role may not do."""
    sa_url, connect_args = db._pg8000_url(server.get_uri(database=name))
    return sa.create_engine(sa_url, connect_args=connect_args, isolation_level="AUTOCOMMIT")


_SEED_SQL = [
    # One document per 20 chunks, each with a current version, its text, a rag routing and an index row.
    "INSERT INTO knowledge.documents (id, site_domain, path, canonical_url, url_hash, status, title)"
    " SELECT md5('d' || i)::uuid, 'big.test', '/p' || i, 'https://big.test/p' || i, md5('u' || i), 'active',"
    " 'Page ' || i FROM generate_series(0, :docs - 1) i",
    "INSERT INTO knowledge.document_snapshots (id, document_id, version, content_hash, processed_markdown_ref)"
    " SELECT md5('s' || i)::uuid, md5('d' || i)::uuid, 1, md5('c' || i), 'bench' FROM generate_series(0, :docs - 1) i",
    "UPDATE knowledge.documents SET current_snapshot_id = md5('s' || substr(path, 3))::uuid",
    "INSERT INTO knowledge.canonical_texts (text_hash, body, byte_length)"
    " SELECT 'h' || i, repeat('lorem ipsum ', 200), 2400 FROM generate_series(0, :docs - 1) i",
    "INSERT INTO knowledge.snapshot_texts (snapshot_id, text_hash, source_blake3)"
    " SELECT md5('s' || i)::uuid, 'h' || i, 'x' FROM generate_series(0, :docs - 1) i",
    "INSERT INTO knowledge.document_routings (site_domain, document_id, destination)"
    " SELECT 'big.test', md5('d' || i)::uuid, 'rag' FROM generate_series(0, :docs - 1) i",
    "INSERT INTO knowledge.search_index (document_id, site_domain, snapshot_id, text_hash)"
    " SELECT md5('d' || i)::uuid, 'big.test', md5('s' || i)::uuid, 'h' || i FROM generate_series(0, :docs - 1) i",
    "DROP INDEX knowledge.text_chunks_embedding",
    "INSERT INTO knowledge.text_chunks (text_hash, ordinal, chunk_start, chunk_end, heading, tsv, embedding_model,"
    " embedding_dim, embedding)"
    " SELECT 'h' || (i / 20), mod(i, 20), (mod(i, 20)) * 100, (mod(i, 20)) * 100 + 99, '',"
    " to_tsvector('english', (SELECT string_agg((CAST(:words AS text[]))[1 + floor(random() * :nw)::int], ' ')"
    "   FROM generate_series(1, 60) WHERE i >= 0)), :model, 384,"
    " CAST((SELECT array_agg(random() - 0.5) FROM generate_series(1, 384) WHERE i >= 0) AS public.vector)"
    " FROM generate_series(0, :chunks - 1) i",
]


def _seeded(server: Any, chunks: int) -> bool:
    """Whether database "big" of a kept data directory (``--pgdata``) already holds ``chunks`` chunks."""
    owner = _owner(server, "postgres")
    with owner.connect() as conn:
        exists = conn.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = 'big'")).first() is not None
    owner.dispose()
    if not exists:
        return False
    owner = _owner(server, "big")
    with owner.connect() as conn:
        have = conn.execute(sa.text("SELECT count(*) FROM knowledge.text_chunks WHERE text_hash NOT LIKE 'fh%'")
                            ).scalar_one()
        indexed = conn.execute(sa.text("SELECT 1 FROM pg_indexes WHERE indexname = 'text_chunks_embedding'")).first()
        models = conn.execute(sa.text("SELECT DISTINCT embedding_model FROM knowledge.text_chunks"
                                      " WHERE text_hash NOT LIKE 'fh%'")).scalars().all()
    owner.dispose()
    if have != chunks or indexed is None or models != [default_embedder().model]:
        raise SystemExit(f"database big holds {have} chunks of {models} (HNSW: {indexed is not None}), not"
                         f" {chunks} of {default_embedder().model}: use another --pgdata")
    return True


def _seed(server: Any, work: Path, chunks: int) -> dict[str, float]:
    deps = _deps(server, "big", work)
    deps.close()
    embedder = default_embedder(EmbedModel.STATIC)
    started = time.perf_counter()
    # As the login role (the table's owner): the application role may not drop and build indexes.
    sa_url, connect_args = db._pg8000_url(server.get_uri(database="big"))
    owner = sa.create_engine(sa_url, connect_args=connect_args)
    with owner.begin() as conn:
        conn.execute(sa.text("SELECT set_config('app.all_tenants', 'on', true)"))
        for sql in _SEED_SQL:
            conn.execute(sa.text(sql), {"docs": chunks // 20, "chunks": chunks, "words": list(_WORDS),
                                        "nw": len(_WORDS), "model": embedder.model})
    seeded = time.perf_counter() - started
    started = time.perf_counter()
    with owner.connect() as conn:
        conn.execute(sa.text("SET maintenance_work_mem = '512MB'"))
        conn.execute(sa.text("CREATE INDEX text_chunks_embedding ON knowledge.text_chunks USING hnsw"
                             " (embedding public.vector_cosine_ops) WITH (m = 16, ef_construction = 64)"))
        conn.commit()
    owner.dispose()
    # What autovacuum does to a table this size soon after the load: the GIN index's pending list merged.
    owner = _owner(server, "big")
    with owner.connect() as conn:
        conn.execute(sa.text("VACUUM ANALYZE"))
    built = time.perf_counter() - started
    owner.dispose()
    return {"seed_seconds": round(seeded, 1), "hnsw_build_seconds": round(built, 1)}


# A fresh set beside the seeded (HNSW-indexed) chunks: documents and chunks of their own ("f" keys), the
# vectors in fresh_embedding with a segment of sign bits per batch, as ingest writes them (the chunks:
# _fresh_chunks), found by search's sign-bit scan (gleaner.retrieval.fresh_scan).
_FRESH_SQL = [
    "INSERT INTO knowledge.documents (id, site_domain, path, canonical_url, url_hash, status, title)"
    " SELECT md5('fd' || i)::uuid, 'big.test', '/f' || i, 'https://big.test/f' || i, md5('fu' || i), 'active',"
    " 'Fresh page ' || i FROM generate_series(0, :docs - 1) i",
    "INSERT INTO knowledge.document_snapshots (id, document_id, version, content_hash, processed_markdown_ref)"
    " SELECT md5('fs' || i)::uuid, md5('fd' || i)::uuid, 1, md5('fc' || i), 'bench'"
    " FROM generate_series(0, :docs - 1) i",
    "UPDATE knowledge.documents SET current_snapshot_id = md5('fs' || substr(path, 3))::uuid WHERE path LIKE '/f%'",
    "INSERT INTO knowledge.canonical_texts (text_hash, body, byte_length)"
    " SELECT 'fh' || i, repeat('lorem ipsum ', 200), 2400 FROM generate_series(0, :docs - 1) i",
    "INSERT INTO knowledge.snapshot_texts (snapshot_id, text_hash, source_blake3)"
    " SELECT md5('fs' || i)::uuid, 'fh' || i, 'x' FROM generate_series(0, :docs - 1) i",
    "INSERT INTO knowledge.document_routings (site_domain, document_id, destination)"
    " SELECT 'big.test', md5('fd' || i)::uuid, 'rag' FROM generate_series(0, :docs - 1) i",
    "INSERT INTO knowledge.search_index (document_id, site_domain, snapshot_id, text_hash)"
    " SELECT md5('fd' || i)::uuid, 'big.test', md5('fs' || i)::uuid, 'fh' || i FROM generate_series(0, :docs - 1) i",
]
_FRESH_CHUNKS_SQL = (
    "INSERT INTO knowledge.text_chunks (text_hash, ordinal, chunk_start, chunk_end, heading, tsv, embedding_model,"
    " embedding_dim, fresh_embedding)"
    " SELECT v.h, v.o, v.o * 100, v.o * 100 + 99, '',"
    " to_tsvector('english', (SELECT string_agg((CAST(:words AS text[]))[1 + floor(random() * :nw)::int], ' ')"
    "   FROM generate_series(1, 60) WHERE v.o >= 0)), :model, 384, v.v FROM pg_temp.gleaner_new_vectors v")
FRESH_BATCH = 2000  # chunks a segment (an ingest batch of about a hundred pages)
_UNFRESH_SQL = [
    "DELETE FROM knowledge.fresh_segments",
    "DELETE FROM knowledge.text_chunks WHERE text_hash LIKE 'fh%'",
    "DELETE FROM knowledge.search_index WHERE text_hash LIKE 'fh%'",
    "DELETE FROM knowledge.document_routings WHERE document_id IN"
    " (SELECT id FROM knowledge.documents WHERE path LIKE '/f%')",
    "DELETE FROM knowledge.snapshot_texts WHERE text_hash LIKE 'fh%'",
    "DELETE FROM knowledge.canonical_texts WHERE text_hash LIKE 'fh%'",
    "UPDATE knowledge.documents SET current_snapshot_id = NULL WHERE path LIKE '/f%'",
    "DELETE FROM knowledge.document_snapshots WHERE document_id IN"
    " (SELECT id FROM knowledge.documents WHERE path LIKE '/f%')",
    "DELETE FROM knowledge.documents WHERE path LIKE '/f%'",
]


def _fresh_set(server: Any, chunks: int) -> None:
    """Replace database big's fresh set (if any) with ``chunks`` fresh chunks (0: none)."""
    owner = _owner(server, "big")
    with owner.connect() as conn:
        conn.execute(sa.text("SELECT set_config('app.all_tenants', 'on', false)"))
        for sql in _UNFRESH_SQL + (_FRESH_SQL if chunks else []):
            conn.execute(sa.text(sql), {"docs": chunks // 20, "chunks": chunks, "words": list(_WORDS),
                                        "nw": len(_WORDS), "model": default_embedder().model})
    if chunks:
        _fresh_chunks(owner, chunks)
    with owner.connect() as conn:
        conn.execute(sa.text("VACUUM ANALYZE knowledge.text_chunks"))
    owner.dispose()


def _fresh_chunks(owner: sa.Engine, chunks: int) -> None:
    """The fresh set's chunks (random vectors, word soup), written as ingest writes them: vectors in
    binary, one segment of sign bits per batch, in the batch's transaction."""
    import numpy as np

    from gleaner.retrieval.fresh_scan import sign_bits, write_segment
    from gleaner.retrieval.prepare import vector_rows
    from gleaner.retrieval.vectors import copy_vectors

    model = default_embedder().model
    rng = np.random.default_rng(7)
    for start in range(0, chunks, FRESH_BATCH):
        keys = [(f"fh{i // 20}", i % 20) for i in range(start, min(chunks, start + FRESH_BATCH))]
        vectors = rng.uniform(-0.5, 0.5, (len(keys), 384)).astype(np.float32)
        with owner.connect().execution_options(isolation_level="READ COMMITTED") as conn, conn.begin():
            conn.execute(sa.text("SELECT set_config('app.all_tenants', 'on', true)"))
            copy_vectors(conn, vector_rows(keys, vectors.tolist()))
            conn.execute(sa.text(_FRESH_CHUNKS_SQL), {"words": list(_WORDS), "nw": len(_WORDS), "model": model})
            write_segment(conn, model, keys, sign_bits(vectors))


def _hnsw_only_function(server: Any) -> None:
    """Migration 0033's candidate function (the HNSW index's nearest, no fresh vectors) under another
    name in database big: the baseline that shows what comparing the fresh set costs a search."""
    import importlib.util

    path = REPO / "shared/gleaner/migrations/versions/0033_search_scored_candidates.py"
    spec = importlib.util.spec_from_file_location("bench_migration_0033", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    owner = _owner(server, "big")
    with owner.connect() as conn:
        conn.execute(sa.text(module.CANDIDATES.replace("knowledge.search_chunk_candidates(",
                                                       "knowledge.search_chunk_candidates_hnsw_only(")))
    owner.dispose()


def search_latency(server: Any, work: Path, chunks: int, queries: int, fresh: int = 0) -> dict[str, Any]:
    """Search's p50/p95 against session 9's statement: search_p95.py (since BM25 words and rank fusion,
    search is several statements and a fusion, no longer one statement to swap)."""
    from search_p95 import latency

    return latency(server, work, chunks, queries, fresh)
