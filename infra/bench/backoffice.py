"""How long the back office takes to answer on a large site: ``python infra/bench/backoffice.py [--pages N]``.

Seeds one site of N documents (default 20,000; a path tree of 20 sections x 10
folders, one version each) into a fresh embedded PostgreSQL, then times each
page and API call through the WSGI app in-process (median of --repeat). Prints one
JSON object: milliseconds per route.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from gleaner.app import Deps
from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.settings.config import Settings
from gleaner.store.backends import db

SITE = "big.test"


def seed(engine: sa.Engine, pages: int) -> tuple[str, str]:
    with engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO knowledge.documents (site_domain, path, canonical_url, url_hash, status, last_fetched_at)"
            " SELECT :s, p, 'https://big.test' || p, md5(p), 'active', now() FROM ("
            "  SELECT '/section-' || mod(i, 20) || '/folder-' || (mod(i, 200) / 20) || '/page-' || i AS p"
            "  FROM generate_series(1, :n) i) g"), {"s": SITE, "n": pages})
        conn.execute(sa.text(
            "INSERT INTO knowledge.document_snapshots (document_id, version, content_hash, processed_markdown_ref)"
            " SELECT id, 1, md5(path), 'bench/' || id FROM knowledge.documents WHERE site_domain = :s"),
            {"s": SITE})
        conn.execute(sa.text(
            "UPDATE knowledge.documents d SET current_snapshot_id = s.id FROM knowledge.document_snapshots s"
            " WHERE s.document_id = d.id"))
        run = conn.execute(sa.text(
            "INSERT INTO knowledge.crawl_runs (id, site_domain, target_url, status) VALUES (gen_random_uuid(), :s,"
            " 'https://big.test/', 'finished') RETURNING id"), {"s": SITE}).scalar()
        conn.execute(sa.text(
            "INSERT INTO knowledge.crawl_page_decisions (run_id, document_id, decision, fetch_outcome)"
            " SELECT :r, id, 'include', 'fetched' FROM knowledge.documents WHERE site_domain = :s"),
            {"r": run, "s": SITE})
        doc = conn.execute(sa.text("SELECT id FROM knowledge.documents ORDER BY path LIMIT 1")).scalar()
        conn.execute(sa.text("ANALYZE"))
    return str(run), str(doc)


def timed(app: BackofficeApp, path: str, query: str, repeat: int) -> float:
    samples = []
    status: list[str] = []

    def start_response(line: str, headers: Any, exc_info: Any = None) -> None:
        status.append(line)

    for _ in range(repeat):
        environ: dict[str, Any] = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query,
                                   "wsgi.input": io.BytesIO(b""), "HTTP_HOST": "bench"}
        status.clear()
        start = time.perf_counter()
        b"".join(app(environ, start_response))
        samples.append(time.perf_counter() - start)
        if not status[0].startswith("200"):
            raise SystemExit(f"{path}?{query}: {status[0]}")
    return round(statistics.median(samples) * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        server = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        try:
            settings = Settings(data_dir=Path(tmp) / "gleaner", database_url=server.get_uri())
            deps = Deps(settings)
            db.upgrade(deps.engine)
            run, doc = seed(deps.engine, args.pages)
            app = BackofficeApp(deps)
            routes = {
                "/v1/sites": ("/v1/sites", ""),
                "/v1/sites/{site}/tree (root)": (f"/v1/sites/{SITE}/tree", ""),
                "/v1/sites/{site}/tree (a folder)": (f"/v1/sites/{SITE}/tree", "prefix=/section-3/folder-4/"),
                "/v1/sites/{site}/documents (page 50)": (f"/v1/sites/{SITE}/documents",
                                                         "status=active&offset=5000"),
                "/v1/runs/{run}": (f"/v1/runs/{run}", ""),
                "/v1/runs/{run}/urls (page 50)": (f"/v1/runs/{run}/urls", "offset=5000"),
                "/v1/documents/{id}": (f"/v1/documents/{doc}", ""),
                "/ui/": ("/ui/", ""),
                "/ui/sites/{site}": (f"/ui/sites/{SITE}", ""),
                "/ui/runs/{run}": (f"/ui/runs/{run}", ""),
            }
            result = {name: timed(app, path, query, args.repeat) for name, (path, query) in routes.items()}
            deps.close()
        finally:
            server.cleanup()
    json.dump({"pages": args.pages, "median_ms": result}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
