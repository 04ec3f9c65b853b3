"""What retrieval costs and how well it finds: ``python infra/bench/retrieval.py [--pages N] [--chunks N]``.

One run, side by side, on one embedded PostgreSQL (pgserver, with pgvector):

1. first crawl of the synthetic corpus (``corpus.py``, standard profile) into fresh databases, indexing
   off (the search index replaced by one that does nothing) and on (chunks, full-text vectors and
   search_index rows written by ingest, in its transaction), in the order off, on, on, off; pages/s
   of each. Embedding is not in the crawl: it runs after the run (CLI) over the new chunks, which
   search finds by full text until then. It is measured on the crawl's chunks: chunks/s (wall) and
   chunks per CPU-second, session 8's batching against the current one (alternated, one run), the
   time the whole crawl's embedding takes at that rate, and pages/s counting crawl plus embedding.
   The index's size per 1,000 pages counts text_chunks (heap, tsv, vectors, GIN, HNSW) and
   search_index, fully embedded (chunks not in the measured sample get random vectors), rewritten;
2. search latency over ``--chunks`` synthetic chunks (random unit-free vectors and word soup, written
   straight into the tables, HNSW built after the load) in one tenant's scope (row-level security
   on): ``search()`` end to end (query embedding included) and the database part alone (time inside
   the driver's execute calls), p50/p95 over ``--queries`` searches, session 9's statement
   (search_baseline.py) and the current one alternated query by query on the same database;
3. recall@1/@3 of the paraphrase set (tests/integration/paraphrase_site.py) over its loopback site.

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
from gleaner.retrieval import search  # noqa: E402
from gleaner.retrieval.embedder import default_embedder  # noqa: E402
from gleaner.retrieval.index import embed_pending  # noqa: E402
from gleaner.runner import crawl, new_request  # noqa: E402
from gleaner.store import db  # noqa: E402


class _NoIndex:
    """Indexing off: ingest's call to the search index does nothing."""

    def index_snapshots(self, items: Any) -> int:
        return 0

    def has_vectors(self) -> bool:
        return False


def _deps(server: Any, name: str, work: Path) -> Deps:
    sa_url, connect_args = db._pg8000_url(server.get_uri())
    admin = sa.create_engine(sa_url, connect_args=connect_args, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    admin.dispose()
    settings = Settings(data_dir=work / name, database_url=server.get_uri(database=name),
                        allow_networks=parse_networks("127.0.0.0/8"), host_delay=0.0, host_concurrency=8)
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
    """Session 8's batches of 32 against the current batching on the same chunks, alternated (ABBA).

    Wall-clock chunks/s depends on the machine's load; chunks per CPU-second of this process does not
    (much): both are reported, and the ratio of each compares the two in this one run.
    """
    from gleaner.retrieval.chunks import embedding_input
    from gleaner.retrieval.embedder import OnnxMiniLM, packaged_files

    texts = [embedding_input(body, chunk) for _h, body, chunks in deps.search_index.unembedded("none", 64)
             for chunk in chunks][:sample]
    variants = {"batch_32_session_8": OnnxMiniLM(*packaged_files(), batch=32), "current": default_embedder()}
    for embedder in variants.values():
        embedder.embed(texts[:4])  # warm
    wall: dict[str, float] = dict.fromkeys(variants, 0.0)
    cpu: dict[str, float] = dict.fromkeys(variants, 0.0)
    for name in ("current", "batch_32_session_8", "batch_32_session_8", "current"):
        w0, c0 = time.perf_counter(), time.process_time()
        variants[name].embed(texts)
        wall[name] += time.perf_counter() - w0
        cpu[name] += time.process_time() - c0
    n = 2 * len(texts)
    out: dict[str, Any] = {name: {"chunks_per_s": round(n / wall[name], 2), "chunks_per_cpu_s": round(n / cpu[name], 2)}
                           for name in variants}
    out["chunks"] = len(texts)
    out["speedup_wall"] = round(wall["batch_32_session_8"] / wall["current"], 2)
    out["speedup_cpu"] = round(cpu["batch_32_session_8"] / cpu["current"], 2)
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
    """Indexing off and on, crawled in the order off, on, on, off (drift in the load cancels out)."""
    (work / "empty").mkdir()
    runs: dict[str, list[dict[str, Any]]] = {"index_off": [], "index_on": []}
    kept: Deps | None = None
    kept_name = ""
    with testsite_for(work / "empty", max_seconds=3600) as site:  # its address first: sitemaps name it
        generate_synthetic(work / "corpus", site.url, pages)
        site.pages.update(testsite_for(work / "corpus").pages)
        for turn, name in enumerate(("index_off", "index_on", "index_on", "index_off")):
            deps = _deps(server, f"crawl{turn}", work)
            if name == "index_off":
                deps.__dict__["search_index"] = _NoIndex()
            inside = _timed(deps.search_index)
            started = time.perf_counter()
            summary = crawl(deps, new_request(site.url + "/", site_domain="bench.test"))
            seconds = time.perf_counter() - started
            runs[name].append({"pages": summary["fetched"], "seconds": round(seconds, 2),
                               "pages_per_s": round(summary["fetched"] / seconds, 2),
                               "seconds_in_index_snapshots": round(inside[0], 2), "load": os.getloadavg()[0]})
            if name == "index_on" and kept is None:
                kept, kept_name = deps, f"crawl{turn}"
            else:
                deps.close()
    assert kept is not None
    deps = kept
    rate = {k: sum(r["pages"] for r in v) / sum(r["seconds"] for r in v) for k, v in runs.items()}
    with deps.engine.connect() as conn:
        chunks = int(conn.execute(sa.text("SELECT count(*) FROM knowledge.text_chunks")).scalar_one())
    pages_on = runs["index_on"][0]["pages"]
    default_embedder()  # loading is once per process: not part of the rate
    compared = embedding_rates(deps, min(embed_max, chunks))
    started, cpu0 = time.perf_counter(), time.process_time()
    embedded = embed_pending(deps.search_index, deps.embedder, max_chunks=embed_max)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu0
    # The index's size as a fully embedded index: the rest of the chunks get random unit-free vectors
    # (same size as real ones), then the tables are rewritten so dead row versions do not count.
    owner = _owner(server, kept_name)
    with owner.connect() as conn:
        conn.execute(sa.text("UPDATE knowledge.text_chunks SET embedding_model = 'bench-filler', embedding_dim = 384,"
                             " embedding = CAST((SELECT array_agg(random() - 0.5) FROM generate_series(1, 384)"
                             " WHERE ordinal >= 0) AS public.vector) WHERE embedding IS NULL"))
        conn.execute(sa.text("VACUUM FULL knowledge.text_chunks"))
        conn.execute(sa.text("VACUUM FULL knowledge.search_index"))
    owner.dispose()
    size = _size(deps, "knowledge.text_chunks", "knowledge.search_index")
    deps.close()
    chunks_per_s = embedded / seconds if embedded else None
    embed_seconds = chunks / chunks_per_s if chunks_per_s else None
    crawl_seconds = pages_on / rate["index_on"]
    return {
        "pages": pages_on, "chunks": chunks, "chunks_per_page": round(chunks / max(pages_on, 1), 1),
        "runs": runs,
        "pages_per_s_index_off": round(rate["index_off"], 2), "pages_per_s_index_on": round(rate["index_on"], 2),
        "crawl_cost_of_indexing": round(1 - rate["index_on"] / rate["index_off"], 3),
        # The same cost measured inside the indexing crawls: the share of their wall time spent in
        # ingest's call into the search index (less exposed to the load's swings between crawls).
        "indexing_share_of_crawl_seconds": round(sum(r["seconds_in_index_snapshots"] for r in runs["index_on"])
                                                 / sum(r["seconds"] for r in runs["index_on"]), 3),
        "embedding": {"chunks": embedded, "chunks_per_s": round(chunks_per_s, 2) if chunks_per_s else None,
                      "chunks_per_cpu_s": round(embedded / cpu, 2) if embedded and cpu else None,
                      "batching_compared": compared},
        "embedding_seconds_whole_crawl": round(embed_seconds, 1) if embed_seconds else None,
        "pages_per_s_crawl_then_embedding": round(pages_on / (crawl_seconds + embed_seconds), 3)
        if embed_seconds else None,
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
    owner.dispose()
    if have != chunks or indexed is None:
        raise SystemExit(f"database big holds {have} chunks (HNSW: {indexed is not None}), not {chunks}: "
                         "use another --pgdata")
    return True


def _seed(server: Any, work: Path, chunks: int) -> dict[str, float]:
    deps = _deps(server, "big", work)
    deps.close()
    embedder = default_embedder()
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


def paraphrase_recall(server: Any, work: Path) -> dict[str, Any]:
    from tests.integration.paraphrase_site import QUESTIONS, recall, topic_pages

    from gleaner.testsite import TestSite

    deps = _deps(server, "topics", work)
    with TestSite(topic_pages(), max_seconds=600) as site:
        crawl(deps, new_request(site.url + "/", site_domain="topics.test"))
        embed_pending(deps.search_index, deps.embedder)
        ranked = {q: [r["url"] for r in search(deps, q, site_domain="topics.test", limit=3)["results"]]
                  for q in QUESTIONS}
    deps.close()
    return recall(ranked, site.url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200, help="synthetic pages crawled (each way)")
    parser.add_argument("--embed-max", type=int, default=400, help="chunks embedded to measure the rate")
    parser.add_argument("--chunks", type=int, default=100_000, help="synthetic chunks searched")
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
                report["recall"] = paraphrase_recall(server, work)
                print(json.dumps({"recall": report["recall"]}), file=sys.stderr)
                report["first_crawl"] = first_crawl(server, work, args.pages, args.embed_max)
                print(json.dumps({"first_crawl": report["first_crawl"]}), file=sys.stderr)
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
