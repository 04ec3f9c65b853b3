"""What retrieval costs and how well it finds: ``python infra/bench/retrieval.py [--pages N] [--chunks N]``.

One run, side by side, on one embedded PostgreSQL (pgserver, with pgvector), both embedding models
(GLEANER_EMBED_MODEL: ``static``, the default, and ``minilm``):

1. first crawl of the synthetic corpus (``corpus.py``, standard profile) into fresh databases, in the
   order off, static, minilm, minilm, static, off: indexing off (the search index replaced by one
   that does nothing); ``static``: chunks, full-text vectors, search_index rows and the chunks'
   vectors written by ingest in its transaction, so the crawl's pages/s counts embedding; ``minilm``:
   the same without vectors (the transformer embeds after the run), its embedding time added from
   its measured rate (chunks / chunks-per-second) to give pages/s of crawl plus embedding. The static
   model after the crawl instead of inside it (``embed_pending`` over the minilm crawl's chunks) is
   timed too: inline vs after. Embedding rates: chunks/s (wall) and chunks per CPU-second of both
   models on the crawl's chunks, alternated (ABBA). The index's size per 1,000 pages counts
   text_chunks (heap, tsv, vectors, GIN, HNSW) and search_index of the static crawl (fully embedded),
   rewritten;
2. search latency over ``--chunks`` synthetic chunks (random unit-free vectors and word soup, written
   straight into the tables, HNSW built after the load) in one tenant's scope (row-level security
   on): ``search()`` end to end (query embedding included) and the database part alone (time inside
   the driver's execute calls), p50/p95 over ``--queries`` searches, session 9's statement
   (search_baseline.py) and the current one alternated query by query on the same database;
   ``--chunks 0`` skips it;
3. recall@1/@3 of the paraphrase set (tests/integration/paraphrase_site.py) over its loopback site,
   for each model;
4. the vector index's upkeep alone: ms per vector inserted with and without pgvector's HNSW index,
   at 384 and 128 dimensions (``vector_index_upkeep``).

The load average is reported at the start, per crawl and at the end: the machine is shared.
Prints one JSON object (``--out`` also writes it). ``--only search --pgdata DIR`` runs part 2 alone on
a data directory that is kept: the first run seeds it and builds the HNSW index (minutes), later runs
reuse it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
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


class EmbeddingAlongside:
    """The alternative measured against embedding inside ingest: ingest writes chunks without vectors
    and a thread embeds the committed ones in rounds while the crawl goes on, the rest when it ends."""

    def __init__(self, index: Any, embedder: Any) -> None:
        self._index, self._embedder = index, embedder
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not embed_pending(self._index, self._embedder, max_chunks=256):
                self._stop.wait(0.5)

    def __enter__(self) -> EmbeddingAlongside:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        embed_pending(self._index, self._embedder)


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


def first_crawl(server: Any, work: Path, pages: int, embed_max: int) -> dict[str, Any]:
    """Indexing off, static (embedding inside ingest) and minilm (embedding after), ABCCBA."""
    (work / "empty").mkdir()
    order = ("index_off", "index_on_static", "index_on_static_alongside", "index_on_minilm",
             "index_on_minilm", "index_on_static_alongside", "index_on_static", "index_off")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
    kept: dict[str, tuple[Deps, str]] = {}
    default_embedder(EmbedModel.STATIC)  # loading is once per process (the table cached per machine): not timed
    with testsite_for(work / "empty", max_seconds=3600) as site:  # its address first: sitemaps name it
        generate_synthetic(work / "corpus", site.url, pages)
        site.pages.update(testsite_for(work / "corpus").pages)
        for turn, name in enumerate(order):
            deps = _deps(server, f"crawl{turn}", work, model="minilm" if name == "index_on_minilm" else "static")
            if name == "index_off":
                deps.__dict__["search_index"] = _NoIndex()
            alongside: Any = contextlib.nullcontext()
            if name == "index_on_static_alongside":  # ingest writes no vectors; a thread embeds beside the crawl
                deps.search_index._inline_embedder = lambda: None
                alongside = EmbeddingAlongside(deps.search_index, deps.embedder)
            inside = _timed(deps.search_index)
            started = time.perf_counter()
            with alongside:
                summary = crawl(deps, new_request(site.url + "/", site_domain="bench.test"))
            seconds = time.perf_counter() - started
            runs[name].append({"pages": summary["fetched"], "seconds": round(seconds, 2),
                               "pages_per_s": round(summary["fetched"] / seconds, 2),
                               "seconds_in_index_snapshots": round(inside[0], 2), "load": os.getloadavg()[0]})
            if name != "index_off" and name not in kept:
                kept[name] = (deps, f"crawl{turn}")
            else:
                deps.close()
    rate = {k: sum(r["pages"] for r in v) / sum(r["seconds"] for r in v) for k, v in runs.items()}
    static_deps, static_db = kept["index_on_static"]
    minilm_deps, _minilm_db = kept["index_on_minilm"]
    with static_deps.engine.connect() as conn:
        chunks, embedded = conn.execute(sa.text(
            "SELECT count(*), count(embedding) FROM knowledge.text_chunks")).one()
    pages_on = runs["index_on_static"][0]["pages"]
    rates = embedding_rates(minilm_deps, min(embed_max, chunks))
    # The static model after the crawl instead of inside it: the same chunks, embedded by embed_pending.
    started, cpu0 = time.perf_counter(), time.process_time()
    after = embed_pending(minilm_deps.search_index, default_embedder(EmbedModel.STATIC))
    after_seconds, after_cpu = time.perf_counter() - started, time.process_time() - cpu0
    minilm_deps.close()
    owner = _owner(server, static_db)
    with owner.connect() as conn:
        conn.execute(sa.text("VACUUM FULL knowledge.text_chunks"))
        conn.execute(sa.text("VACUUM FULL knowledge.search_index"))
    owner.dispose()
    size = _size(static_deps, "knowledge.text_chunks", "knowledge.search_index")
    static_deps.close()
    minilm_embed_seconds = chunks / rates["minilm"]["chunks_per_s"]
    minilm_crawl_seconds = pages_on / rate["index_on_minilm"]
    minilm_total = pages_on / (minilm_crawl_seconds + minilm_embed_seconds)
    static_after_total = pages_on / (pages_on / rate["index_on_minilm"] + after_seconds)

    def share(name: str) -> float:
        inside = sum(r["seconds_in_index_snapshots"] for r in runs[name])
        return round(inside / sum(r["seconds"] for r in runs[name]), 3)

    return {
        "pages": pages_on, "chunks": chunks, "chunks_embedded_by_the_static_crawl": embedded,
        "chunks_per_page": round(chunks / max(pages_on, 1), 1), "runs": runs,
        "pages_per_s": {"index_off": round(rate["index_off"], 2),
                        "static_embedding_inside_ingest": round(rate["index_on_static"], 2),
                        "static_embedding_alongside_the_crawl": round(rate["index_on_static_alongside"], 2),
                        "minilm_crawl_only": round(rate["index_on_minilm"], 2),
                        "minilm_crawl_then_embedding": round(minilm_total, 3),
                        "static_crawl_then_embed_pending": round(static_after_total, 2)},
        # The target: what indexing, embedding included, costs the first crawl's throughput.
        "crawl_cost_of_indexing": {
            "static": round(1 - rate["index_on_static"] / rate["index_off"], 3),
            "static_alongside": round(1 - rate["index_on_static_alongside"] / rate["index_off"], 3),
            "minilm": round(1 - minilm_total / rate["index_off"], 3),
            "minilm_without_embedding": round(1 - rate["index_on_minilm"] / rate["index_off"], 3)},
        # The same cost inside the indexing crawls: the share of their wall time spent in ingest's call
        # into the search index (less exposed to the load's swings between crawls).
        "indexing_share_of_crawl_seconds": {"static": share("index_on_static"), "minilm": share("index_on_minilm")},
        "embedding": {**rates, "minilm_seconds_whole_crawl": round(minilm_embed_seconds, 1),
                      "static_embed_pending_after_crawl": {"chunks": after, "seconds": round(after_seconds, 2),
                                                           "cpu_seconds": round(after_cpu, 2)}},
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
        have = conn.execute(sa.text("SELECT count(*) FROM knowledge.text_chunks")).scalar_one()
        indexed = conn.execute(sa.text("SELECT 1 FROM pg_indexes WHERE indexname = 'text_chunks_embedding'")).first()
        models = conn.execute(sa.text("SELECT DISTINCT embedding_model FROM knowledge.text_chunks")).scalars().all()
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


def search_latency(server: Any, work: Path, chunks: int, queries: int) -> dict[str, Any]:
    built = {} if _seeded(server, chunks) else _seed(server, work, chunks)
    settings = Settings(data_dir=work / "big", database_url=server.get_uri(database="big"),
                        allow_networks=parse_networks("127.0.0.0/8"))
    deps = Deps(settings)
    db.upgrade(deps.engine)
    embedder = default_embedder()
    import random

    import search_baseline

    from gleaner.retrieval import ranking

    rng = random.Random(7)
    texts = [" ".join(rng.choice(_WORDS[40:]) for _ in range(rng.randint(3, 8))) for _ in range(queries)]
    statements = {"baseline_session_9": search_baseline._statement, "current": ranking._statement}
    candidates = {"baseline_session_9": search_baseline.CANDIDATES, "current": ranking.CANDIDATES}
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
                same += answers["current"] == answers["baseline_session_9"]
    finally:
        ranking._statement = statements["current"]  # type: ignore[assignment]
        ranking.CANDIDATES = candidates["current"]
    load_end = os.getloadavg()
    size = _size(deps, "knowledge.text_chunks")
    deps.close()

    def pct(samples: list[float], p: float) -> float:
        return round(sorted(samples)[min(len(samples) - 1, int(p * len(samples)))] * 1000, 1)

    def figures(name: str) -> dict[str, Any]:
        return {"search_ms": {"p50": pct(total[name], 0.5), "p95": pct(total[name], 0.95)},
                "database_ms": {"p50": pct(database[name], 0.5), "p95": pct(database[name], 0.95)},
                "mean_ms": round(statistics.mean(total[name]) * 1000, 1)}

    out = {name: figures(name) for name in statements}
    return {"chunks": chunks, "queries": queries, **built, "text_chunks_bytes": size,
            "load_average_at_start": load_start, "load_average_at_end": load_end,
            **out, "query_embedding_ms": {"p50": pct(embed_only, 0.5), "p95": pct(embed_only, 0.95)},
            "speedup_p50": round(out["baseline_session_9"]["search_ms"]["p50"] / out["current"]["search_ms"]["p50"], 2),
            "speedup_p95": round(out["baseline_session_9"]["search_ms"]["p95"] / out["current"]["search_ms"]["p95"], 2),
            "queries_with_identical_answers": same}


def paraphrase_recall(server: Any, work: Path, model: str) -> dict[str, Any]:
    from tests.integration.paraphrase_site import QUESTIONS, recall, topic_pages

    from gleaner.testsite import TestSite

    deps = _deps(server, f"topics_{model}", work, model=model)
    with TestSite(topic_pages(), max_seconds=600) as site:
        crawl(deps, new_request(site.url + "/", site_domain="topics.test"))
        embed_pending(deps.search_index, deps.embedder)
        ranked = {q: [r["url"] for r in search(deps, q, site_domain="topics.test", limit=3)["results"]]
                  for q in QUESTIONS}
    deps.close()
    return recall(ranked, site.url)


def vector_index_upkeep(server: Any, rows: int = 2000) -> dict[str, Any]:
    """What pgvector's HNSW index (m = 16, ef_construction = 64) costs per inserted vector, apart from
    everything else: ``rows`` random unit-free vectors, 20 a transaction (a page's chunks), into a
    table without the index and with it, at 384 dimensions (the column's) and at 128, and with a
    cheaper graph (m = 8, ef_construction = 32)."""
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
    # The index's parameters as migration 0020 sets them, and a cheaper graph for comparison.
    spec, cheap = "m = 16, ef_construction = 64", "m = 8, ef_construction = 32"
    for name, dim, graph in (("plain_384", 384, None), ("hnsw_384", 384, spec), ("hnsw_128", 128, spec),
                             ("hnsw_384_m8_ef32", 384, cheap)):
        vectors = rng.standard_normal((rows, dim)).astype(np.float32)
        with engine.connect() as conn:
            conn.execute(sa.text(f"CREATE TABLE {name} (id int PRIMARY KEY, e public.vector({dim}))"))
            if graph:
                conn.execute(sa.text(f"CREATE INDEX ON {name} USING hnsw (e public.vector_cosine_ops) WITH ({graph})"))
        started = time.perf_counter()
        for at in range(0, rows, 20):
            payload = json.dumps([{"i": at + i, "v": "[" + ",".join(f"{x:.6f}" for x in vectors[at + i]) + "]"}
                                  for i in range(min(20, rows - at))])
            with engine.begin() as conn:
                conn.execute(sa.text(f"INSERT INTO {name} SELECT (r->>'i')::int, CAST(r->>'v' AS public.vector)"
                                     " FROM json_array_elements(CAST(:j AS json)) r"), {"j": payload})
        out[f"{name}_ms_per_row"] = round((time.perf_counter() - started) / rows * 1000, 2)
    out["load"] = os.getloadavg()[0]
    engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200, help="synthetic pages crawled (each way)")
    parser.add_argument("--embed-max", type=int, default=200, help="chunks MiniLM embeds to measure its rate")
    parser.add_argument("--chunks", type=int, default=100_000, help="synthetic chunks searched (0: skip)")
    parser.add_argument("--queries", type=int, default=100)
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
                report["search"] = search_latency(server, work, args.chunks, args.queries)
        finally:
            server.cleanup()
        report["load_average_at_end"] = os.getloadavg()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
