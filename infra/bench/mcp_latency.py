"""MCP over HTTP (/mcp under gleaner serve) against the plain JSON routes it wraps: latency per call.

    PYTHONPATH=shared .venv/bin/python infra/bench/mcp_latency.py [--calls 100]

Crawls the demo site into a fresh embedded database, serves it on 127.0.0.1, then times, one call
after another on one connection: MCP `get` (a 200-byte slice) vs GET /v1/texts/…, and MCP `search`
vs GET /v1/search. Prints p50/p95 in milliseconds as one JSON object. Everything stops at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import TestSite
from gleaner.runtime.runner import crawl, new_request
from gleaner.serving.serve import WebhookServer
from gleaner.settings.config import Settings

SECRET = "mcp-bench-operator-secret-0123456789abcdef"  # >= 32 characters


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 2)}


async def _timed(calls: int, fn: Callable[[], Awaitable[Any]]) -> list[float]:
    await fn()  # warm: the first call loads what later ones reuse
    out = []
    for _ in range(calls):
        began = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - began)
    return out


async def _measure(url: str, text_hash: str, calls: int) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {SECRET}"}
    results: dict[str, Any] = {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as client, \
            streamable_http_client(url + "/mcp", http_client=client) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        results["mcp_get"] = _summary(await _timed(calls, lambda: session.call_tool(
            "get", {"text_hash": text_hash, "start": 0, "end": 200})))
        results["mcp_search"] = _summary(await _timed(calls, lambda: session.call_tool(
            "search", {"query": "how do I install it", "limit": 5})))
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as plain:
        results["http_texts"] = _summary(await _timed(calls, lambda: plain.get(
            f"/v1/texts/{text_hash}", params={"start": 0, "end": 200})))
        results["http_search"] = _summary(await _timed(calls, lambda: plain.get(
            "/v1/search", params={"q": "how do I install it", "limit": 5})))
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gleaner-mcp-bench-") as home, tenancy.all_tenants():
        settings = Settings.from_env({"GLEANER_HOME": home, "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8",
                                      "GLEANER_WEBHOOK_SECRET": SECRET}).with_(host_delay=0.0)
        deps = Deps(settings)
        pages: dict[str, Any] = {}
        try:
            with TestSite(pages, max_seconds=600) as site:
                pages.update(demo_pages(site.url))
                crawl(deps, new_request(site.url + "/", site_domain="demo.test"))
                doc = deps.metadata.document_by_url(site.url + "/docs/install")
                text = deps.provenance.current_text(str(doc["id"])) if doc else None
                assert text is not None, "the demo crawl ingested no text"
                with WebhookServer(deps, port=0) as server:
                    results = anyio.run(_measure, server.url, text.text_hash, args.calls)
        finally:
            deps.close()
    print(json.dumps({"calls": args.calls, **results}))


if __name__ == "__main__":
    main()
