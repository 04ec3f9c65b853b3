"""What retrieval costs and how well it finds: ``python infra/bench/retrieval.py [--pages N] [--chunks N]``.

One run, side by side, on one embedded PostgreSQL (pgserver, with pgvector), both embedding models
(GLEANER_EMBED_MODEL: ``static``, the default, and ``minilm``):

1. first crawl of the synthetic corpus (``corpus.py``, standard profile) into fresh databases, in the
   order off, fresh, hnsw, hnsw, fresh, off (static model): indexing off (the search index replaced
   by one that does nothing); ``fresh`` (the product): chunks, full-text vectors, search_index rows
   and the chunks' vectors written by ingest in its transaction, the vectors fresh (searchable at
   once, compared exactly: gleaner.retrieval.fresh), then the merge into the HNSW index timed after
   the crawl, and pages/s counted with and without it; ``fresh_text_vectors``: the same with the
   vectors as text literals in the insert's JSON (before binary COPY: retrieval_textpath.py);
   ``fresh_beside_extraction`` (``--no-beside`` leaves it out); ``hnsw`` (session 10's ingest): the vectors
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

The load average is reported at the start, per crawl and at the end: the machine is shared. Each
crawl's CPU is counted in its main process and in the PostgreSQL server's processes.
Part 2 is in ``retrieval_search.py``. Prints one JSON object (``--out`` also writes it).
``--only search --pgdata DIR`` runs part 2 alone on
a data directory that is kept: the first run seeds it and builds the HNSW index (minutes), later runs
reuse it.
"""

from __future__ import annotations

import argparse
import json
import os
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

from corpus import generate_synthetic  # noqa: E402
from retrieval_search import _deps, _owner, _size, search_latency  # noqa: E402
from retrieval_textpath import postgres_cpu_seconds, text_vectors  # noqa: E402
from server import testsite_for  # noqa: E402

from gleaner import tenancy  # noqa: E402
from gleaner.app import Deps  # noqa: E402
from gleaner.retrieval import index as index_module  # noqa: E402
from gleaner.retrieval import search  # noqa: E402
from gleaner.retrieval.embedder import EmbedModel, default_embedder  # noqa: E402
from gleaner.retrieval.index import embed_pending  # noqa: E402
from gleaner.runtime.runner import crawl, new_request  # noqa: E402
from gleaner.store.backends import db  # noqa: E402


class _NoIndex:
    """Indexing off: ingest's call to the search index does nothing."""

    def index_snapshots(self, items: Any) -> int:
        return 0

    def has_vectors(self) -> bool:
        return False


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


def first_crawl(server: Any, work: Path, pages: int, embed_max: int, rounds: int = 1,
                hnsw: bool = True, beside: bool = True) -> dict[str, Any]:
    """Indexing off, on (vectors fresh, merged after the crawl) and session 10's (into the HNSW index
    inside ingest), ABCCBA; the merge timed after each "fresh" crawl."""
    from gleaner.retrieval.fresh import fresh_count, merge_fresh

    (work / "empty").mkdir()
    # fresh_text_vectors: ingest in-process with the vectors as text literals (before binary COPY).
    one = ("index_off", "fresh", "fresh_text_vectors", *(("fresh_beside_extraction",) if beside else ()),
           *(("hnsw_inside_ingest",) if hnsw else ()))
    order = (*one, *reversed(one)) * rounds
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
            elif name == "fresh_beside_extraction":  # GLEANER_EMBED_BESIDE_EXTRACTION (before anything is built)
                deps.settings = deps.settings.with_(embed_beside_extraction=True)
            index_module._CHUNKS_EMBEDDED = _INTO_HNSW if name == "hnsw_inside_ingest" else fresh_sql
            inside = _timed(deps.search_index)
            started, cpu, pg_cpu = time.perf_counter(), time.process_time(), postgres_cpu_seconds(server.pgdata)
            try:
                if name == "fresh_text_vectors":
                    with text_vectors():
                        summary = crawl(deps, new_request(site.url + "/", site_domain="bench.test"))
                else:
                    summary = crawl(deps, new_request(site.url + "/", site_domain="bench.test"))
            finally:
                index_module._CHUNKS_EMBEDDED = fresh_sql
            seconds = time.perf_counter() - started
            cpu = time.process_time() - cpu  # the crawl's main process (one interpreter lock): less load-bound
            pg_cpu = postgres_cpu_seconds(server.pgdata) - pg_cpu  # every server process, the crawl's sessions'
            run = {"pages": summary["fetched"], "seconds": round(seconds, 2),
                   "pages_per_s": round(summary["fetched"] / seconds, 2),
                   "seconds_in_index_snapshots": round(inside[0], 2), "main_process_cpu_s": round(cpu, 2),
                   "postgres_cpu_s": round(pg_cpu, 2),
                   "load": os.getloadavg()[0]}
            if name == "fresh":  # searchable already; now into the HNSW index, off the crawl's path
                run["fresh_after_crawl"] = fresh_count(deps.engine)
                merge = merge_fresh(deps.engine)
                run.update({"merge_seconds": round(merge.seconds, 2), "merged": merge.merged, "merge_way": merge.way,
                            "pages_per_s_with_merge": round(summary["fetched"] / (seconds + merge.seconds), 2)})
            if name != "index_off":
                run["text_chunks_writes"] = _table_writes(deps)
                run["texts_sent_to_extraction_processes"] = getattr(deps.search_index._preparer, "sent", 0)
            runs[name].append(run)
            if name != "index_off" and name not in kept:
                kept[name] = (deps, f"crawl{turn}")
            else:
                deps.close()
    rate = {k: sum(r["pages"] for r in v) / sum(r["seconds"] for r in v) for k, v in runs.items()}
    merge_seconds = sum(r["merge_seconds"] for r in runs["fresh"])
    with_merge = sum(r["pages"] for r in runs["fresh"]) / (sum(r["seconds"] for r in runs["fresh"]) + merge_seconds)
    fresh_deps, fresh_db = kept["fresh"]
    for name in ("hnsw_inside_ingest", "fresh_beside_extraction", "fresh_text_vectors"):
        if name in kept:
            kept[name][0].close()
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

    def cpu_per_page(name: str, key: str = "main_process_cpu_s") -> float:
        return sum(r[key] for r in runs[name]) / sum(r["pages"] for r in runs[name])

    indexing = [name for name in one if name != "index_off"]

    def share(name: str) -> float:
        inside = sum(r["seconds_in_index_snapshots"] for r in runs[name])
        return round(inside / sum(r["seconds"] for r in runs[name]), 3)

    return {
        "pages": pages_on, "chunks": chunks, "chunks_in_hnsw_after_merge": embedded,
        "chunks_per_page": round(chunks / max(pages_on, 1), 1), "runs": runs,
        "pages_per_s": {"index_off": round(rate["index_off"], 2),
                        "index_on_fresh": round(rate["fresh"], 2),
                        "index_on_fresh_text_vectors": round(rate["fresh_text_vectors"], 2),
                        **({"index_on_fresh_beside_extraction": round(rate["fresh_beside_extraction"], 2)}
                           if beside else {}),
                        "index_on_fresh_with_merge": round(with_merge, 2),
                        **({"index_on_hnsw_inside_ingest": round(rate["hnsw_inside_ingest"], 2)} if hnsw else {})},
        "merge_seconds_per_crawl": round(merge_seconds / len(runs["fresh"]), 2),
        # The target: what indexing (chunks, full text, vectors searchable at once) costs the
        # first crawl's throughput; with the merge counted as if it were part of the crawl; and session 10's.
        "crawl_cost_of_indexing": {
            "fresh": round(1 - rate["fresh"] / rate["index_off"], 3),
            "fresh_with_merge": round(1 - with_merge / rate["index_off"], 3),
            "fresh_text_vectors": round(1 - rate["fresh_text_vectors"] / rate["index_off"], 3),
            **({"fresh_beside_extraction": round(1 - rate["fresh_beside_extraction"] / rate["index_off"], 3)}
               if beside else {}),
            **({"hnsw_inside_ingest": round(1 - rate["hnsw_inside_ingest"] / rate["index_off"], 3)} if hnsw else {})},
        # What indexing adds to the crawl's main process's CPU (all its threads), against indexing off:
        # that process is the crawl's bottleneck, and CPU seconds depend less on the machine's load.
        "main_process_cpu_added_by_indexing": {
            name: round(cpu_per_page(name) / cpu_per_page("index_off") - 1, 3) for name in indexing},
        # The same for the PostgreSQL server's processes (all of them: the crawl is their one client).
        "postgres_cpu_added_by_indexing": {
            name: round(cpu_per_page(name, "postgres_cpu_s") / cpu_per_page("index_off", "postgres_cpu_s") - 1, 3)
            for name in indexing},
        "cpu_s_per_page": {name: {"main_process": round(cpu_per_page(name), 4),
                                  "postgres": round(cpu_per_page(name, "postgres_cpu_s"), 4)} for name in one},
        # The same inside the indexing crawls: the share of their wall time in ingest's call into the index.
        "indexing_share_of_crawl_seconds": {name: share(name) for name in runs if name != "index_off"},
        "embedding": rates,
        "index_bytes_per_1000_pages": int(size / max(pages_on, 1) * 1000),
    }


def paraphrase_recall(server: Any, work: Path, model: str) -> dict[str, Any]:
    """recall@1/@3 with the site's vectors fresh (just crawled: compared exactly), then after the merge
    (in the HNSW index)."""
    from tests.integration.paraphrase_site import QUESTIONS, recall, topic_pages

    from gleaner.demosite.testsite import TestSite
    from gleaner.retrieval.fresh import merge_fresh

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
    parser.add_argument("--rounds", type=int, default=1, help="first crawls: the alternation repeated")
    parser.add_argument("--no-hnsw", action="store_true", help="first crawls: leave out session 10's ingest")
    parser.add_argument("--no-beside", action="store_true", help="first crawls: leave out chunking beside extraction")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", choices=("all", "search", "crawl"), default="all",
                        help="search: latency part only; crawl: the first crawls only (indexing's cost)")
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
            if args.only == "crawl":
                report["first_crawl"] = first_crawl(server, work, args.pages, args.embed_max, args.rounds,
                                                    not args.no_hnsw, not args.no_beside)
            if args.only == "all":
                report["recall"] = {model: paraphrase_recall(server, work, model) for model in ("static", "minilm")}
                print(json.dumps({"recall": report["recall"]}), file=sys.stderr)
                report["first_crawl"] = first_crawl(server, work, args.pages, args.embed_max, args.rounds,
                                                    not args.no_hnsw, not args.no_beside)
                print(json.dumps({"first_crawl": report["first_crawl"]}), file=sys.stderr)
                report["vector_index_upkeep"] = vector_index_upkeep(server)
                print(json.dumps({"vector_index_upkeep": report["vector_index_upkeep"]}), file=sys.stderr)
            if args.chunks and args.only != "crawl":
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
