"""What row-level security through parent rows costs a first crawl: two source trees, same site, timed.

    PYTHONPATH=shared .venv/bin/python infra/bench/rls_cost.py --before OTHER/shared [--after shared] \
        [--toggle] [--pages 300] [--rounds 2] [--out FILE]

With ``--toggle`` both runs use ``--after``'s tree, one with the parent-row policies of
``gleaner.store.access.rls.PARENT_POLICIES`` switched off before the crawl: the policies' own cost, apart
from any other change between the trees.

Serves the tests' generated site (``--pages`` article pages, one section) on loopback and runs
``gleaner_run.py`` (the benchmark's one-crawl harness: embedded PostgreSQL, in-process bus) once
per round for each tree, alternating, each with a fresh GLEANER_HOME. Prints, per tree, the median
crawl seconds and the seconds each stage's handlers spent (ingest is where canonical texts, spans
and their links are written; scrape and snapshot write the ledger and the versions).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.generated_site import generated_site  # noqa: E402  (the tests' deterministic site)

# Run in the crawl's environment before it: migrate, then switch the parent-row policies off.
_WITHOUT_PARENT_RLS = """
from gleaner.app import Deps
from gleaner.settings.config import Settings
from gleaner.store.access.rls import ADMIN_OPTION, PARENT_POLICIES
import os, sqlalchemy as sa
deps = Deps(Settings.from_env(os.environ))
with deps.metadata.engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
    for table in PARENT_POLICIES:
        conn.execute(sa.text(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY"))
    conn.commit()
deps.close()
"""


def one_crawl(shared: Path, url: str, pages: int, without_parent_rls: bool = False) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="rls-cost-") as home:
        out = Path(home) / "report.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
        env.update({"PYTHONPATH": str(shared), "GLEANER_HOME": home, "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8",
                    "GLEANER_HOST_DELAY": "0", "GLEANER_HOST_CONCURRENCY": "8"})
        if without_parent_rls:
            subprocess.run([sys.executable, "-c", _WITHOUT_PARENT_RLS], env=env, check=True)
        subprocess.run([sys.executable, str(ROOT / "infra/bench/gleaner_run.py"), url, "--limit", str(pages + 10),
                        "--out", str(out), "--site-domain", "bench.local"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, default=ROOT / "shared")
    parser.add_argument("--after", type=Path, default=ROOT / "shared")
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--toggle", action="store_true", help="--after's tree without, then with, parent RLS")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, object]]] = {"before": [], "after": []}
    with generated_site(args.pages, max_seconds=3600) as site:
        for _ in range(args.rounds):
            for name, shared in (("before", args.before), ("after", args.after)):
                tree = args.after if args.toggle else shared
                runs[name].append(one_crawl(tree.resolve(), site.url + "/", args.pages,
                                            without_parent_rls=args.toggle and name == "before"))
    summary = {}
    for name, reports in runs.items():
        stages = sorted({k for r in reports for k in r["stage_seconds"]})  # type: ignore[union-attr]
        summary[name] = {
            "crawl_seconds": statistics.median(float(r["crawl_seconds"]) for r in reports),  # type: ignore[arg-type]
            "fetched": [r["pages_fetched"] for r in reports],
            "stage_seconds": {s: statistics.median(float(r["stage_seconds"].get(s, 0.0))  # type: ignore[union-attr]
                                                   for r in reports) for s in stages},
        }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"pages": args.pages, "rounds": args.rounds, "summary": summary,
                                        "runs": runs}, indent=1, default=str))


if __name__ == "__main__":
    main()
