"""Which HNSW graph text_chunks can afford: ``python infra/bench/hnsw_graph.py [--synthetic N] [--real N]``.

Real vectors only: the static model's embeddings of the chunks ingest would cut (extract, canonical
text, span-ledger chunks, the embedding input) from ``--synthetic`` pages of the benchmark's synthetic
corpus, ``--real`` pages of the real-docs corpus (python3.11-doc, when installed) and the paraphrase
site's topic pages. ``--queries`` of those chunks are held out as queries, ``--inserts`` more as the
vectors a crawl inserts. For each graph (m, ef_construction), on one embedded PostgreSQL:

1. build the index over the rest (CREATE INDEX after the load, one worker), timed;
2. recall@10 of the index's top 10 against the exact cosine top 10 (numpy over the same vectors) at
   ``hnsw.ef_search`` = 50, as search sets it, and how many of the exact top 10 are among the index's
   50 candidates (what search re-ranks); for the held-out chunks and for the paraphrase questions,
   plus the paraphrase questions' page recall@1/@3 by the index's candidates in this haystack;
3. the cost of upkeep: ms per vector inserted, 20 a transaction, into each indexed table and into one
   without an index, in rounds alternated across the tables (the machine is shared).

Prints one JSON object (``--out`` also writes it); the load average at start and end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "shared"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import DEFAULT_REAL_SOURCE, page_paths, render_page  # noqa: E402

from gleaner.extract.page import extract_page  # noqa: E402
from gleaner.retrieval.chunks import chunk_text, embedding_input  # noqa: E402
from gleaner.retrieval.embedder import EmbedModel, default_embedder  # noqa: E402
from gleaner.store.backends import db  # noqa: E402

GRAPHS = ((16, 64), (12, 48), (8, 32))
EF_SEARCH = 50  # ranking.CANDIDATES: search sets hnsw.ef_search to it
EF_SWEEP = (50, 100, 200)  # what recall a larger ef_search would buy (search's to choose, not this bench's)


def _chunks(body: bytes, url: str) -> list[str]:
    canonical = extract_page(body, "utf-8", url).canonical
    return [embedding_input(canonical.text, c) for c in chunk_text(canonical.text, json.loads(canonical.spans_json))]


def corpus_inputs(synthetic: int, real: int) -> tuple[list[str], list[str], dict[str, Any]]:
    """Embedding inputs of every chunk, and the page (url) each came from."""
    from tests.integration.paraphrase_site import topic_pages

    texts: list[str] = []
    pages: list[str] = []
    counts = {"synthetic_pages": synthetic, "real_pages": 0, "topic_pages": 0}
    paths = page_paths(synthetic)
    for i in range(synthetic):
        for t in _chunks(render_page(1, paths, i).encode(), "http://s.test" + paths[i]):
            texts.append(t)
            pages.append("s:" + paths[i])
    files = sorted(DEFAULT_REAL_SOURCE.rglob("*.html"))[:real] if DEFAULT_REAL_SOURCE.is_dir() else []
    for f in files:
        for t in _chunks(f.read_bytes(), "http://r.test/" + f.name):
            texts.append(t)
            pages.append("r:" + str(f))
    counts["real_pages"] = len(files)
    for path, page in topic_pages().items():
        body = page.body if isinstance(page.body, bytes) else str(page.body).encode()
        for t in _chunks(body, "http://t.test" + path):
            texts.append(t)
            pages.append("t:" + path)
        counts["topic_pages"] += 1
    return texts, pages, counts


def _literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


def _insert(engine: sa.Engine, table: str, ids: list[int], vectors: np.ndarray, per: int = 20) -> float:
    started = time.perf_counter()
    for at in range(0, len(ids), per):
        payload = json.dumps([{"i": ids[j], "v": _literal(vectors[j])} for j in range(at, min(at + per, len(ids)))])
        with engine.begin() as conn:
            conn.execute(sa.text(f"INSERT INTO {table} SELECT (r->>'i')::int, CAST(r->>'v' AS public.vector)"
                                 " FROM json_array_elements(CAST(:j AS json)) r"), {"j": payload})
    return time.perf_counter() - started


def _copy_in(engine: sa.Engine, table: str, vectors: np.ndarray, ids: np.ndarray) -> None:
    for at in range(0, len(ids), 1000):
        _insert(engine, table, [int(i) for i in ids[at:at + 1000]], vectors[ids[at:at + 1000]], per=1000)


def _topk(engine: sa.Engine, table: str, queries: np.ndarray, k: int, ef: int = EF_SEARCH) -> list[list[int]]:
    out: list[list[int]] = []
    with engine.begin() as conn:
        conn.execute(sa.text(f"SET LOCAL hnsw.ef_search = {ef}"))
        for q in queries:
            out.append([int(r[0]) for r in conn.execute(sa.text(
                f"SELECT id FROM {table} ORDER BY e OPERATOR(public.<=>) CAST(:v AS public.vector) LIMIT {k}"),
                {"v": _literal(q)})])
    return out


def _overlap(found: list[list[int]], exact: np.ndarray, vectors: np.ndarray, queries: np.ndarray, k: int = 10) -> float:
    """Share of the exact top k the index found, counting ties: a chunk as near as the exact k-th one
    (a repeated chunk's copies have one vector) is as good as any."""
    shares = []
    for f, e, q in zip(found, exact, queries, strict=True):
        kth = float(vectors[e[k - 1]] @ q) - 1e-5
        shares.append(min(k, sum(1 for i in f if float(vectors[i] @ q) >= kth)) / k)
    return float(np.mean(shares))


def _page_recall(candidates: list[list[int]], pages: list[str], wanted: list[str]) -> dict[str, float]:
    """recall@1/@3 of the right page among the distinct pages of the candidates, best first."""
    at1 = at3 = 0
    for cands, want in zip(candidates, wanted, strict=True):
        ranked: list[str] = []
        for c in cands:
            if pages[c] not in ranked:
                ranked.append(pages[c])
        at1 += ranked[:1] == [want]
        at3 += want in ranked[:3]
    return {"recall@1": at1 / len(wanted), "recall@3": at3 / len(wanted)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", type=int, default=1000, help="synthetic corpus pages chunked")
    parser.add_argument("--real", type=int, default=600, help="real-docs pages chunked (when installed)")
    parser.add_argument("--queries", type=int, default=300, help="chunks held out as queries")
    parser.add_argument("--inserts", type=int, default=1200, help="vectors inserted per table, timed")
    parser.add_argument("--rounds", type=int, default=3, help="alternated insert rounds")
    parser.add_argument("--cache", type=Path, help="a directory keeping the embedded corpus between runs")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from tests.integration.paraphrase_site import QUESTIONS

    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "load_average_at_start": os.getloadavg(), "ef_search": EF_SEARCH}
    embedder = default_embedder(EmbedModel.STATIC)
    cache = args.cache / f"hnsw-graph-{args.synthetic}-{args.real}.npz" if args.cache else None
    if cache and cache.exists():  # the same corpus embedded by an earlier run: chunking it is minutes
        held = np.load(cache, allow_pickle=False)
        vectors, pages = held["vectors"], held["pages"].tolist()
        report["corpus"] = json.loads(str(held["counts"]))
    else:
        started = time.perf_counter()
        texts, pages, report["corpus"] = corpus_inputs(args.synthetic, args.real)
        report["corpus"]["chunks"] = len(texts)
        report["corpus"]["chunking_seconds"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
        report["corpus"]["embedding_seconds"] = round(time.perf_counter() - started, 1)
        if cache:
            np.savez(cache, vectors=vectors, pages=np.asarray(pages), counts=json.dumps(report["corpus"]))
    report["corpus"]["distinct_vectors"] = len(np.unique(vectors, axis=0))
    question_vectors = np.asarray(embedder.embed(list(QUESTIONS)), dtype=np.float32)
    wanted = ["t:" + path for path in QUESTIONS.values()]
    order = [i for i, p in enumerate(pages) if p[0] != "t"]  # the topic pages stay indexed: the questions' answers
    random.Random(7).shuffle(order)
    queries = np.asarray(order[:args.queries])
    inserts = np.asarray(order[args.queries:args.queries + args.inserts])
    topics = {i for i, p in enumerate(pages) if p[0] == "t"}
    base = np.asarray(sorted(set(order[args.queries + args.inserts:]) | topics))
    report["corpus"]["indexed_chunks"] = len(base)
    # Exact cosine top 50 over the base (unit vectors: cosine order is dot-product order).
    def exact(qv: np.ndarray) -> np.ndarray:
        return base[np.argsort(-(qv @ vectors[base].T), axis=1, kind="stable")[:, :50]]
    qv = vectors[queries]
    exact_chunks, exact_questions = exact(qv), exact(question_vectors)
    report["exact_page_recall_questions"] = _page_recall(exact_questions.tolist(), pages, wanted)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        server = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        try:
            sa_url, connect_args = db._pg8000_url(server.get_uri())
            engine = sa.create_engine(sa_url, connect_args=connect_args)
            with engine.begin() as conn:
                conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
                report["pgvector"] = conn.execute(sa.text(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
            tables = ["plain"] + [f"g{m}_{ef}" for m, ef in GRAPHS]
            for table in tables:
                with engine.begin() as conn:
                    conn.execute(sa.text(f"CREATE TABLE {table} (id int PRIMARY KEY, e public.vector(384))"))
                _copy_in(engine, table, vectors, base)
            report["graphs"] = {}
            for m, ef in GRAPHS:
                table = f"g{m}_{ef}"
                with engine.begin() as conn:
                    conn.execute(sa.text("SET LOCAL maintenance_work_mem = '256MB'"))
                    conn.execute(sa.text("SET LOCAL max_parallel_maintenance_workers = 0"))
                    began = time.perf_counter()
                    conn.execute(sa.text(f"CREATE INDEX ON {table} USING hnsw (e public.vector_cosine_ops)"
                                         f" WITH (m = {m}, ef_construction = {ef})"))
                    built = time.perf_counter() - began
                    size = conn.execute(sa.text(f"SELECT pg_relation_size('{table}_e_idx')")).scalar_one()
                top_chunks = _topk(engine, table, vectors[queries], EF_SEARCH)
                top_questions = _topk(engine, table, question_vectors, EF_SEARCH)
                report["graphs"][table] = {
                    "m": m, "ef_construction": ef, "build_seconds": round(built, 1),
                    "build_ms_per_vector": round(built / len(base) * 1000, 2), "index_bytes": int(size),
                    "chunks_recall@10": round(_overlap([t[:10] for t in top_chunks], exact_chunks, vectors, qv), 4),
                    "chunks_exact10_in_50_candidates": round(_overlap(top_chunks, exact_chunks, vectors, qv), 4),
                    "questions_recall@10": round(_overlap([t[:10] for t in top_questions], exact_questions, vectors,
                                                          question_vectors), 4),
                    "questions_page_recall": _page_recall(top_questions, pages, wanted),
                }
                for kind, name in (("s", "synthetic"), ("r", "real_docs")):
                    mine = [j for j, q in enumerate(queries) if pages[q][0] == kind]
                    if mine:
                        report["graphs"][table][f"{name}_chunks_recall@10"] = round(_overlap(
                            [top_chunks[j][:10] for j in mine], exact_chunks[mine], vectors, qv[mine]), 4)
                for ef_search in EF_SWEEP[1:]:
                    wide_chunks = _topk(engine, table, qv, 10, ef_search)
                    wide_questions = _topk(engine, table, question_vectors, EF_SEARCH, ef_search)
                    report["graphs"][table][f"ef_search_{ef_search}"] = {
                        "chunks_recall@10": round(_overlap(wide_chunks, exact_chunks, vectors, qv), 4),
                        "questions_recall@10": round(_overlap([t[:10] for t in wide_questions], exact_questions,
                                                              vectors, question_vectors), 4),
                        "questions_page_recall": _page_recall(wide_questions, pages, wanted)}
                print(json.dumps({table: report["graphs"][table]}), file=sys.stderr)
            # Upkeep: each round inserts a slice of the held-out vectors into every table in turn.
            spent = dict.fromkeys(tables, 0.0)
            slices = np.array_split(np.arange(len(inserts)), args.rounds)
            for r, part in enumerate(slices):
                for table in tables if r % 2 == 0 else reversed(tables):
                    ids = [int(inserts[j]) for j in part]
                    spent[table] += _insert(engine, table, ids, vectors[ids])
            report["insert_ms_per_vector"] = {t: round(s / len(inserts) * 1000, 2) for t, s in spent.items()}
            report["insert_rows_per_transaction"] = 20
            engine.dispose()
        finally:
            server.cleanup()
    report["load_average_at_end"] = os.getloadavg()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
