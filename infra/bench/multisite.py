"""Profile ``multi-site``: N loopback hosts crawled politely at once, Gleaner beside Scrapy.

Each host is its own address (127.0.0.2, 127.0.0.3, ...) with its own robots.txt, sitemap and PAGES
article pages, served by this process (every request logged with its arrival time). Then, one after
the other over the same hosts:

- Gleaner: ``gleaner sites add URL --every 1h --delay D`` for every host (one setup process, not timed),
  then ``gleaner tick --json``, timed as a whole process (the embedded PostgreSQL's start included);
- Scrapy: ``multisite_scrapy.py``, one process, one slot per host at the same delay, trafilatura in parse.

Reported per tool: the process's wall time, the crawl's span (its first request to its last, from the
servers' logs), peak RSS of the process tree, and each host's smallest gap between two requests. The
politeness floor is (PAGES + 1) x D: a host's robots.txt, sitemap and pages, one start per delay.

    PYTHONPATH=shared .venv/bin/python infra/bench/multisite.py --hosts 5 --pages 30 --delay 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, suppress
from itertools import pairwise
from pathlib import Path
from typing import Any

import psutil

from gleaner.testsite import Page, TestSite

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WORDS = ["a", "polite", "crawler", "keeps", "every", "host", "at", "its", "own", "pace", "while", "many", "hosts",
         "are", "crawled", "side", "by", "each", "page", "becomes", "markdown", "with", "provenance", "kept"]


def article(host: int, i: int) -> str:
    rng = random.Random(host * 1000 + i)
    paragraphs = "".join("<p>" + " ".join(rng.choice(WORDS) for _ in range(120)) + f" host {host} page {i}.</p>"
                         for _ in range(6))
    return (f"<html><head><title>Host {host} article {i}</title></head><body><article><h1>Article {i}</h1>"
            f"{paragraphs}</article></body></html>")


def host_pages(host: int, base: str, pages: int) -> dict[str, Page]:
    served = {f"/p/{i}": Page(article(host, i)) for i in range(pages)}
    links = "".join(f'<li><a href="/p/{i}">Article {i}</a></li>' for i in range(min(pages, 3)))
    served["/"] = Page(f"<html><head><title>Home {host}</title></head><body><ul>{links}</ul></body></html>")
    served["/robots.txt"] = Page(f"User-agent: *\nAllow: /\nSitemap: {base}/sitemap.xml\n", content_type="text/plain")
    urls = "".join(f"<url><loc>{base}/p/{i}</loc></url>" for i in range(pages))
    served["/sitemap.xml"] = Page(f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                                  f"{urls}</urlset>", content_type="application/xml")
    return served


class PeakRss:
    """The largest summed RSS of a process and its descendants, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(pid,), daemon=True)
        self._thread.start()

    def _sample(self, pid: int) -> None:
        try:
            root = psutil.Process(pid)
        except psutil.Error:
            return
        while not self._stop.wait(0.2):
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                return
            total = 0
            for proc in tree:
                with suppress(psutil.Error):  # a process that just ended
                    total += proc.memory_info().rss
            self.peak = max(self.peak, total)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=2)
        return self.peak


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rss = PeakRss(proc.pid)
    out, err = proc.communicate(timeout=3600)
    wall = time.monotonic() - started
    return wall, rss.stop(), subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def spacing(sites: list[TestSite], since: list[int]) -> dict[str, Any]:
    """The span of the crawl and every host's smallest gap between requests, from the servers' logs."""
    gaps, firsts, lasts = [], [], []
    for site, start in zip(sites, since, strict=True):
        times = [r.at for r in site.log[start:]]
        if not times:
            continue
        firsts.append(times[0])
        lasts.append(times[-1])
        gaps.append(min((b - a for a, b in pairwise(times)), default=float("inf")))
    return {"span_seconds": round(max(lasts) - min(firsts), 2), "min_gap_seconds": round(min(gaps), 3),
            "requests": sum(len(s.log) - n for s, n in zip(sites, since, strict=True))}


def run(hosts: int, pages: int, delay: float, python: str) -> dict[str, Any]:
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="bench-multisite-") as home:
        sites = []
        for n in range(hosts):
            served: dict[str, Page] = {}
            site = stack.enter_context(TestSite(served, host=f"127.0.0.{n + 2}", max_seconds=3600,
                                                max_requests=100_000))
            served.update(host_pages(n, site.url, pages))
            sites.append(site)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
        env.update(GLEANER_HOME=home, GLEANER_ALLOW_NETWORKS="127.0.0.0/8",
                   PYTHONPATH=str(REPO / "shared") + os.pathsep + env.get("PYTHONPATH", ""))
        # What `gleaner sites add URL --every 1h --delay D` does for each host, in one process (as the operator).
        setup = ("import os, sys\nfrom gleaner import tenancy\nfrom gleaner.app import Deps\n"
                 "from gleaner.config import Settings\nfrom gleaner.operator.sites import add_site\n"
                 "deps = Deps(Settings.from_env(os.environ))\n"
                 "with tenancy.all_tenants():\n"
                 "    for url in sys.argv[2:]:\n        add_site(deps, url, every='1h', delay=float(sys.argv[1]))\n"
                 "deps.close()\n")
        subprocess.run([python, "-c", setup, str(delay), *[s.url + "/" for s in sites]], env=env, check=True)
        results: dict[str, Any] = {"hosts": hosts, "pages_per_host": pages, "delay": delay,
                                   "floor_seconds": round((pages + 1) * delay, 2)}

        since = [len(s.log) for s in sites]
        wall, rss, done = timed([python, "-m", "gleaner.cli", "tick", "--json"], env)
        if done.returncode != 0:
            raise SystemExit(f"gleaner tick failed ({done.returncode}): {done.stderr[-2000:]}")
        runs = json.loads(done.stdout)["runs"]
        results["gleaner"] = {"process_seconds": round(wall, 2), "peak_rss_mb": round(rss / 2**20),
                              "pages": sum(r["fetched"] for r in runs),
                              "statuses": sorted({r["status"] for r in runs}), **spacing(sites, since)}

        since = [len(s.log) for s in sites]
        out = Path(home) / "scrapy.json"
        wall, rss, done = timed([python, str(HERE / "multisite_scrapy.py"), ",".join(s.url for s in sites),
                                 "--delay", str(delay), "--out", str(out)], {**env, "PYTHONPATH": str(HERE)})
        if done.returncode != 0:
            raise SystemExit(f"scrapy failed ({done.returncode}): {done.stderr[-2000:]}")
        scrapy = json.loads(out.read_text())
        results["scrapy"] = {"process_seconds": round(wall, 2), "peak_rss_mb": round(rss / 2**20),
                             "pages": scrapy["pages"], **spacing(sites, since)}
        g, s = results["gleaner"], results["scrapy"]
        results["ratios"] = {
            "gleaner_over_scrapy_process": round(g["process_seconds"] / s["process_seconds"], 2),
            "gleaner_over_scrapy_span": round(g["span_seconds"] / s["span_seconds"], 2),
            "gleaner_span_over_floor": round(g["span_seconds"] / results["floor_seconds"], 2),
            "gleaner_process_over_floor": round(g["process_seconds"] / results["floor_seconds"], 2),
            "scrapy_span_over_floor": round(s["span_seconds"] / results["floor_seconds"], 2),
        }
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[5])
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--out", type=Path, help="write the results JSON here")
    args = parser.parse_args()
    if max(args.hosts) > 250:
        raise SystemExit("at most 250 hosts (127.0.0.2 .. 127.0.0.251)")
    report = {"profile": "multi-site", "machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg()},
              "runs": []}
    for hosts in args.hosts:
        result = run(hosts, args.pages, args.delay, sys.executable)
        report["runs"].append(result)
        print(json.dumps(result), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
