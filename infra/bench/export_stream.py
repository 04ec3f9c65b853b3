"""The streamed export (GET /v1/sites/{site}/export?format=jsonl): memory held while it is sent, and when
the first line arrives.

    PYTHONPATH=shared .venv/bin/python infra/bench/export_stream.py [--pages 600]

Crawls a synthetic site of N article pages (infra/bench/corpus.py, 5-80 KB each) into a fresh
embedded database, then:

- in process, under tracemalloc: the peak of Python allocations while the back office's WSGI body
  is pulled chunk by chunk and dropped (what a server holds while streaming), against the peak
  while the same body is joined whole (what a JSON answer built in memory would hold at least);
- over HTTP through `gleaner serve` (waitress on 127.0.0.1) and `gleaner.client.Gleaner.export`:
  seconds to the first record and to the last.

Prints one JSON object. Everything stops at the end.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.client import Gleaner
from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request
from gleaner.serving.serve import WebhookServer
from gleaner.settings.config import Settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import page_paths, render_page  # the benchmark's own corpus, beside this file

SITE = "export.bench"
SECRET = "export-bench-operator-secret-0123456789abcdef"  # >= 32 characters, as `gleaner serve` asks


def _pages(n: int, base: str) -> dict[str, Page]:
    paths = page_paths(n)
    pages = {path: Page(render_page(1, paths, i)) for i, path in enumerate(paths)}
    links = "".join(f'<a href="{base}{p}">{p}</a> ' for p in paths)
    pages["/"] = Page(f"<html><head><title>Bench</title></head><body><main>{links}</main></body></html>")
    return pages


def _body(app: BackofficeApp) -> Iterable[bytes]:
    environ: dict[str, Any] = {"REQUEST_METHOD": "GET", "PATH_INFO": f"/v1/sites/{SITE}/export",
                               "QUERY_STRING": "format=jsonl", "wsgi.input": io.BytesIO(b""), "HTTP_HOST": "bench"}
    return app(environ, lambda status, headers, exc_info=None: None)


def _peak(fn: Callable[[], int]) -> tuple[int, int]:
    """(bytes the call returned, peak traced bytes above the start) of one call."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    size = fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return size, peak


def _streamed(app: BackofficeApp) -> int:
    body = _body(app)
    size = 0
    for chunk in body:
        size += len(chunk)
    getattr(body, "close", lambda: None)()
    return size


def _joined(app: BackofficeApp) -> int:
    whole = b"".join(_body(app))
    return len(whole)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gleaner-export-bench-") as home, tenancy.all_tenants():
        settings = Settings.from_env({"GLEANER_HOME": home, "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8",
                                      "GLEANER_WEBHOOK_SECRET": SECRET}).with_(
            host_delay=0.0, host_concurrency=8)
        deps = Deps(settings)
        pages: dict[str, Page] = {}
        try:
            with TestSite(pages, max_seconds=1800) as site:
                pages.update(_pages(args.pages, site.url))
                began = time.monotonic()
                run = crawl(deps, new_request(site.url + "/", site_domain=SITE, limit=args.pages + 1))
                crawl_seconds = time.monotonic() - began
            app = BackofficeApp(deps)  # no bearer: in process, the operator
            _streamed(app)  # warm: imports and the connection pool, so neither counts below
            size, streamed_peak = _peak(lambda: _streamed(app))
            _, joined_peak = _peak(lambda: _joined(app))
            with WebhookServer(deps, port=0) as server, Gleaner(server.url, SECRET) as gleaner:
                began = time.monotonic()
                first = None
                records = 0
                for _record in gleaner.export(SITE):
                    first = first or time.monotonic() - began
                    records += 1
                total = time.monotonic() - began
        finally:
            deps.close()
    print(json.dumps({"pages": args.pages, "documents_exported": records, "fetched": run.get("fetched"),
                      "crawl_seconds": round(crawl_seconds, 1), "export_bytes": size,
                      "streamed_peak_bytes": streamed_peak, "joined_peak_bytes": joined_peak,
                      "http_first_record_seconds": round(first or 0.0, 3),
                      "http_all_records_seconds": round(total, 3)}))


if __name__ == "__main__":
    main()
