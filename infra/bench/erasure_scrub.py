"""What an erasure's disk scrub (gleaner.store.scrub) adds, on an embedded home of N pages.

Builds a home by crawling a loopback site of N article pages (about 3 KB of text each), gives every
chunk a vector (random: the cost of rebuilding the HNSW index does not depend on what the vectors
mean), then times one `erase` without the scrub and the scrub after it::

    .venv/bin/python infra/bench/erasure_scrub.py --pages 10000

Prints one JSON object: pages, the knowledge schema's size, the erasure's and the scrub's seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request
from gleaner.settings.config import Settings
from gleaner.settings.envvalues import parse_networks
from gleaner.store.access.rls import ADMIN_OPTION
from gleaner.store.documents.erasure import erase_document
from gleaner.store.scrub import scrub_after_erasure

WORDS = ("harbour", "ferry", "pier", "channel", "dredging", "budget", "committee", "timetable", "storm", "winter",
         "repair", "northern", "crawler", "snapshot", "provenance", "version", "canonical", "markdown", "archive",
         "feed", "policy", "ledger", "citation")


def article(rng: random.Random, i: int) -> str:
    paragraphs = "".join(
        "<p>" + " ".join(rng.choice(WORDS) for _ in range(70)) + ".</p>" for _ in range(6))
    return (f"<!doctype html><html><head><title>Article {i}</title></head><body><main><article>"
            f"<h1>Article {i}</h1>{paragraphs}</article></main></body></html>")


def pages(n: int, base: str) -> dict[str, Page]:
    rng = random.Random(7)
    served = {f"/a/{i}": Page(article(rng, i)) for i in range(n)}
    served["/"] = Page("<html><body><a href='/a/0'>first</a></body></html>")
    served["/robots.txt"] = Page(f"User-agent: *\nAllow: /\nSitemap: {base}/sitemap.xml\n", content_type="text/plain")
    urls = "".join(f"<url><loc>{base}/a/{i}</loc></url>" for i in range(n))
    served["/sitemap.xml"] = Page(f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                                  f"{urls}</urlset>", content_type="application/xml")
    return served


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gleaner-scrub-") as tmp:
        settings = Settings(data_dir=Path(tmp) / "home", allow_networks=parse_networks("127.0.0.0/8"),
                            host_delay=0.0, host_concurrency=8, default_limit=args.pages + 10)
        deps = Deps(settings)
        served: dict[str, Page] = {}
        with TestSite(served, max_seconds=7200, max_requests=10 * args.pages + 100) as site:
            served.update(pages(args.pages, site.url))
            started = time.monotonic()
            run = crawl(deps, new_request(site.url + "/", site_domain="bench.test", limit=args.pages + 10))
            crawled = time.monotonic() - started
            assert run["fetched"] >= args.pages, run
            with deps.engine.connect().execution_options(isolation_level="AUTOCOMMIT", **{ADMIN_OPTION: True}) as c:
                c.exec_driver_sql("UPDATE knowledge.text_chunks AS t SET embedding = (SELECT array_agg(random())::"
                                  "public.vector(384) FROM generate_series(1, 384) WHERE t.ctid IS NOT NULL)")
                chunks = c.execute(sa.text("SELECT count(*) FROM knowledge.text_chunks")).scalar_one()
                size = c.execute(sa.text(
                    "SELECT sum(pg_total_relation_size(format('%I.%I', schemaname, tablename)))"
                    " FROM pg_tables WHERE schemaname = 'knowledge'")).scalar_one()
                c.exec_driver_sql("CHECKPOINT")
            with tenancy.all_tenants():  # as the CLI's erase does
                document = deps.provenance.document_at(site.url + "/a/1", "bench.test")
            started = time.monotonic()
            with tenancy.all_tenants():
                erase_document(deps.provenance, deps.blobs, deps.blocklist, document["id"], "bench", "bench")
            erased = time.monotonic() - started
            report = scrub_after_erasure(deps.engine)
        deps.close()
    print(json.dumps({"pages": args.pages, "fetched": run["fetched"], "crawl_seconds": round(crawled, 1),
                      "chunks": chunks, "knowledge_mb": round(int(size) / 2**20, 1),
                      "erase_seconds": round(erased, 2), "scrub_seconds": round(report.seconds, 2),
                      "scrub_tables": report.tables, "wal_segments_left": report.wal_segments_left}))


if __name__ == "__main__":
    main()
