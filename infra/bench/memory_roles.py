"""Which process a first crawl's memory grows in: peak RSS of the main process, of the extraction processes
and of the embedded PostgreSQL, at each corpus size, with the main process's RSS as each stage returns.

    PYTHONPATH=shared .venv/bin/python infra/bench/memory_roles.py [--pages 2000 20000] [--profile cheap] [--ref COMMIT]

With ``--ref``, that commit's ``shared/`` crawls each corpus too, before the working tree's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
import compare
import corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--profile", choices=("cheap", "standard"), default="cheap")
    parser.add_argument("--ref", help="also crawl with this commit's shared/, before the working tree's")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gleaner-mem-"))
    work.chmod(0o755)
    variants = {"new": bench.REPO / "shared"}
    if args.ref:
        variants = {"ref": compare.export_shared(args.ref, work / "ref"), **variants}
    servers = bench.Servers("nginx", work)
    sites = {}
    for pages in args.pages:
        root = work / f"corpus-{pages}"
        _, base = servers.add(root)
        corpus.generate_synthetic(root, base, pages, profile=args.profile)
        sites[pages] = base
    servers.start()
    results: dict[str, dict[str, Any]] = {}
    try:
        for pages, base in sites.items():
            for name, shared in variants.items():
                label = f"{name}-{pages}"
                data = bench.gleaner_crawl(base, work / f"data-{label}", work / f"run-{label}.json", pages * 2 + 100,
                                           shared)
                results[label] = {k: data.get(k) for k in (
                    "pages_fetched", "crawl_seconds", "peak_rss_mb", "peak_rss_main_mb", "peak_rss_children_mb",
                    "peak_rss_postgres_mb", "main_rss_after_stage_mb", "cpu_seconds")}
                print(json.dumps({label: results[label]}), flush=True)
    finally:
        servers.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        args.out.write_text(json.dumps({"profile": args.profile, "ref": args.ref, "commit": bench.git_commit(),
                                        "machine": bench.machine(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
