"""What indexing costs a first crawl, per HNSW graph: ``python infra/bench/crawl_graph.py [--pages N]``.

The first crawl of ``retrieval.py`` (the synthetic corpus, standard profile, the static model
embedding inside ingest) into fresh databases, alternated: indexing off, then text_chunks' index
built with each graph of ``GRAPHS`` (the migrations' current one among them), then the same in
reverse. The cost is ``1 - pages/s indexing / pages/s off``, with the load average per crawl.
Prints one JSON object (``--out`` also writes it).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

# retrieval first: importing it puts the repository and shared/ on the path.
from retrieval import _deps, _NoIndex, _owner, _timed  # noqa: I001

from corpus import generate_synthetic
from gleaner import tenancy
from gleaner.retrieval.embedder import EmbedModel, default_embedder
from gleaner.runtime.runner import crawl, new_request
from server import testsite_for

GRAPHS = ((16, 64), (12, 48), (8, 32))


def _graph(server: Any, name: str, m: int, ef: int) -> None:
    """text_chunks' index rebuilt (the table is empty: instantly) with graph (m, ef_construction)."""
    owner = _owner(server, name)
    with owner.connect() as conn:
        conn.execute(sa.text("DROP INDEX knowledge.text_chunks_embedding"))
        conn.execute(sa.text("CREATE INDEX text_chunks_embedding ON knowledge.text_chunks USING hnsw"
                             f" (embedding public.vector_cosine_ops) WITH (m = {m}, ef_construction = {ef})"))
    owner.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=100, help="synthetic pages crawled (each way)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    names = ["index_off"] + [f"m{m}_ef{ef}" for m, ef in GRAPHS]
    order = names + names[::-1]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "load_average_at_start": os.getloadavg(), "order": order}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), tenancy.all_tenants():
        warnings.simplefilter("ignore")
        import pgserver

        work = Path(tmp)
        server = pgserver.get_server(work / "pg", cleanup_mode="stop")
        default_embedder(EmbedModel.STATIC)  # loading is once per process: not timed
        (work / "empty").mkdir()
        try:
            with testsite_for(work / "empty", max_seconds=3600) as site:  # its address first: sitemaps name it
                generate_synthetic(work / "corpus", site.url, args.pages)
                site.pages.update(testsite_for(work / "corpus").pages)
                for turn, name in enumerate(order):
                    deps = _deps(server, f"crawl{turn}", work)
                    if name == "index_off":
                        deps.__dict__["search_index"] = _NoIndex()
                    else:
                        m, ef = GRAPHS[names.index(name) - 1]
                        _graph(server, f"crawl{turn}", m, ef)
                    inside = _timed(deps.search_index)
                    started = time.perf_counter()
                    summary = crawl(deps, new_request(site.url + "/", site_domain="bench.test"))
                    seconds = time.perf_counter() - started
                    runs[name].append({"pages": summary["fetched"], "seconds": round(seconds, 2),
                                       "pages_per_s": round(summary["fetched"] / seconds, 2),
                                       "seconds_in_index_snapshots": round(inside[0], 2),
                                       "load": os.getloadavg()[0]})
                    print(json.dumps({name: runs[name][-1]}), file=sys.stderr)
                    deps.close()
        finally:
            server.cleanup()
    rate = {k: sum(r["pages"] for r in v) / sum(r["seconds"] for r in v) for k, v in runs.items()}
    report["runs"] = runs
    report["pages_per_s"] = {k: round(v, 2) for k, v in rate.items()}
    # The target: what indexing, embedding included, costs the first crawl's throughput.
    report["crawl_cost_of_indexing"] = {k: round(1 - rate[k] / rate["index_off"], 3) for k in names[1:]}
    report["indexing_share_of_crawl_seconds"] = {
        k: round(sum(r["seconds_in_index_snapshots"] for r in runs[k]) / sum(r["seconds"] for r in runs[k]), 3)
        for k in names[1:]}
    report["load_average_at_end"] = os.getloadavg()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
