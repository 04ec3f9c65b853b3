"""Where Gleaner's own CPU goes, per page: a first crawl and an unchanged recrawl, profiled, as a table.

    infra/bench/run.sh is not needed; with nginx and py-spy installed (pip install py-spy):
    PYTHONPATH=shared .venv/bin/python infra/bench/cpu_table.py [--pages 2000] [--profile cheap] [--out FILE]
    PYTHONPATH=shared .venv/bin/python infra/bench/cpu_table.py --ref HEAD~3   # before/after, A B A B

py-spy samples the crawl's process tree (the main process and the extraction
workers) while the benchmark's sampler reads each process's CPU seconds and the
embedded PostgreSQL's. Each process's CPU is shared among components by the
fraction of its on-CPU samples whose stack matches the component (a stack
with a trafilatura frame anywhere is trafilatura's, as everything it calls is
in the ceiling's timing of the same call; otherwise the first rule that
matches, leaf-most frames first), then divided by the pages the crawl settled.
py-spy only sees the thread holding the GIL, so the kernel CPU of Gleaner's
processes (system calls release the GIL: creating blob files, sockets, pipes)
is a row of its own and the samples share the user CPU.
trafilatura's share is the extraction Gleaner wraps; the rest is Gleaner's own
overhead. PostgreSQL's CPU is two rows: its start-up (initdb on a new data dir,
migrations) and the server's work during the crawl, TOAST compression included.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
import compare

EXTRACTION = "trafilatura extraction (wrapped, not overhead)"
# (component, pattern over one frame "function (file:line)"); a stack with a trafilatura frame anywhere is
# extraction, otherwise the leaf-most matching frame decides.
# Ordered: where two rules match the same frame the first wins.
RULES: list[tuple[str, re.Pattern[str]]] = [(name, re.compile(pattern)) for name, pattern in [
    (EXTRACTION, r"\(trafilatura/|\(justext/|\(htmldate/|\(courlan/"),
    ("raw.md rendering", r"whole_page_markdown|gleaner/extract/html\.py"),
    ("SimHash fingerprint", r"gleaner/provenance/simhash\.py"),
    ("canonical text + spans", r"gleaner/provenance/canonical\.py"),
    ("hashing (SHA1, BLAKE3)", r"bytes_hash|\(hashlib|blake3"),
    ("HTML parse + charset decode", r"decode_body|gleaner/fetch/charset\.py|lxml/html"),
    ("link extraction", r"gleaner/discover/links\.py"),
    ("search index: chunking, embedding", r"gleaner/retrieval/(chunks|prepare|static|embedder|fresh_scan)\.py"),
    ("per-batch SQL (client side)", r"\(sqlalchemy/|\(pg8000/|gleaner/store/(?!.*blobs)"),
    ("blob writes", r"gleaner/store/(local|gcs)?blobs\.py"),
    ("pool IPC (pickling, pipes)", r"\(concurrent/futures/|\(multiprocessing/|\(pickle|\(copyreg"),
    ("fetch loop (HTTP client, politeness)", r"\(httpx/|\(httpcore/|\(h11/|\(anyio/|\(ssl\.py|gleaner/fetch/"),
]]
STAGE_RULES: list[tuple[str, re.Pattern[str]]] = [(name, re.compile(pattern)) for name, pattern in [
    ("map", r"gleaner/stages/map\.py|gleaner/discover/"),
    ("sample", r"gleaner/stages/sample\.py"),
]]
STARTUP = "start-up (imports, database, migrations, forkserver)"
OTHER_MAIN = "other, main process (bus, stages, event loop)"
OTHER_WORKER = "other, extraction processes"
KERNEL = "kernel CPU of Gleaner's processes (creating blob files and directories, sockets, pipes)"
POSTGRES = "PostgreSQL server during the crawl (statements, TOAST compression)"
POSTGRES_STARTUP = "PostgreSQL start-up (initdb on a new data dir, migrations)"


def read_samples(prefix: Path) -> dict[int, Counter[tuple[str, ...]]]:
    """py-spy's raw output, one file per process (``{prefix}.{pid}``): one stack per line, root first,
    ';'-separated, then a count."""
    per_pid: dict[int, Counter[tuple[str, ...]]] = defaultdict(Counter)
    for path in prefix.parent.glob(prefix.name + ".*"):
        pid = int(path.suffix[1:])
        for line in path.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                per_pid[pid][tuple(stack.split(";"))] += int(count)
    return per_pid


def component(frames: tuple[str, ...], main: bool) -> str:
    joined = ";".join(frames)
    if "importlib._bootstrap" in joined:
        return STARTUP
    # The harness's main thread outside runner.crawl: imports, the database's start, the counts.
    if main and frames and frames[0].startswith("<module> (") and "gleaner/runtime/runner.py" not in joined:
        return STARTUP
    if main:
        for name, pattern in STAGE_RULES:
            if pattern.search(joined):
                return name
    # Whatever trafilatura calls (lxml's parsers and class lookups, readability's re-parse) is its extraction,
    # as in the ceiling, which times the same call whole: not Gleaner's own work.
    if RULES[0][1].search(joined):
        return EXTRACTION
    for frame in reversed(frames):
        for name, pattern in RULES:
            if pattern.search(frame):
                return name
    return OTHER_MAIN if main else OTHER_WORKER


def table(report: dict[str, Any], spy: Path) -> dict[str, float]:
    """ms of CPU per settled page, by component."""
    pages = max(1, int(report["pages_settled"]))
    samples = read_samples(spy)
    cpu = {int(pid): seconds for pid, seconds in report["cpu_by_pid"].items()}
    system = {int(pid): seconds for pid, seconds in report.get("cpu_system_by_pid", {}).items()}
    main_pid = int(report["pid"])
    out: dict[str, float] = defaultdict(float)
    unsampled = 0.0
    pg_total = sum(seconds for pid, seconds in cpu.items() if pid < 0)
    pg_crawl = min(pg_total, float(report.get("cpu_during_crawl", {}).get("postgres", pg_total)))
    out[POSTGRES] += pg_crawl
    out[POSTGRES_STARTUP] += pg_total - pg_crawl
    for pid, seconds in cpu.items():
        if pid < 0:
            continue
        stacks = samples.get(pid)
        if not stacks:
            unsampled += seconds
            continue
        # py-spy sees the thread that holds the GIL, so time in system calls (which release it) is not in its
        # samples: the kernel's share is a row of its own, the samples share the user CPU.
        kernel = min(system.get(pid, 0.0), seconds)
        out[KERNEL] += kernel
        total = sum(stacks.values())
        for frames, n in stacks.items():
            out[component(frames, pid == main_pid)] += (seconds - kernel) * n / total
    if unsampled:
        out[STARTUP] += unsampled  # the forkserver and resource tracker, gone before py-spy attached
    return {k: round(v * 1000 / pages, 3) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def overhead(rows: dict[str, float]) -> float:
    return round(sum(v for k, v in rows.items() if k != EXTRACTION), 3)


def profile_variant(base: str, work: Path, name: str, limit: int, shared: Path, recrawl: bool) -> dict[str, Any]:
    data = work / f"data-{name}"
    result: dict[str, Any] = {}
    runs = ["first", "recrawl"] if recrawl else ["first"]
    for run in runs:
        spy = work / f"{name}-{run}.spy"
        report = bench.gleaner_crawl(base, data, work / f"{name}-{run}.json", limit, shared, spy=spy)
        (work / f"{name}-{run}.report.json").write_text(json.dumps(report, default=str))
        rows = table(report, spy)
        result[run] = {"pages_settled": report["pages_settled"], "crawl_seconds": round(report["crawl_seconds"], 3),
                       "cpu_seconds": report["cpu_seconds"], "snapshot_rows_written": report["snapshot_rows_written"],
                       "blobs_written": report["blobs_written"], "ms_per_page": rows,
                       "overhead_ms_per_page": overhead(rows),
                       "total_ms_per_page": round(sum(rows.values()), 3)}
    shutil.rmtree(data, ignore_errors=True)
    return result


def print_result(label: str, result: dict[str, Any]) -> None:
    for run, r in result.items():
        print(f"\n{label}, {run}: {r['pages_settled']} pages, {r['crawl_seconds']} s, CPU {r['cpu_seconds']}, "
              f"rows {r['snapshot_rows_written']}, blobs {r['blobs_written']}")
        print(f"| component | ms/page ({run}) |\n|---|---|")
        for k, v in r["ms_per_page"].items():
            print(f"| {k} | {v:.2f} |")
        print(f"| **Gleaner's own (all but trafilatura)** | **{r['overhead_ms_per_page']:.2f}** |")
        print(f"| all | {r['total_ms_per_page']:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--profile", choices=("cheap", "standard"), default="cheap")
    parser.add_argument("--ref", help="also profile this commit, alternating with the working tree")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-recrawl", action="store_true")
    parser.add_argument("--search", action="store_true", help="crawl with search on (GLEANER_EMBED_AFTER_CRAWL)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (py-spy files)")
    parser.add_argument("--workdir-in", type=Path, default=None,
                        help="make the work dir (corpus, data dir, database) under this directory, e.g. /dev/shm")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not Path(sys.executable).with_name("py-spy").exists():
        raise SystemExit("cpu_table: py-spy is not installed in this venv (pip install py-spy)")
    bench.SEARCH = args.search
    work, variants, servers, base = compare.served_corpus("gleaner-cpu-", args.pages, args.profile, args.ref,
                                                          args.workdir_in)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    try:
        for r in range(args.rounds):
            for name, shared in variants.items():
                result = profile_variant(base, work, f"{name}-{r}", args.pages * 2 + 100, shared,
                                         not args.no_recrawl)
                results[name].append(result)
                print_result(f"{name} (round {r})", result)
    finally:
        servers.stop()
    summary: dict[str, Any] = {"pages": args.pages, "profile": args.profile, "ref": args.ref,
                               "commit": bench.git_commit(), "machine": bench.machine(), "rounds": results}
    medians: dict[str, dict[str, float]] = {}
    for name, rounds in results.items():
        for run in rounds[0]:
            medians[f"{name}_{run}_overhead_ms_per_page"] = {
                "median": round(statistics.median(x[run]["overhead_ms_per_page"] for x in rounds), 3)}
    summary["medians"] = medians
    print(json.dumps(medians))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))
    if args.keep:
        print(f"work dir: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
