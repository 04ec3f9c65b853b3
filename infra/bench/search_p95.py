"""Search latency at scale: ``python infra/bench/search_p95.py [--chunks 100000] [--queries 100] [--pgdata DIR]``.

Seeds database "big" with ``--chunks`` synthetic chunks (random vectors and word soup, one document per
20, the HNSW index built after the load: retrieval_search.py's seed, kept in ``--pgdata`` for later
runs; ``--fresh N`` more written fresh, outside the HNSW index, as a crawl leaves them), then times,
query by query alternated on the same database and in one tenant's scope:

- ``current``: ``gleaner.retrieval.search()`` end to end (query embedding, BM25 words, nearest vectors,
  visibility, fusion, the answer's passages);
- ``baseline_session_9``: session 9's single statement (search_baseline.py: every-word candidates and
  the 0.6 / 0.4 blend), executed with the same query vector, as the reference of the same run.

Word-soup queries are the worst case for the word side: each of the corpus's 164 words is in about a
third of the chunks, so every word of a query is common. Prints one JSON object (``--out`` writes it).
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "shared"))
sys.path.insert(0, str(HERE))

from corpus import _WORDS  # noqa: E402
from retrieval_search import _fresh_set, _seed, _seeded  # noqa: E402

from gleaner import tenancy  # noqa: E402
from gleaner.app import Deps  # noqa: E402
from gleaner.retrieval import search  # noqa: E402
from gleaner.retrieval.embedder import default_embedder  # noqa: E402
from gleaner.settings.config import Settings, parse_networks  # noqa: E402
from gleaner.store.backends import db  # noqa: E402


def latency(server: Any, work: Path, chunks: int, queries: int, fresh: int = 0) -> dict[str, Any]:
    import random

    import search_baseline

    built = {} if _seeded(server, chunks) else _seed(server, work, chunks)
    deps = Deps(Settings(data_dir=work / "big", database_url=server.get_uri(database="big"),
                         allow_networks=parse_networks("127.0.0.0/8")))
    db.upgrade(deps.engine)
    _fresh_set(server, fresh)  # beside the indexed chunks, not merged yet (as ingest writes them)
    embedder = default_embedder()
    rng = random.Random(7)
    texts = [" ".join(rng.choice(_WORDS[40:]) for _ in range(rng.randint(3, 8))) for _ in range(queries + 20)]
    baseline_sql = search_baseline._statement(True, False)

    def baseline(q: str) -> None:
        vector = "[" + ",".join(f"{x:.6f}" for x in embedder.embed([q])[0]) + "]"
        with deps.engine.begin() as conn:
            conn.exec_driver_sql("SET LOCAL hnsw.ef_search = 50")
            conn.execute(baseline_sql, {"q": q, "v": vector, "m": embedder.model, "site": None,
                                        "k": search_baseline.CANDIDATES, "cap": 200, "limit": 10}).all()

    def current(q: str) -> None:
        assert search(deps, q, limit=10)["results"], q

    ways = {"current": current, "baseline_session_9": baseline}
    took: dict[str, list[float]] = {name: [] for name in ways}
    load_start = os.getloadavg()
    with tenancy.scope("big.test"):
        for n, q in enumerate(texts):
            for name in (list(ways) if n % 2 == 0 else list(reversed(ways))):
                started = time.perf_counter()
                ways[name](q)
                if n >= 20:  # the first twenty warm the caches, each way
                    took[name].append(time.perf_counter() - started)
    deps.close()
    _fresh_set(server, 0)  # the kept data directory back to its seeded chunks alone

    def pct(samples: list[float], p: float) -> float:
        return round(sorted(samples)[min(len(samples) - 1, int(p * len(samples)))] * 1000, 1)

    out = {name: {"p50_ms": pct(s, 0.5), "p95_ms": pct(s, 0.95)} for name, s in took.items()}
    return {"chunks": chunks, "fresh_chunks": fresh, "queries": queries, **built, "load_average_at_start": load_start,
            "load_average_at_end": os.getloadavg(), **out,
            "p95_ratio_current_to_baseline": round(out["current"]["p95_ms"] / out["baseline_session_9"]["p95_ms"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--fresh", type=int, default=0, help="more chunks written fresh (outside the HNSW index)")
    parser.add_argument("--pgdata", type=Path, help="a kept data directory: seeded once, reused later")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), tenancy.all_tenants():
        warnings.simplefilter("ignore")
        import pgserver

        server = pgserver.get_server(args.pgdata or Path(tmp) / "pg", cleanup_mode="stop")
        try:
            report = latency(server, Path(tmp), args.chunks, args.queries, args.fresh)
        finally:
            server.cleanup()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
