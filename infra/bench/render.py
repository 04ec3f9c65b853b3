"""Rendered pages/s on a loopback SPA site with one warm browser and its pages reused, beside plain
fetches of the same pages on the same host.

Each rendered page is fetched by the Fetcher, then rendered: its script and its JSON ``fetch()`` are
answered by the same Fetcher (three requests a page). The plain figure is the Fetcher alone on the
same documents. The browser's launch is timed apart and left out of the rate (it happens once per
process). With ``--sites N`` the pages are spread over N loopback sites (one port each), so each
site renders in a browser context of its own (render/contexts.py) and the rate includes opening them.

    PYTHONPATH=shared python infra/bench/render.py [--pages 40] [--concurrency 2] [--sites 1] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.render_site import SHELL, render_site

from gleaner.demosite.testsite import Page
from gleaner.fetch import loop
from gleaner.fetch.fetcher import Fetcher
from gleaner.fetch.types import FetchRequest
from gleaner.render.browser import BrowserRenderer
from gleaner.settings.config import Settings, parse_networks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=2, help="pages rendered at once (one browser)")
    parser.add_argument("--sites", type=int, default=1, help="loopback sites the pages are spread over")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="gleaner-bench-render.")),
                        allow_networks=parse_networks("127.0.0.1/32"), host_delay=0.0, host_concurrency=8,
                        fetch_timeout=10.0)
    renderer = BrowserRenderer(concurrency=args.concurrency)
    with contextlib.ExitStack() as held:
        sites = [held.enter_context(render_site(max_seconds=600)) for _ in range(max(1, args.sites))]
        paths = [f"/app/p{i}" for i in range(args.pages)]
        for i, path in enumerate(paths):
            sites[i % len(sites)].pages[path] = Page(SHELL)
        urls = [sites[i % len(sites)].url + p for i, p in enumerate(paths)]
        with Fetcher(settings) as fetcher:
            for site in sites:
                fetcher.robots(site.url + "/")
            started = time.monotonic()
            plain = list(fetcher.fetch_many(FetchRequest(u, key=u) for u in urls))
            plain_seconds = time.monotonic() - started
            assert all(r.ok for r in plain), [r.reason for r in plain if not r.ok][:3]

            launch_started = time.monotonic()
            renderer.render(plain[0], fetcher)  # launches the browser (and warms one page)
            launch_seconds = time.monotonic() - launch_started

            async def render_all() -> list[object]:
                import asyncio

                return await asyncio.gather(*(renderer.render_async(r, fetcher) for r in plain))

            started = time.monotonic()
            renderings = loop.run(render_all())
            render_seconds = time.monotonic() - started
    renderer.close()
    outcomes: dict[str, int] = {}
    for r in renderings:
        outcomes[str(r.outcome)] = outcomes.get(str(r.outcome), 0) + 1  # type: ignore[attr-defined]
    written = sum(1 for r in renderings if b"App page p" in (r.html or b""))  # type: ignore[attr-defined]
    result = {
        "bench": "render", "pages": args.pages, "concurrency": args.concurrency, "sites": len(sites),
        "plain_fetch_pages_per_s": round(args.pages / plain_seconds, 1),
        "rendered_pages_per_s": round(args.pages / render_seconds, 2),
        "browser_launch_s": round(launch_seconds, 2), "outcomes": outcomes, "content_written": written,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_average_1m": os.getloadavg()[0]},
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
