"""What composite documents cost search: ``python infra/bench/composite_search.py [--composites N] [--queries N]``.

One embedded PostgreSQL (pgserver, with pgvector), the paraphrase topic site (22 pages,
tests/integration/paraphrase_site.py) crawled and embedded, then ``--composites`` composites of two
pages each (gleaner.operator.routing.create_composite), ingested and embedded. Searches of the
paraphrase questions (operator scope) are timed with the composites searchable and not (their
``rag`` routings enabled or disabled: the same database, the same chunks), in the order off, on, on,
off: ``search()`` end to end (query embedding included) and ``composite_hits`` alone (given the
query's vector), p50/p95 of each, and the ratio on/off. The load average is reported at the start
and the end: the machine is shared. Prints one JSON object (``--out`` also writes it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrieval import REPO, _deps

from gleaner import tenancy
from gleaner.retrieval import search
from gleaner.retrieval.index import embed_pending
from gleaner.runtime.runner import crawl, new_request

SITE = "topics.test"


def _timings(fn: Any, questions: list[str], queries: int) -> list[float]:
    out = []
    for i in range(queries):
        started = time.perf_counter()
        fn(questions[i % len(questions)])
        out.append((time.perf_counter() - started) * 1000)
    return out


def _pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * p))], 2)


def measure(server: Any, work: Path, composites: int, queries: int) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from tests.integration.paraphrase_site import QUESTIONS, TOPICS, topic_pages

    from gleaner.cli.operating import drain_local
    from gleaner.demosite.testsite import TestSite
    from gleaner.operator.routing import create_composite
    from gleaner.retrieval.composites import composite_hits

    deps = _deps(server, "composites", work)
    questions = list(QUESTIONS)
    with TestSite(topic_pages(), max_seconds=1800) as site:
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
        paths = list(TOPICS)
        for i in range(composites):
            create_composite(deps, SITE, f"Notes {i}", [site.url + paths[i % len(paths)],
                                                         site.url + paths[(i * 7 + 1) % len(paths)]])
        drain_local(deps)
    embedded = embed_pending(deps.search_index, deps.embedder)
    model = deps.embedder.model
    vector = "[" + ",".join(f"{x:.6f}" for x in deps.embedder.embed(["warm"])[0]) + "]"
    samples: dict[str, dict[str, list[float]]] = {"off": {"search": [], "composite_hits": []},
                                                  "on": {"search": [], "composite_hits": []}}
    for state in ("off", "on", "on", "off"):
        with deps.engine.begin() as conn:
            conn.execute(sa.text("UPDATE knowledge.document_routings SET enabled = :e"
                                 " WHERE composite_document_id IS NOT NULL"), {"e": state == "on"})
        samples[state]["search"] += _timings(lambda q: search(deps, q, limit=10), questions, queries)
        samples[state]["composite_hits"] += _timings(
            lambda q: composite_hits(deps, q, vector, model, None, 10), questions, queries)
    deps.close()
    report: dict[str, Any] = {"composites": composites, "chunks_embedded": embedded, "queries_per_round": queries}
    for state, kinds in samples.items():
        report[state] = {kind: {"p50_ms": _pct(s, 0.5), "p95_ms": _pct(s, 0.95)} for kind, s in kinds.items()}
    report["search_p50_ratio_on_off"] = round(
        statistics.median(samples["on"]["search"]) / statistics.median(samples["off"]["search"]), 2)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--composites", type=int, default=100)
    parser.add_argument("--queries", type=int, default=44, help="searches per round (four rounds)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), tenancy.all_tenants():
        warnings.simplefilter("ignore")
        import pgserver

        report["load_average_at_start"] = os.getloadavg()
        work = Path(tmp)
        server = pgserver.get_server(work / "pg", cleanup_mode="stop")
        try:
            report.update(measure(server, work, args.composites, args.queries))
        finally:
            server.cleanup()
        report["load_average_at_end"] = os.getloadavg()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
