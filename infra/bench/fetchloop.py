"""Profile ``fetch-loop``: the fetcher's own CPU per request, many hosts at once, without the stages.

N loopback hosts (127.0.0.2, ...), each serving robots.txt and PAGES article pages, run in a child
process; this process fetches them the way the scrape stage does (a thread per host, one Fetcher each,
``fetch_many`` over the host's pages, one shared HostTable at DELAY), and reports its own CPU seconds
(user + system, the serving process excluded) per request. ``--baseline SHARED`` runs the same in a
second process with the code under SHARED, alternated ROUNDS times, so the figures are ratios.

    PYTHONPATH=shared .venv/bin/python infra/bench/fetchloop.py --hosts 50 --pages 30 --delay 0.2 \\
        --baseline /path/to/other/shared
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def serve(hosts: int, pages: int, seconds: float) -> None:
    """The child: every host up, their URLs on stdout, then serve until stdin closes."""
    from contextlib import ExitStack

    from multisite import host_pages

    from gleaner.demosite.testsite import Page, TestSite

    with ExitStack() as stack:
        urls = []
        for n in range(hosts):
            served: dict[str, Page] = {}
            site = stack.enter_context(TestSite(served, host=f"127.0.0.{n + 2}", max_seconds=seconds,
                                                max_requests=1_000_000))
            served.update(host_pages(n, site.url, pages))
            urls.append(site.url)
        print(json.dumps(urls), flush=True)
        sys.stdin.read()


def client(urls: list[str], pages: int, delay: float) -> dict[str, float]:
    """Fetch every host's robots.txt and pages at once; this process's CPU seconds for it."""
    from gleaner.fetch.fetcher import Fetcher
    from gleaner.fetch.politeness import HostTable
    from gleaner.fetch.types import FetchRequest
    from gleaner.settings.config import Settings

    settings = Settings.from_env({"GLEANER_ALLOW_NETWORKS": "127.0.0.0/8", "GLEANER_HOST_DELAY": str(delay),
                                  "GLEANER_HOME": "/nonexistent-fetchloop-bench"})
    hosts = HostTable(None, requests_in_flight=settings.fetch_concurrency)
    fetched: list[int] = []
    lock = threading.Lock()

    def one_host(url: str) -> None:
        with Fetcher(settings, hosts=hosts) as fetcher:
            got = sum(1 for r in fetcher.fetch_many([FetchRequest(f"{url}/p/{i}", key=i) for i in range(pages)])
                      if r.body)
        with lock:
            fetched.append(got)

    threads = [threading.Thread(target=one_host, args=(u,)) for u in urls]
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    requests = len(urls) * (pages + 1)
    return {"cpu_seconds": round(cpu, 3), "wall_seconds": round(time.monotonic() - started, 2),
            "requests": requests, "pages": sum(fetched), "cpu_ms_per_request": round(cpu * 1000 / requests, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, metavar="SHARED")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.hosts, args.pages, 3600)
    if args.client:
        return print(json.dumps(client(json.loads(args.client), args.pages, args.delay)))
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--hosts", str(args.hosts), "--pages",
                               str(args.pages)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        urls = server.stdout.readline()  # type: ignore[union-attr]
        trees = {"this": HERE.parent.parent / "shared"}
        if args.baseline is not None:
            trees = {"baseline": args.baseline, **trees}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, shared in trees.items():
                env = {**os.environ, "PYTHONPATH": f"{shared}{os.pathsep}{HERE}"}
                done = subprocess.run([sys.executable, __file__, "--client", urls.strip(), "--pages", str(args.pages),
                                       "--delay", str(args.delay)], env=env, capture_output=True, text=True)
                if done.returncode:
                    raise SystemExit(done.stderr[-3000:])
                runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
        result = {"hosts": args.hosts, "pages": args.pages, "delay": args.delay, "load": os.getloadavg(),
                  "runs": runs, "median_cpu_ms_per_request": {
                      name: statistics.median(r["cpu_ms_per_request"] for r in rs) for name, rs in runs.items()}}
        print(json.dumps(result, indent=1))
        if args.out is not None:
            args.out.write_text(json.dumps(result, indent=1) + "\n")
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
