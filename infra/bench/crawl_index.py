"""First crawls with search on, as a user runs them, against Scrapy + trafilatura, in one command.

    PYTHONPATH=shared python infra/bench/crawl_index.py [--pages 2000] [--rounds 2] [--ref main] [--new HEAD]
        [--large 20000] [--search-queries 200]

One nginx-served synthetic corpus (corpus.py). Each round runs, in turn, Scrapy + trafilatura
(baseline_scrapy.py, a whole process), ``gleaner crawl`` of the working tree with search on
(``GLEANER_EMBED_AFTER_CRAWL=true``: every page chunked, embedded and searchable when the crawl
ends), and with ``--ref`` the same command at that commit (the before). Each is a new data dir, a
whole process from start to exit. Prints pages/s, the median of each round's ratios, and the load
average. ``--large N`` then crawls N pages (its own corpus) once with the working tree and compares
its pages/s with the rounds' median, and ``--search-queries`` times ``search()`` right after that
crawl, with nothing merged (p50/p95, against the same queries after ``gleaner index`` merged).
Figures only, never a test: a shared machine's noise is in every one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
import corpus
from compare import export_shared


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def gleaner_crawl(base: str, data: Path, pages: int, shared: Path) -> dict[str, Any]:
    """``gleaner crawl URL --json`` with search on, a whole process: pages/s from start to exit."""
    env = bench.gleaner_env(data, shared)
    env["GLEANER_EMBED_AFTER_CRAWL"] = "true"
    cmd = [bench.python(), "-m", "gleaner.cli", "crawl", base + "/", "--limit", str(pages * 2 + 100), "--json"]
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=bench.HERE, capture_output=True, text=True, timeout=7200, check=False)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"gleaner crawl failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    fetched = int(json.loads(proc.stdout).get("fetched") or 0)
    return {"seconds": round(wall, 2), "fetched": fetched, "pages_per_second": round(fetched / wall, 2),
            "stderr_tail": proc.stderr.strip().splitlines()[-3:]}


def scrapy(base: str, out: Path) -> dict[str, Any]:
    run = bench.baseline(base, out)
    pages = int(run.get("pages", 0))
    return {"seconds": round(run["whole_process_seconds"], 2), "fetched": pages,
            "pages_per_second": round(pages / run["whole_process_seconds"], 2)}


def served(work: Path, name: str, pages: int) -> tuple[bench.Servers, str]:
    servers = bench.Servers("nginx", work / f"nginx-{name}")
    root = work / name
    _, base = servers.add(root)
    corpus.generate_synthetic(root, base, pages)
    servers.start()
    return servers, base


SEARCH_LATENCY = """
import json, statistics, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from corpus import _WORDS
from gleaner import tenancy
from gleaner.app import Deps
from gleaner.cli.base import load_settings
from gleaner.retrieval import fresh, search
import random
rng = random.Random(7)
queries = [" ".join(rng.choice(_WORDS[30:]) for _ in range(rng.randint(3, 7))) for _ in range(int(sys.argv[1]))]
SCOPE = tenancy.all_tenants()  # as `gleaner search` without --tenant (kept: its exit would end it)
SCOPE.__enter__()
deps = Deps(load_settings())
search(deps, "warm up the model and the fresh scan")
def timed():
    ms = []
    for q in queries:
        t = time.perf_counter(); search(deps, q, limit=10); ms.append((time.perf_counter() - t) * 1000)
    ms.sort()
    return {"p50_ms": round(statistics.median(ms), 1), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1)}
out = {"fresh": fresh.fresh_count(deps.engine), "chunks": deps.search_index.counts()["chunks"], "unmerged": timed()}
# The before: every fresh vector compared in SQL (migration 0037's way: the function's branch for no scan).
scan = deps.search_index.fresh_signs.nearest
deps.search_index.fresh_signs.nearest = lambda *a, **k: (None, None)
out["unmerged_sql_scan"] = timed()
deps.search_index.fresh_signs.nearest = scan
out["sql_scan_over_bits_p95"] = round(out["unmerged_sql_scan"]["p95_ms"] / out["unmerged"]["p95_ms"], 2)
if sys.argv[2] == "merge":
    t = time.perf_counter(); report = fresh.merge_fresh(deps.engine)
    out["merge"] = {"merged": report.merged, "way": str(report.way), "seconds": round(time.perf_counter() - t, 1)}
    out["merged"] = timed()
print(json.dumps(out))
"""


def search_latency(data: Path, queries: int, merge: bool) -> dict[str, Any]:
    env = bench.gleaner_env(data)
    proc = subprocess.run([bench.python(), "-c", SEARCH_LATENCY, str(queries), "merge" if merge else "-",
                           str(bench.HERE)], env=env, cwd=bench.HERE, capture_output=True, text=True, timeout=7200,
                          check=False)
    if proc.returncode != 0:
        raise SystemExit(f"search latency failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ref", default=None, help="also crawl with this commit's shared/ (the before)")
    parser.add_argument("--new", default=None, help="crawl this commit's shared/ instead of the working tree's")
    parser.add_argument("--large", type=int, default=0, help="then one first crawl of this many pages")
    parser.add_argument("--search-queries", type=int, default=0, help="search p50/p95 after the large crawl")
    parser.add_argument("--merge", action="store_true", help="and again after merging (a rebuild: long)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the large crawl's data dir here")
    parser.add_argument("--search-only", type=Path, default=None,
                        help="only time search (--search-queries) in this kept data dir")
    args = parser.parse_args()
    if args.search_only:
        print(json.dumps({"search": search_latency(args.search_only, args.search_queries or 50, args.merge),
                          "load": load()}), flush=True)
        return
    work = Path(tempfile.mkdtemp(prefix="gleaner-crawl-index-"))
    work.chmod(0o755)
    variants = {"new": export_shared(args.new, work / "new") if args.new else bench.REPO / "shared"}
    if args.ref:
        variants["ref"] = export_shared(args.ref, work / "ref")
    print(f"load average at start: {load()}", flush=True)
    servers, base = served(work, "synthetic", args.pages) if args.rounds else (None, "")
    rows: list[dict[str, float]] = []
    try:
        for shared in variants.values():
            bench.warm_pg_templates(work, shared)
        for r in range(args.rounds):
            row: dict[str, float] = {}
            row["scrapy"] = scrapy(base, work / f"scrapy-{r}.json")["pages_per_second"]
            for name, shared in variants.items():
                bench.warm_pg_templates(work, shared)
                run = gleaner_crawl(base, work / f"{name}-{r}", args.pages, shared)
                row[name] = run["pages_per_second"]
                print(f"round {r} {name}: {run['fetched']} pages in {run['seconds']} s ({run['pages_per_second']}"
                      f" pages/s) {run['stderr_tail'][-1:]}", flush=True)
                shutil.rmtree(work / f"{name}-{r}", ignore_errors=True)
            print(f"round {r} scrapy: {row['scrapy']} pages/s; load {load()}", flush=True)
            rows.append(row)
    finally:
        if servers is not None:
            servers.stop()
    median = {k: round(statistics.median(r[k] for r in rows), 2) for k in rows[0]} if rows else {"new": 0.0}
    ratios = {f"{k}_over_scrapy": round(statistics.median(r[k] / r["scrapy"] for r in rows), 3)
              for k in variants} if rows else {}
    if "ref" in variants and rows:
        ratios["new_over_ref"] = round(statistics.median(r["new"] / r["ref"] for r in rows), 3)
    print(json.dumps({"pages": args.pages, "median_pages_per_second": median, "ratios": ratios, "load": load()}),
          flush=True)
    if args.large:
        bench.warm_pg_templates(work, variants["new"])
        servers, base = served(work, "large", args.large)
        try:
            run = gleaner_crawl(base, work / "large", args.large, variants["new"])
        finally:
            servers.stop()
        print(json.dumps({"large_pages": args.large, "seconds": run["seconds"], "fetched": run["fetched"],
                          "pages_per_second": run["pages_per_second"],
                          "over_small_median": round(run["pages_per_second"] / median["new"], 3)
                          if median["new"] else None, "load": load()}),
              flush=True)
        if args.search_queries:
            print(json.dumps({"search_after_large_crawl": search_latency(work / "large", args.search_queries,
                                                                         args.merge), "load": load()}), flush=True)
        if args.keep:
            shutil.copytree(work / "large", args.keep, symlinks=True,
                            ignore=shutil.ignore_patterns(".s.PGSQL.*", "postmaster.pid"))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
