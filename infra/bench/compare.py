"""Before/after: Gleaner at another commit against the working tree (or --new REF), on one corpus, in one command.

    PYTHONPATH=shared python infra/bench/compare.py --ref HEAD~1 [--new HEAD] [--pages 2000] [--rounds 2]

Both versions crawl the same nginx-served corpus in turn (A B A B ...): a first
crawl into a fresh data dir, then an unchanged recrawl. Prints each round and
the median ratio working tree / ref, so the figure holds on a noisy machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
import corpus


def export_shared(ref: str, into: Path) -> Path:
    """The shared/ tree of a commit, without touching any work tree."""
    data = subprocess.run(["git", "archive", "--format=tar", ref, "shared"], cwd=bench.REPO, check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "shared"


def served_corpus(prefix: str, pages: int, profile: str, ref: str | None, workdir_in: Path | None = None,
                  new: str | None = None) -> tuple[Path, dict[str, Path], bench.Servers, str]:
    """A new work dir, the variants to crawl (``ref``'s shared/ first when given, then the working tree's, or
    ``new``'s when given) and the synthetic corpus, generated there and served by nginx (started):
    (work, variants, servers, base)."""
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=workdir_in))
    work.chmod(0o755)
    variants = {"new": export_shared(new, work / "new") if new else bench.REPO / "shared"}
    if ref:
        variants = {"ref": export_shared(ref, work / "ref"), **variants}
    servers = bench.Servers("nginx", work)
    root = work / "corpus"
    _, base = servers.add(root)
    corpus.generate_synthetic(root, base, pages, profile=profile)
    servers.start()
    bench.warm_pg_templates(work, variants["new"])
    return work, variants, servers, base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", required=True)
    parser.add_argument("--new", default=None, help="another commit instead of the working tree")
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-recrawl", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gleaner-compare-"))
    work.chmod(0o755)
    variants = {"ref": export_shared(args.ref, work / "ref"),
                "new": export_shared(args.new, work / "new") if args.new else bench.REPO / "shared"}
    servers = bench.Servers("nginx", work)
    root = work / "synthetic"
    _, base = servers.add(root)
    corpus.generate_synthetic(root, base, args.pages)
    servers.start()
    rows: dict[str, dict[str, list[float]]] = {v: {"first": [], "recrawl": [], "rss": []} for v in variants}
    try:
        for r in range(args.rounds):
            for name, shared in variants.items():
                data = work / f"{name}-{r}"
                first = bench.gleaner_crawl(base, data, work / f"{name}-{r}-first.json", args.pages * 2 + 100, shared)
                rows[name]["first"].append(first["crawl_seconds"])
                rows[name]["rss"].append(first["peak_rss_mb"])
                line = (f"round {r} {name}: first {first['crawl_seconds']:.2f} s ({first['pages_per_second']:.1f}"
                        f" pages/s, cpu {first['cpu_seconds']}, stages {first['stage_seconds']})")
                if not args.no_recrawl:
                    again = bench.gleaner_crawl(base, data, work / f"{name}-{r}-again.json", args.pages * 2 + 100,
                                                shared)
                    rows[name]["recrawl"].append(again["crawl_seconds"])
                    line += (f"; recrawl {again['crawl_seconds']:.2f} s, 304s {again['not_modified']}, "
                             f"cpu {again['cpu_seconds']}, stages {again['stage_seconds']}")
                print(line, flush=True)
                shutil.rmtree(data, ignore_errors=True)
    finally:
        servers.stop()
    result = {"ref": args.ref, "new": args.new or "working tree", "pages": args.pages, "rounds": args.rounds,
              "seconds": rows, "ratio_new_over_ref": {}}
    for key in ("first", "recrawl"):
        pairs = [n / o for n, o in zip(rows["new"][key], rows["ref"][key], strict=True) if o]
        if pairs:
            result["ratio_new_over_ref"][key + "_time"] = round(statistics.median(pairs), 3)
    print(json.dumps(result["ratio_new_over_ref"]))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
