"""The unchanged recrawl as a share of the first crawl, whole-process, before/after a change, in one command.

    PYTHONPATH=shared python infra/bench/recrawl.py --ref COMMIT [--new COMMIT] [--profile cheap] [--pages 2000]
                                                    [--rounds 2] [--alternate N]

Each version runs ``gleaner crawl URL --json`` as a user does (a new process: imports, the embedded
PostgreSQL's start, the schema check and the extraction processes are all counted) twice on one data
dir: a first crawl, then an unchanged recrawl. The versions take turns (A B A B ...) on one
nginx-served corpus, so a drift of the shared machine's speed hits both. Prints each round (wall
seconds, CPU of the process tree and of PostgreSQL, what the recrawl wrote) and the median of each
version's recrawl / first crawl, in wall time and in CPU of all processes.

With ``--alternate N`` it then measures the recrawl alone, steadier on a shared machine: one first
crawl (the reference's), then N unchanged recrawls of each version in turn on that data dir, and the
medians of their wall time and CPU and of new / ref per pair. Both versions must share a schema head.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
import corpus
from compare import served_corpus


def alternate(base: str, work: Path, variants: dict[str, Path], limit: int, pairs: int) -> dict[str, Any]:
    """One first crawl, then ``pairs`` unchanged recrawls of each version in turn on its data dir."""
    data = work / "alternate"
    bench.cli_crawl(base, data, limit, next(iter(variants.values())))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for pair in range(pairs):
        for name, shared in variants.items():
            again = bench.cli_crawl(base, data, limit, shared)
            runs[name].append(again)
            print(f"recrawl {pair} {name}: {again['wall_seconds']:.2f} s cpu {again['cpu_seconds']} "
                  f"{again['summary']}", flush=True)
    shutil.rmtree(data, ignore_errors=True)

    def cpu(run: dict[str, Any]) -> float:
        return float(sum(run["cpu_seconds"].values()))

    medians = {name: {"wall_seconds": round(statistics.median(r["wall_seconds"] for r in rs), 3),
                      "cpu_seconds": round(statistics.median(cpu(r) for r in rs), 3),
                      "main_cpu_seconds": round(statistics.median(r["cpu_seconds"]["main"] for r in rs), 3),
                      "postgres_cpu_seconds": round(statistics.median(r["cpu_seconds"]["postgres"] for r in rs), 3)}
               for name, rs in runs.items()}
    summary: dict[str, Any] = {"runs": runs, "medians": medians}
    if set(runs) == {"ref", "new"}:
        pairs_of = list(zip(runs["ref"], runs["new"], strict=True))
        summary["new_over_ref"] = {
            "cpu": round(statistics.median(cpu(b) / cpu(a) for a, b in pairs_of), 3),
            "main_cpu": round(statistics.median(b["cpu_seconds"]["main"] / a["cpu_seconds"]["main"]
                                                for a, b in pairs_of), 3),
            "wall": round(statistics.median(b["wall_seconds"] / a["wall_seconds"] for a, b in pairs_of), 3)}
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}), flush=True)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", required=True, help="the commit to compare against (its shared/ tree)")
    parser.add_argument("--new", default=None, help="another commit instead of the working tree")
    parser.add_argument("--profile", choices=corpus.PROFILES, default="cheap")
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--alternate", type=int, default=0, help="then N recrawls of each version in turn")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work, variants, servers, base = served_corpus("gleaner-recrawl-", args.pages, args.profile, args.ref,
                                                  new=args.new)
    limit = args.pages * 2 + 100
    rounds: list[dict[str, Any]] = []
    try:
        for r in range(args.rounds):
            for name, shared in variants.items():
                data = work / f"{name}-{r}"
                first = bench.cli_crawl(base, data, limit, shared)
                again = bench.cli_crawl(base, data, limit, shared)
                share = again["wall_seconds"] / first["wall_seconds"]
                # CPU of every process (PostgreSQL's too): steadier than wall time on a shared machine.
                cpu_share = sum(again["cpu_seconds"].values()) / (sum(first["cpu_seconds"].values()) or 1.0)
                rounds.append({"round": r, "variant": name, "first": first, "recrawl": again, "share": round(share, 4),
                               "cpu_share": round(cpu_share, 4)})
                print(f"round {r} {name}: first {first['wall_seconds']:.2f} s cpu {first['cpu_seconds']}; recrawl "
                      f"{again['wall_seconds']:.2f} s cpu {again['cpu_seconds']} processes {again['processes']} "
                      f"{again['summary']} = {share:.1%} of the wall time, {cpu_share:.1%} of the CPU", flush=True)
                shutil.rmtree(data, ignore_errors=True)
        alternated = alternate(base, work, variants, limit, args.alternate) if args.alternate else None
    finally:
        servers.stop()
    result: dict[str, Any] = {"ref": args.ref, "new": args.new or "working tree", "profile": args.profile,
                              "pages": args.pages, "rounds": rounds, "median_share": {}, "median_cpu_share": {},
                              "alternated": alternated}
    for name in variants:
        for key in ("share", "cpu_share"):
            shares = [row[key] for row in rounds if row["variant"] == name]
            if shares:
                result[f"median_{key}"][name] = round(statistics.median(shares), 4)
    print(json.dumps({"wall": result["median_share"], "cpu": result["median_cpu_share"]}))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
