"""What retrieval costs and how well it finds: ``python infra/bench/retrieval.py [--pages N] [--chunks N]``.

One run, side by side, on one embedded PostgreSQL (pgserver, with pgvector), both embedding models
(GLEANER_EMBED_MODEL: ``static``, the default, and ``minilm``):

1. first crawl of the synthetic corpus (``corpus.py``, standard profile) into fresh databases, in the
   order off, fresh, hnsw, hnsw, fresh, off (static model): indexing off (the search index replaced
   by one that does nothing); ``fresh`` (the product): chunks, full-text vectors, search_index rows
   and the chunks' vectors written by ingest in its transaction, the vectors fresh (searchable at
   once, compared exactly: gleaner.retrieval.fresh), then the merge into the HNSW index timed after
   the crawl, and pages/s counted with and without it; ``hnsw`` (session 10's ingest): the vectors
   written straight into the HNSW-indexed column inside ingest. Also text_chunks' row writes (an
   UPDATE would re-insert into every index), both models' embedding rates (chunks/s wall and per
   CPU-second, ABBA) and the index's size per 1,000 pages (text_chunks: heap, tsv, vectors, GIN,
   HNSW, and search_index of a fresh crawl after its merge, rewritten);
2. search latency over ``--chunks`` synthetic chunks (random unit-free vectors and word soup, written
   straight into the tables, HNSW built after the load; ``--fresh N`` more of them written fresh,
   outside the HNSW index, as ingest writes them) in one tenant's scope (row-level security
   on): ``search()`` end to end (query embedding included) and the database part alone (time inside
   the driver's execute calls), p50/p95 over ``--queries`` searches, session 9's statement
   (search_baseline.py) and the current one alternated query by query on the same database;
   ``--chunks 0`` skips it;
3. recall@1/@3 of the paraphrase set (tests/integration/paraphrase_site.py) over its loopback site,
   for each model, with its vectors fresh and after the merge;
4. the vector index's upkeep alone: ms and WAL bytes per vector inserted with and without
   pgvector's HNSW index, and ms per vector of a bulk build of the same rows (``vector_index_upkeep``).

The load average is reported at the start, per crawl and at the end: the machine is shared.
Prints one JSON object (``--out`` also writes it). ``--only search --pgdata DIR`` runs part 2 alone on
a data directory that is kept: the first run seeds it and builds the HNSW index (minutes), later runs
reuse it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "shared"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import _WORDS, generate_synthetic  # noqa: E402
from server import testsite_for  # noqa: E402

from gleaner import tenancy  # noqa: E402
from gleaner.app import Deps  # noqa: E402
from gleaner.config import Settings, parse_networks  # noqa: E402
from gleaner.retrieval import index as index_module  # noqa: E402
from gleaner.retrieval import search  # noqa: E402
from gleaner.retrieval.embedder import EmbedModel, default_embedder  # noqa: E402
from gleaner.retrieval.index import embed_pending  # noqa: E402
from gleaner.runner import crawl, new_request  # noqa: E402
from gleaner.store import db  # noqa: E402


class _NoIndex:
    """Indexing off: ingest's call to the search index does nothing."""

    def index_snapshots(self, items: Any) -> int:
        return 0

    def has_vectors(self) -> bool:
        return False


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


def embedding_rates(deps: Deps, sample: int) -> dict[str, Any]:
    """Both models on the crawl's chunks, alternated (ABBA): MiniLM on ``sample`` of them, the static
    model on all (it is too fast to time on a few hundred).

    Wall-clock chunks/s depends on the machine's load; chunks per CPU-second of this process does not
    (much): both are reported, and their ratios compare the two models in this one run.
    """
    from gleaner.retrieval.chunks import embedding_input

    texts = [embedding_input(body, chunk) for _h, body, chunks in deps.search_index.unembedded("none", 10_000)
             for chunk in chunks]
    models = {"static": (default_embedder(EmbedModel.STATIC), texts),
              "minilm": (default_embedder(EmbedModel.MINILM), texts[:sample])}
    for embedder, some in models.values():
        embedder.embed(some[:4])  # warm
    wall: dict[str, float] = dict.fromkeys(models, 0.0)
    cpu: dict[str, float] = dict.fromkeys(models, 0.0)
    for name in ("static", "minilm", "minilm", "static"):
        embedder, some = models[name]
        w0, c0 = time.perf_counter(), time.process_time()
        embedder.embed(some)
        wall[name] += time.perf_counter() - w0
        cpu[name] += time.process_time() - c0
    out: dict[str, Any] = {name: {"chunks": len(some), "chunks_per_s": round(2 * len(some) / wall[name], 1),
                                  "chunks_per_cpu_s": round(2 * len(some) / max(cpu[name], 1e-9), 1)}
                           for name, (_e, some) in models.items()}
    out["static_over_minilm_wall"] = round(out["static"]["chunks_per_s"] / out["minilm"]["chunks_per_s"], 1)
    out["static_over_minilm_cpu"] = round(out["static"]["chunks_per_cpu_s"] / out["minilm"]["chunks_per_cpu_s"], 1)
    return out


def _timed(index: Any) -> list[float]:
    """Wrap ``index.index_snapshots`` (ingest's one call into the search index) to sum its wall time."""
    total = [0.0]
    inner = index.index_snapshots

    def timed(items: Any) -> int:
        started = time.perf_counter()
        try:
            return int(inner(items))
        finally:
            total[0] += time.perf_counter() - started

    index.index_snapshots = timed
    return total


# Session 10's ingest, for comparison in the same run: vectors straight into the HNSW-indexed column.
_INTO_HNSW = sa.text(str(index_module._CHUNKS_EMBEDDED).replace(" fresh_embedding,", " embedding,"))


def _table_writes(deps: Deps) -> dict[str, int]:
    """text_chunks' row writes in this database (an UPDATE re-inserts a row into every index: HNSW too)."""
    with deps.engine.connect() as conn:
        conn.execute(sa.text("SELECT pg_stat_force_next_flush()"))
        row = conn.execute(sa.text("SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
                                   " WHERE schemaname = 'knowledge' AND relname = 'text_chunks'")).one()
    return {"inserted": int(row[0]), "updated": int(row[1]), "hot_updated": int(row[2])}


def first_crawl(server: Any, work: Path, pages: int, embed_max: int) -> dict[str, Any]:
    """Indexing off, on (vectors fresh, merged after the crawl) and session 10's (into the HNSW index
    inside ingest), ABCCBA; the merge timed after each "fresh" crawl."""
    from gleaner.retrieval.fresh import fresh_count, merge_fresh

    (work / "empty").mkdir()
    order = ("index_off", "fresh", "hnsw_inside_ingest", "hnsw_inside_ingest", "fresh", "index_off")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
    kept: dict[str, tuple[Deps, str]] = {}
    default_embedder(EmbedModel.STATIC)  # loading is once per process (the table cached per machine): not timed
    fresh_sql = index_module._CHUNKS_EMBEDDED
    with testsite_for(work / "empty", max_seconds=3600) as site:  # its address first: sitemaps name it
        generate_synthetic(work / "corpus", site.url, pages)
        site.pages.update(testsite_for(work / "corpus").pages)
        for turn, name in enumerate(order):
            deps = _deps(server, f"crawl{turn}", work)
            if name == "index_off":
                deps.__dict__["search_index"] = _NoIndex()
            index_module._CHUNKS_EMBEDDED = _INTO_HNSW if name == "hnsw_inside_ingest" else fresh_sql
            inside = _timed(deps.search_index)
            started = time.perf_counter()
            try:
                summary = crawl(deps, new_request(site.url + "/", site_domain="bench.test"))
            finally:
                index_module._CHUNKS_EMBEDDED = fresh_sql
            seconds = time.perf_counter() - started
            run = {"pages": summary["fetched"], "seconds": round(seconds, 2),
                   "pages_per_s": round(summary["fetched"] / seconds, 2),
                   "seconds_in_index_snapshots": round(inside[0], 2), "load": os.getloadavg()[0]}
            if name == "fresh":  # searchable already; now into the HNSW index, off the crawl's path
                run["fresh_after_crawl"] = fresh_count(deps.engine)
                merge = merge_fresh(deps.engine)
                run.update({"merge_seconds": round(merge.seconds, 2), "merged": merge.merged, "merge_way": merge.way,
                            "pages_per_s_with_merge": round(summary["fetched"] / (seconds + merge.seconds), 2)})
            if name != "index_off":
                run["text_chunks_writes"] = _table_writes(deps)
            runs[name].append(run)
            if name != "index_off" and name not in kept:
                kept[name] = (deps, f"crawl{turn}")
            else:
                deps.close()
    rate = {k: sum(r["pages"] for r in v) / sum(r["seconds"] for r in v) for k, v in runs.items()}
    merge_seconds = sum(r["merge_seconds"] for r in runs["fresh"])
    with_merge = sum(r["pages"] for r in runs["fresh"]) / (sum(r["seconds"] for r in runs["fresh"]) + merge_seconds)
    fresh_deps, fresh_db = kept["fresh"]
    hnsw_deps, _hnsw_db = kept["hnsw_inside_ingest"]
    hnsw_deps.close()
    with fresh_deps.engine.connect() as conn:
        chunks, embedded = conn.execute(sa.text(
            "SELECT count(*), count(embedding) FROM knowledge.text_chunks")).one()
    pages_on = runs["fresh"][0]["pages"]
    rates = embedding_rates(fresh_deps, min(embed_max, chunks))
    owner = _owner(server, fresh_db)
    with owner.connect() as conn:
        conn.execute(sa.text("VACUUM FULL knowledge.text_chunks"))
        conn.execute(sa.text("VACUUM FULL knowledge.search_index"))
    owner.dispose()
    size = _size(fresh_deps, "knowledge.text_chunks", "knowledge.search_index")
    fresh_deps.close()

    def share(name: str) -> float:
        inside = sum(r["seconds_in_index_snapshots"] for r in runs[name])
        return round(inside / sum(r["seconds"] for r in runs[name]), 3)

    return {
        "pages": pages_on, "chunks": chunks, "chunks_in_hnsw_after_merge": embedded,
        "chunks_per_page": round(chunks / max(pages_on, 1), 1), "runs": runs,
        "pages_per_s": {"index_off": round(rate["index_off"], 2),
                        "index_on_fresh": round(rate["fresh"], 2),
                        "index_on_fresh_with_merge": round(with_merge, 2),
                        "index_on_hnsw_inside_ingest": round(rate["hnsw_inside_ingest"], 2)},
        "merge_seconds_per_crawl": round(merge_seconds / len(runs["fresh"]), 2),
        # The target: what indexing (chunks, full text, vectors searchable at once) costs the
        # first crawl's throughput; with the merge counted as if it were part of the crawl; and session 10's.
        "crawl_cost_of_indexing": {
            "fresh": round(1 - rate["fresh"] / rate["index_off"], 3),
            "fresh_with_merge": round(1 - with_merge / rate["index_off"], 3),
            "hnsw_inside_ingest": round(1 - rate["hnsw_inside_ingest"] / rate["index_off"], 3)},
        # The same inside the indexing crawls: the share of their wall time in ingest's call into the index.
        "indexing_share_of_crawl_seconds": {"fresh": share("fresh"),
                                            "hnsw_inside_ingest": share("hnsw_inside_ingest")},
        "embedding": rates,
        "index_bytes_per_1000_pages": int(size / max(pages_on, 1) * 1000),
    }


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
# vectors in fresh_embedding as ingest writes them, compared exactly by search (gleaner.retrieval.fresh).
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
    "INSERT INTO knowledge.text_chunks (text_hash, ordinal, chunk_start, chunk_end, heading, tsv, embedding_model,"
    " embedding_dim, fresh_embedding)"
    " SELECT 'fh' || (i / 20), mod(i, 20), (mod(i, 20)) * 100, (mod(i, 20)) * 100 + 99, '',"
    " to_tsvector('english', (SELECT string_agg((CAST(:words AS text[]))[1 + floor(random() * :nw)::int], ' ')"
    "   FROM generate_series(1, 60) WHERE i >= 0)), :model, 384,"
    " CAST((SELECT array_agg(random() - 0.5) FROM generate_series(1, 384) WHERE i >= 0) AS public.vector)"
    " FROM generate_series(0, :chunks - 1) i",
]
_UNFRESH_SQL = [
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
        conn.execute(sa.text("VACUUM ANALYZE knowledge.text_chunks"))
    owner.dispose()


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
    built = {} if _seeded(server, chunks) else _seed(server, work, chunks)
    settings = Settings(data_dir=work / "big", database_url=server.get_uri(database="big"),
                        allow_networks=parse_networks("127.0.0.0/8"))
    deps = Deps(settings)
    db.upgrade(deps.engine)
    _fresh_set(server, fresh)
    embedder = default_embedder()
    import random

    import search_baseline

    from gleaner.retrieval import ranking

    rng = random.Random(7)
    texts = [" ".join(rng.choice(_WORDS[40:]) for _ in range(rng.randint(3, 8))) for _ in range(queries)]
    baseline = "baseline_session_9"
    statements: dict[str, Any] = {baseline: search_baseline._statement, "current": ranking._statement}
    if fresh:  # what the fresh set costs: the current statement against the same without the fresh part
        baseline = "hnsw_only_0033"
        _hnsw_only_function(server)
        current = ranking._statement
        statements = {baseline: lambda v, visible: sa.text(str(current(v, visible)).replace(
            "knowledge.search_chunk_candidates(", "knowledge.search_chunk_candidates_hnsw_only(")),
            "current": current}
    candidates = dict.fromkeys(statements, ranking.CANDIDATES)
    candidates["baseline_session_9"] = search_baseline.CANDIDATES
    in_db = [0.0]  # time inside the driver's execute calls: the database's part, round trips included

    def before(*_a: Any) -> None:
        in_db[0] -= time.perf_counter()

    def after(*_a: Any) -> None:
        in_db[0] += time.perf_counter()

    def ef_search(conn: Any) -> None:  # session 9 set it in its own statement, before the search's
        if ranking._statement is search_baseline._statement:
            conn.exec_driver_sql("SET LOCAL hnsw.ef_search = 50")

    sa.event.listen(deps.engine, "begin", ef_search)
    sa.event.listen(deps.engine, "before_cursor_execute", before)
    sa.event.listen(deps.engine, "after_cursor_execute", after)
    total: dict[str, list[float]] = {name: [] for name in statements}
    database: dict[str, list[float]] = {name: [] for name in statements}
    embed_only: list[float] = []
    same = 0
    load_start = os.getloadavg()
    # Other queries first, each way: a server that has been up holds the indexes in its caches.
    warm = [" ".join(rng.choice(_WORDS[40:]) for _ in range(rng.randint(3, 8))) for _ in range(20)]
    try:
        with tenancy.scope("big.test"):
            for q in warm:
                for name, statement in statements.items():
                    ranking._statement = statement  # type: ignore[assignment]
                    ranking.CANDIDATES = candidates[name]
                    search(deps, q)
            for n, q in enumerate(texts):
                t0 = time.perf_counter()
                embedder.embed([q])
                embed_only.append(time.perf_counter() - t0)
                answers = {}
                for name in (list(statements) if n % 2 == 0 else list(reversed(statements))):  # alternated
                    ranking._statement = statements[name]  # type: ignore[assignment]
                    ranking.CANDIDATES = candidates[name]
                    in_db[0] = 0.0
                    t0 = time.perf_counter()
                    answer = search(deps, q, limit=10)
                    total[name].append(time.perf_counter() - t0)
                    database[name].append(in_db[0])
                    assert answer["results"], q
                    answers[name] = [(r["text_hash"], r["start"], r["score"]) for r in answer["results"]]
                same += answers["current"] == answers[baseline]
    finally:
        ranking._statement = statements["current"]  # type: ignore[assignment]
        ranking.CANDIDATES = candidates["current"]
    load_end = os.getloadavg()
    size = _size(deps, "knowledge.text_chunks")
    deps.close()
    _fresh_set(server, 0)  # the kept data directory back to its seeded chunks alone

    def pct(samples: list[float], p: float) -> float:
        return round(sorted(samples)[min(len(samples) - 1, int(p * len(samples)))] * 1000, 1)

    def figures(name: str) -> dict[str, Any]:
        return {"search_ms": {"p50": pct(total[name], 0.5), "p95": pct(total[name], 0.95)},
                "database_ms": {"p50": pct(database[name], 0.5), "p95": pct(database[name], 0.95)},
                "mean_ms": round(statistics.mean(total[name]) * 1000, 1)}

    out = {name: figures(name) for name in statements}
    return {"chunks": chunks, "fresh_chunks": fresh, "queries": queries, **built, "text_chunks_bytes": size,
            "load_average_at_start": load_start, "load_average_at_end": load_end,
            **out, "query_embedding_ms": {"p50": pct(embed_only, 0.5), "p95": pct(embed_only, 0.95)},
            "speedup_p50": round(out[baseline]["search_ms"]["p50"] / out["current"]["search_ms"]["p50"], 2),
            "speedup_p95": round(out[baseline]["search_ms"]["p95"] / out["current"]["search_ms"]["p95"], 2),
            "baseline": baseline, "queries_with_identical_answers": same}


def paraphrase_recall(server: Any, work: Path, model: str) -> dict[str, Any]:
    """recall@1/@3 with the site's vectors fresh (just crawled: compared exactly), then after the merge
    (in the HNSW index)."""
    from tests.integration.paraphrase_site import QUESTIONS, recall, topic_pages

    from gleaner.retrieval.fresh import merge_fresh
    from gleaner.testsite import TestSite

    deps = _deps(server, f"topics_{model}", work, model=model)
    out: dict[str, Any] = {}
    with TestSite(topic_pages(), max_seconds=600) as site:
        crawl(deps, new_request(site.url + "/", site_domain="topics.test"))
        embed_pending(deps.search_index, deps.embedder)
        for when in ("fresh", "merged"):
            if when == "merged":
                merge_fresh(deps.engine)
            ranked = {q: [r["url"] for r in search(deps, q, site_domain="topics.test", limit=3)["results"]]
                      for q in QUESTIONS}
            out[when] = recall(ranked, site.url)
    deps.close()
    return {**out["merged"], "before_the_merge": out["fresh"]}


def vector_index_upkeep(server: Any, rows: int = 2000) -> dict[str, Any]:
    """What pgvector's HNSW index (m = 16, ef_construction = 64, 384 dimensions) costs per vector, apart
    from everything else: ``rows`` random unit-free vectors inserted 20 a transaction (a page's chunks)
    into a table without the index and with it, with the WAL each writes; and the same rows indexed
    by one bulk build (CREATE INDEX, what a merge's rebuild does)."""
    import numpy as np

    rng = np.random.default_rng(7)
    sa_url, connect_args = db._pg8000_url(server.get_uri())
    admin = sa.create_engine(sa_url, connect_args=connect_args, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text("CREATE DATABASE upkeep"))
    admin.dispose()
    engine = _owner(server, "upkeep")
    out: dict[str, Any] = {"rows": rows, "rows_per_transaction": 20}
    with engine.connect() as conn:
        conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
        out["pgvector"] = conn.execute(sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
    graph = "USING hnsw (e public.vector_cosine_ops) WITH (m = 16, ef_construction = 64)"  # migration 0020's
    vectors = rng.standard_normal((rows, 384)).astype(np.float32)
    for name, indexed in (("plain_384", False), ("hnsw_384", True)):
        with engine.connect() as conn:
            conn.execute(sa.text(f"CREATE TABLE {name} (id int PRIMARY KEY, e public.vector(384))"))
            if indexed:
                conn.execute(sa.text(f"CREATE INDEX ON {name} {graph}"))
            wal0 = conn.execute(sa.text("SELECT pg_current_wal_lsn()")).scalar()
        started = time.perf_counter()
        for at in range(0, rows, 20):
            payload = json.dumps([{"i": at + i, "v": "[" + ",".join(f"{x:.6f}" for x in vectors[at + i]) + "]"}
                                  for i in range(min(20, rows - at))])
            with engine.begin() as conn:
                conn.execute(sa.text(f"INSERT INTO {name} SELECT (r->>'i')::int, CAST(r->>'v' AS public.vector)"
                                     " FROM json_array_elements(CAST(:j AS json)) r"), {"j": payload})
        out[f"{name}_ms_per_row"] = round((time.perf_counter() - started) / rows * 1000, 2)
        with engine.connect() as conn:
            wal = conn.execute(sa.text("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), :a)"), {"a": wal0}).scalar()
        out[f"{name}_wal_bytes_per_row"] = int(float(wal) / rows)
    with engine.connect() as conn:  # the same rows, indexed in one build (in memory: maintenance_work_mem)
        conn.execute(sa.text("SET maintenance_work_mem = '256MB'"))
        started = time.perf_counter()
        conn.execute(sa.text(f"CREATE INDEX ON plain_384 {graph}"))
        out["hnsw_384_bulk_build_ms_per_row"] = round((time.perf_counter() - started) / rows * 1000, 2)
    out["insert_over_bulk_build"] = round(out["hnsw_384_ms_per_row"] / out["hnsw_384_bulk_build_ms_per_row"], 1)
    out["load"] = os.getloadavg()[0]
    engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200, help="synthetic pages crawled (each way)")
    parser.add_argument("--embed-max", type=int, default=200, help="chunks MiniLM embeds to measure its rate")
    parser.add_argument("--chunks", type=int, default=100_000, help="synthetic chunks searched (0: skip)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--fresh", type=int, default=0, help="fresh chunks (not in the HNSW index yet) beside"
                        " the --chunks searched")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", choices=("all", "search"), default="all", help="search: latency part only")
    parser.add_argument("--pgdata", type=Path, help="a kept data directory: the search database is seeded"
                        " and indexed once there, later runs reuse it")
    args = parser.parse_args()
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), tenancy.all_tenants():
        warnings.simplefilter("ignore")
        import pgserver

        report["load_average_at_start"] = os.getloadavg()
        work = Path(tmp)
        server = pgserver.get_server(args.pgdata or work / "pg", cleanup_mode="stop")
        try:
            if args.only == "all":
                report["recall"] = {model: paraphrase_recall(server, work, model) for model in ("static", "minilm")}
                print(json.dumps({"recall": report["recall"]}), file=sys.stderr)
                report["first_crawl"] = first_crawl(server, work, args.pages, args.embed_max)
                print(json.dumps({"first_crawl": report["first_crawl"]}), file=sys.stderr)
                report["vector_index_upkeep"] = vector_index_upkeep(server)
                print(json.dumps({"vector_index_upkeep": report["vector_index_upkeep"]}), file=sys.stderr)
            if args.chunks:
                report["search"] = search_latency(server, work, args.chunks, args.queries, args.fresh)
        finally:
            server.cleanup()
        report["load_average_at_end"] = os.getloadavg()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
