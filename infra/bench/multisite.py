"""Profile ``multi-site``: N loopback hosts crawled politely at once, Gleaner beside Scrapy.

Each host is its own address (127.0.0.2, 127.0.0.3, ...) with its own robots.txt, sitemap and PAGES
article pages, served by this process (every request logged with its arrival time). Then, one after
the other over the same hosts:

- Gleaner: ``gleaner sites add URL --every 1h --delay D`` for every host (one setup process, not timed),
  then ``gleaner tick --json``, timed as a whole process (the embedded PostgreSQL's start included);
- Scrapy: ``multisite_scrapy.py``, one process, one slot per host at the same delay, trafilatura in parse.

Reported per tool: the process's wall time, the crawl's span (its first request to its last, from the
servers' logs), peak RSS of the process tree, its CPU seconds (Gleaner's: the main process, the
extraction workers and PostgreSQL apart), and each host's smallest gap between two requests. The
politeness floor is (PAGES + 1) x D: a host's robots.txt, sitemap and pages, one start per delay. With
``--busy K``, K other processes spin a core each while both tools run: a machine shared with other work.

    PYTHONPATH=shared .venv/bin/python infra/bench/multisite.py --hosts 5 --pages 30 --delay 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, suppress
from itertools import pairwise
from pathlib import Path
from typing import Any

import psutil
from procsample import BusyLoops, PeakRss, busy_by_second

from gleaner.demosite.testsite import Page, TestSite

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


def timed(cmd: list[str], env: dict[str, str], pgdata: str | None = None
          ) -> tuple[float, float, PeakRss, subprocess.CompletedProcess[str]]:
    """The process's start (monotonic), wall time, peak RSS (and CPU, with ``pgdata``) and outcome."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rss = PeakRss(proc.pid, pgdata)
    out, err = proc.communicate(timeout=3600)
    wall = time.monotonic() - started
    rss.stop()
    return started, wall, rss, subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def spacing(sites: list[TestSite], since: list[int], delay: float, started: float) -> dict[str, Any]:
    """The crawl's span, every host's gaps between requests (the smallest; the mean above the delay: the
    engine's own cost per page), and when the first request came after the process started."""
    gaps, firsts, lasts, over = [], [], [], []
    for site, start in zip(sites, since, strict=True):
        times = [r.at for r in site.log[start:]]
        if not times:
            continue
        firsts.append(times[0])
        lasts.append(times[-1])
        between = [b - a for a, b in pairwise(times)]
        gaps.append(min(between, default=float("inf")))
        if between:
            over.append(statistics.fmean(between) - delay)
    return {"span_seconds": round(max(lasts) - min(firsts), 2), "min_gap_seconds": round(min(gaps), 3),
            "mean_gap_over_delay_seconds": round(statistics.fmean(over), 3),
            "worst_host_mean_gap_over_delay_seconds": round(max(over), 3),
            "first_request_after_start_seconds": round(min(firsts) - started, 2),
            "last_request_after_start_seconds": round(max(lasts) - started, 2),
            "requests": sum(len(s.log) - n for s, n in zip(sites, since, strict=True))}


def timeline(trace: dict[str, Any], started: float, sites: list[TestSite], since: list[int]) -> dict[str, Any]:
    """Where the tick's process time went (multisite_trace.py's moments), seconds after the process start."""
    def at(t: float) -> float:
        return round(t - started, 2)

    stages: dict[str, list[float]] = {}
    for topic, _run, begin, end, *_more in trace["stages"]:
        first_last = stages.setdefault(topic, [begin, end])
        first_last[0], first_last[1] = min(first_last[0], begin), max(first_last[1], end)
    first_pages = [next((r.at for r in site.log[n:] if r.path.startswith("/p/")), None)
                   for site, n in zip(sites, since, strict=True)]
    first_pages_at = [t for t in first_pages if t is not None]
    out: dict[str, Any] = {"imports_done": at(trace["imports"])}
    if trace.get("database"):
        out["database_ready"] = at(max(end for _begin, end in trace["database"]))
    if "extract_ready" in trace:
        out["extract_warm_called"] = at(trace["extract_warm"])
        out["extract_ready"] = at(trace["extract_ready"])
    out["stages"] = {topic: [at(a), at(b)] for topic, (a, b) in stages.items()}
    if first_pages_at:
        out["first_page_request"] = [at(min(first_pages_at)), at(max(first_pages_at))]
    for name in ("notify", "summaries", "board_exit", "embed", "close", "database_stop"):
        if trace.get(name):
            out[name] = [at(min(b for b, _e in trace[name])), at(max(e for _b, e in trace[name]))]
    out["exit"] = at(trace["exit"])
    # The first host's first requests: what map and sample ask before scrape's pages.
    out["first_host_requests"] = [[r.path, at(r.at)] for r in sites[0].log[since[0]:since[0] + 6]]
    return out


SETUP = """import os, sys
from gleaner import tenancy
from gleaner.app import Deps
from gleaner.settings.config import Settings
from gleaner.operator.sites import add_site
deps = Deps(Settings.from_env(os.environ))
with tenancy.all_tenants():
    for url in sys.argv[2:]:
        add_site(deps, url, every="1h", delay=float(sys.argv[1]))
deps.close()
"""


# Imports read compiled bytecode, as after a pip install: this machine's PYTHONDONTWRITEBYTECODE made every
# process (Gleaner's, its extraction workers', Scrapy's) compile its imports from source each time. The
# prefix keeps the bytecode out of the trees measured; the first process of each tool fills it.
PYCACHE = Path(tempfile.gettempdir()) / "gleaner-bench-pycache"


def tool_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


class Homes:
    """Each tool's working directory, under ``--home-in``, all removed together when the bench ends.

    Removed one by one, each run's home went just before the next tool's run, and that run paid for it:
    on ext4 without a journal (this machine's root file system), making a file or directory skips every
    inode freed in the last minute or more (the figures are in README.md, "Where the homes are")."""

    def __init__(self, under: Path | None) -> None:
        self.under = under
        self.made: list[str] = []

    def new(self, prefix: str) -> str:
        home = tempfile.mkdtemp(prefix=prefix, dir=self.under)
        self.made.append(home)
        return home

    def remove(self) -> None:
        for home in self.made:
            wait_for_postgres_gone(home)
            shutil.rmtree(home, ignore_errors=True)
        self.made.clear()


def wait_for_postgres_gone(pgdata: str, seconds: float = 60.0) -> None:
    """Wait until no PostgreSQL process names ``pgdata``: Gleaner's exit does not wait for the embedded server's
    shutdown checkpoint (store/backends/embedded.py), so removing the data dir at once races the server's
    last writes."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = []
        for proc in psutil.process_iter(["cmdline"]):
            with suppress(psutil.Error, TypeError):
                if pgdata in " ".join(proc.info["cmdline"] or ()):
                    alive.append(proc)
        if not alive:
            return
        time.sleep(0.1)


def gleaner(sites: list[TestSite], delay: float, python: str, shared: Path, homes: Homes, *, embed: bool,
            trace: bool, statements: bool = False, keep: Path | None = None) -> dict[str, Any]:
    """``sites add`` every host (untimed), then one timed ``gleaner tick --json``, with the code under ``shared``."""
    home = homes.new("bench-multisite-")
    env = tool_env()
    env.update(GLEANER_HOME=home, GLEANER_ALLOW_NETWORKS="127.0.0.0/8",
               GLEANER_EMBED_AFTER_CRAWL="true" if embed else "false",
               PYTHONPATH=str(shared) + os.pathsep + env.get("PYTHONPATH", ""))
    subprocess.run([python, "-c", SETUP, str(delay), *[s.url + "/" for s in sites]], env=env, check=True)
    since = [len(s.log) for s in sites]
    command = [python, "-m", "gleaner.cli", "tick", "--json"]
    if trace:
        env["MULTISITE_TRACE"] = str(Path(home) / "trace.json")
        command = [python, str(HERE / "multisite_trace.py"), "tick", "--json"]
    elif statements:
        env["MULTISITE_STATEMENTS"] = str(Path(home) / "statements.json")
        command = [python, str(HERE / "multisite_statements.py"), "tick", "--json"]
    started, wall, rss, done = timed(command, env, pgdata=home)
    wait_for_postgres_gone(home)
    if done.returncode != 0:
        raise SystemExit(f"gleaner tick failed ({done.returncode}): {done.stderr[-2000:]}")
    runs = json.loads(done.stdout)["runs"]
    pages = sum(r["fetched"] for r in runs)
    result = {"process_seconds": round(wall, 2), "peak_rss_mb": round(rss.peak / 2**20),
              "pages": pages, "statuses": sorted({r["status"] for r in runs}),
              "cpu_seconds": {k: round(v, 2) for k, v in rss.cpu.items()},
              "cpu_ms_per_page": round(sum(rss.cpu.values()) * 1000 / max(1, pages), 1),
              "machine_busy_percent_by_second": busy_by_second(rss.busy, started),
              **spacing(sites, since, delay, started)}
    if statements:
        counted = json.loads(Path(env["MULTISITE_STATEMENTS"]).read_text())
        result["statements"] = counted["statements"]
        result["transactions"] = counted["transactions"]
        result["statement_counts"] = counted
    if trace:
        result["timeline"] = timeline(json.loads(Path(env["MULTISITE_TRACE"]).read_text()), started, sites,
                                      since)
    if keep is not None:
        _keep(keep, started, sites, since, Path(env["MULTISITE_TRACE"]) if trace else None)
    return result


def _keep(keep: Path, started: float, sites: list[TestSite], since: list[int], trace: Path | None) -> None:
    """Leave the raw timeline for a closer look: every request (host, path, seconds after the process start)
    and, with ``--trace``, the tick's moments as multisite_trace.py wrote them (``start`` is its own clock)."""
    keep.mkdir(parents=True, exist_ok=True)
    requests = [[n, r.path, round(r.at - started, 3)] for n, (site, first) in enumerate(zip(sites, since, strict=True))
                for r in site.log[first:]]
    (keep / "requests.json").write_text(json.dumps({"started": started, "requests": requests}))
    if trace is not None:
        (keep / "trace.json").write_text(trace.read_text())


def scrapy(sites: list[TestSite], delay: float, python: str, homes: Homes) -> dict[str, Any]:
    home = homes.new("bench-multisite-scrapy-")
    since = [len(s.log) for s in sites]
    out = Path(home) / "scrapy.json"
    env = tool_env()
    started, wall, rss, done = timed([python, str(HERE / "multisite_scrapy.py"), ",".join(s.url for s in sites),
                                      "--delay", str(delay), "--out", str(out)], {**env, "PYTHONPATH": str(HERE)},
                                     pgdata=home)
    if done.returncode != 0:
        raise SystemExit(f"scrapy failed ({done.returncode}): {done.stderr[-2000:]}")
    return {"process_seconds": round(wall, 2), "peak_rss_mb": round(rss.peak / 2**20),
            "cpu_seconds": round(rss.cpu["main"] + rss.cpu["workers"], 2),
            "pages": json.loads(out.read_text())["pages"],
            "machine_busy_percent_by_second": busy_by_second(rss.busy, started),
            **spacing(sites, since, delay, started)}


def run(hosts: int, pages: int, delay: float, python: str, homes: Homes, *, embed: bool = False, trace: bool = False,
        baseline: Path | None = None, statements: bool = False, scrapy_too: bool = True,
        keep: Path | None = None) -> dict[str, Any]:
    """One N: Gleaner (and the baseline tree's Gleaner, if given), then Scrapy, over the same hosts."""
    with ExitStack() as stack:
        sites = []
        for n in range(hosts):
            served: dict[str, Page] = {}
            site = stack.enter_context(TestSite(served, host=f"127.0.0.{n + 2}", max_seconds=3600,
                                                max_requests=100_000))
            served.update(host_pages(n, site.url, pages))
            sites.append(site)
        results: dict[str, Any] = {"hosts": hosts, "pages_per_host": pages, "delay": delay,
                                   "floor_seconds": round((pages + 1) * delay, 2), "load_before": os.getloadavg()}
        if baseline is not None:
            results["baseline"] = gleaner(sites, delay, python, baseline, homes, embed=embed, trace=trace,
                                          statements=statements, keep=keep and keep / f"{hosts}-baseline")
        results["gleaner"] = gleaner(sites, delay, python, REPO / "shared", homes, embed=embed, trace=trace,
                                     statements=statements, keep=keep and keep / f"{hosts}-gleaner")
        if not scrapy_too:
            return results
        results["scrapy"] = scrapy(sites, delay, python, homes)
        g, s, floor = results["gleaner"], results["scrapy"], results["floor_seconds"]
        results["ratios"] = {
            "gleaner_over_scrapy_process": round(g["process_seconds"] / s["process_seconds"], 2),
            "gleaner_over_scrapy_span": round(g["span_seconds"] / s["span_seconds"], 2),
            "gleaner_span_over_floor": round(g["span_seconds"] / floor, 2),
            "gleaner_process_over_floor": round(g["process_seconds"] / floor, 2),
            "scrapy_span_over_floor": round(s["span_seconds"] / floor, 2),
            "scrapy_process_over_floor": round(s["process_seconds"] / floor, 2),
        }
        if baseline is not None:
            b = results["baseline"]
            results["ratios"]["gleaner_over_baseline_process"] = round(g["process_seconds"] / b["process_seconds"], 2)
            results["ratios"]["gleaner_over_baseline_span"] = round(g["span_seconds"] / b["span_seconds"], 2)
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[5])
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--out", type=Path, help="write the results JSON here")
    parser.add_argument("--embed", action="store_true",
                        help="let tick embed its new chunks for search too (Scrapy does nothing like it)")
    parser.add_argument("--trace", action="store_true", help="add the tick's timeline (multisite_trace.py)")
    parser.add_argument("--statements", action="store_true",
                        help="count SQL statements and transactions per stage (multisite_statements.py)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="leave each Gleaner run's request log (and --trace's raw timeline) under DIR")
    parser.add_argument("--no-scrapy", action="store_true", help="Gleaner (and the baseline) only")
    parser.add_argument("--baseline", type=Path, metavar="SHARED",
                        help="also time the Gleaner of another tree's shared/ (before/after in one command)")
    parser.add_argument("--home-in", type=Path, metavar="DIR",
                        help="make each tool's working directory (Gleaner's home) under DIR (default: the temp dir)")
    parser.add_argument("--busy", type=int, default=0, metavar="K",
                        help="keep K other processes spinning a core each while both tools run (a shared machine)")
    args = parser.parse_args()
    if max(args.hosts) > 250:
        raise SystemExit("at most 250 hosts (127.0.0.2 .. 127.0.0.251)")
    report: dict[str, Any] = {"profile": "multi-site", "embed_after_crawl": args.embed,
                              "machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg(),
                                          "busy_loops": args.busy},
                              "home_in": str(args.home_in or tempfile.gettempdir()), "runs": []}
    homes = Homes(args.home_in)
    try:
        with BusyLoops(args.busy):
            for hosts in args.hosts:
                result = run(hosts, args.pages, args.delay, sys.executable, homes, embed=args.embed,
                             trace=args.trace, baseline=args.baseline, statements=args.statements,
                             scrapy_too=not args.no_scrapy, keep=args.keep)
                report["runs"].append(result)
                print(json.dumps(result), flush=True)
    finally:
        homes.remove()
    report["machine"]["load_after"] = os.getloadavg()
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
