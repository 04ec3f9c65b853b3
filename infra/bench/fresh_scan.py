"""How well the fresh scan's sign bits choose what to compare, and what the scan costs (figures only).

    PYTHONPATH=shared python infra/bench/fresh_scan.py [--pages 1000] [--queries 200] [--size 380000]

Chunks of the synthetic corpus (corpus.py) and, where installed, the python3.11-doc pages, embedded
with the default model as ingest embeds them; the queries are word-soup questions and held-out
chunks. For each ``RESCORED`` candidate count, the share of the exact cosine top 10 and top 50 that
the bits' nearest candidates hold once compared exactly (gleaner.retrieval.fresh_scan). Then the
scan's own time over ``--size`` vectors (the vectors repeated to that size), against an exact float32
matrix product over the same set.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus

from gleaner.retrieval.chunks import chunk_text, embedding_input
from gleaner.retrieval.embedder import default_embedder
from gleaner.retrieval.fresh_scan import nearest_rows


def _texts(pages: int) -> list[str]:
    """Each page's canonical text, as ingest's extraction makes it (trafilatura to markdown)."""
    import trafilatura

    work = Path(tempfile.mkdtemp(prefix="gleaner-fresh-scan-"))
    corpus.generate_synthetic(work, "http://127.0.0.1:1", pages)
    html = sorted(work.rglob("*.html"))[:pages]
    real = sorted(Path("/usr/share/doc/python3.11/html").rglob("*.html"))[:pages]
    out = []
    for path in [*html, *real]:
        text = trafilatura.extract(path.read_text(errors="replace"), output_format="markdown") or ""
        if text.strip():
            out.append(text)
    shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=600)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--size", type=int, default=380_000)
    args = parser.parse_args()
    embedder = default_embedder()
    inputs: list[str] = []
    for text in _texts(args.pages):
        body = text.encode("utf-8")
        spans, at = [], 0
        for block in body.split(b"\n\n"):  # the ledger's blocks, near enough: paragraphs and headings
            if block.strip():
                spans.append((at, at + len(block), "heading" if block.startswith(b"#") else "paragraph"))
            at += len(block) + 2
        for c in chunk_text(body, spans):
            inputs.append(embedding_input(body, c))
    rng = random.Random(3)
    rng.shuffle(inputs)
    held = inputs[:args.queries // 2]
    words = corpus._WORDS[30:]
    asked = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 8))) for _ in range(args.queries - len(held))]
    vectors = np.asarray(embedder.embed(inputs[len(held):]), dtype=np.float32)
    queries = np.asarray(embedder.embed(held + asked), dtype=np.float32)
    bits = np.packbits(vectors > 0, axis=1).view(np.uint64)
    print(f"{len(vectors)} chunks, {len(queries)} queries ({len(held)} held-out chunks, {len(asked)} word soups);"
          f" load {os.getloadavg()[0]:.1f}", flush=True)
    result: dict[str, dict[str, float]] = {}
    planes_all = np.ascontiguousarray(bits.T)
    for rescored in (200, 500, 1000, 2000):
        at10, at50 = [], []
        for q in queries:
            exact = np.argsort(-(vectors @ q))
            near = nearest_rows(planes_all, q, rescored)
            found = near[np.argsort(-(vectors[near] @ q))]
            at10.append(len(set(exact[:10]) & set(found[:10])) / 10)
            at50.append(len(set(exact[:50]) & set(found[:50])) / 50)
        result[str(rescored)] = {"recall_at_10": round(statistics.mean(at10), 3),
                                 "recall_at_50": round(statistics.mean(at50), 3)}
        print(f"rescored {rescored}: {result[str(rescored)]}", flush=True)
    reps = -(-args.size // len(vectors))
    planes = np.ascontiguousarray(np.tile(bits, (reps, 1))[:args.size].T)  # as FreshSigns keeps them
    big = np.tile(vectors, (reps, 1))[:args.size].copy()
    rows = np.ascontiguousarray(planes.T)  # the first version's layout: six words a row, then a partition
    scan, rowwise, matmul = [], [], []
    for q in queries[:50]:
        t = time.perf_counter()
        nearest_rows(planes, q, 1000)
        scan.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        qb = np.packbits(q > 0).view(np.uint64)
        np.argpartition(np.bitwise_count(rows ^ qb).sum(axis=1, dtype=np.uint16), 1000)[:1000]
        rowwise.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        np.argpartition(-(big @ q), 50)[:50]
        matmul.append((time.perf_counter() - t) * 1000)
    scan.sort()
    rowwise.sort()
    matmul.sort()
    timing = {"size": args.size, "bits_scan_p50_ms": round(statistics.median(scan), 1),
              "bits_scan_p95_ms": round(scan[int(0.95 * (len(scan) - 1))], 1),
              "rowwise_scan_p50_ms": round(statistics.median(rowwise), 1),
              "rowwise_over_planes_p50": round(statistics.median(rowwise) / statistics.median(scan), 2),
              "float32_exact_p50_ms": round(statistics.median(matmul), 1),
              "float32_exact_p95_ms": round(matmul[int(0.95 * (len(matmul) - 1))], 1),
              "bits_mb": round(planes.nbytes / 2**20, 1), "float32_mb": round(big.nbytes / 2**20, 1),
              "load": round(os.getloadavg()[0], 1)}
    print(json.dumps({"recall": result, "timing": timing}), flush=True)


if __name__ == "__main__":
    main()
