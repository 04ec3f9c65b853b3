"""Per-host politeness across processes, measured at the server.

Two real processes fetch from one loopback host at the same time, as two function instances
scraping batches of one site would. With the turns shared through PostgreSQL
(GLEANER_SHARED_POLITENESS) the host never sees more than its concurrency in flight, and each
request starts at least the delay after the previous one ended; without them it sees both
processes at once.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from gleaner.demosite.testsite import Page, TestSite

ROOT = Path(__file__).resolve().parents[2]
DELAY = 0.3
PAGE_SECONDS = 0.35
PAGES_EACH = 5

FETCH_SCRIPT = """
import json, os, sys
from gleaner.app import Deps
from gleaner.settings.config import Settings, parse_networks
from gleaner.fetch.types import FetchRequest

settings = Settings(database_url=os.environ["DB"], data_dir=__import__("pathlib").Path(os.environ["DATA"]),
                    allow_networks=parse_networks("127.0.0.0/8"), host_delay=float(os.environ["DELAY"]),
                    host_concurrency=1, fetch_timeout=5.0, shared_politeness=os.environ["SHARED"] == "1")
deps = Deps(settings)
deps.metadata  # connect (and migrate) before the start line, so both processes start together
print("ready", flush=True)
sys.stdin.readline()  # the test says go once both processes are ready
with deps.new_fetcher() as fetcher:
    urls = [os.environ["SITE"] + f"/{os.environ['NAME']}{i}" for i in range(int(os.environ["N"]))]
    print(json.dumps(sorted(str(r.outcome) for r in fetcher.fetch_many(FetchRequest(u) for u in urls))))
deps.close()
"""


class TimedSite(TestSite):
    """Every page takes longer than the delay; the server records when each request started and ended.

    A page outlasting the delay keeps each process busy more than half of the time, so two
    processes that do not share their turns must overlap at the host.
    """

    def __init__(self, names: list[str]) -> None:
        self.spans: list[tuple[float, float, str]] = []
        self._spans_lock = threading.Lock()
        pages = {f"/{name}{i}": Page("", handler=self._slow) for name in names for i in range(PAGES_EACH)}
        pages["/robots.txt"] = Page("", handler=self._slow)
        super().__init__(pages, max_seconds=60, max_requests=200)

    def _slow(self, h: BaseHTTPRequestHandler) -> None:
        started = time.monotonic()
        time.sleep(PAGE_SECONDS)
        body = b"<html><body>ok</body></html>"
        kind = "text/plain" if h.path == "/robots.txt" else "text/html"
        with self._spans_lock:
            self.spans.append((started, time.monotonic(), h.path))
        h.send_response(200)
        h.send_header("Content-Type", kind)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


def _crawl_from_two_processes(database_url: str, tmp_path: Path, shared: bool) -> TimedSite:
    site = TimedSite(["a", "b"]).start()
    procs = []
    for name in ("a", "b"):
        env = {**os.environ, "DB": database_url, "DATA": str(tmp_path / name), "DELAY": str(DELAY),
               "SHARED": "1" if shared else "0", "SITE": site.url, "NAME": name,
               "N": str(PAGES_EACH), "PYTHONPATH": str(ROOT / "shared")}
        procs.append(subprocess.Popen([sys.executable, "-c", FETCH_SCRIPT], env=env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-3000:]
            assert json.loads(out.strip().splitlines()[-1]) == ["fetched"] * PAGES_EACH
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        site.stop()
    return site


def _most_in_flight(spans: list[tuple[float, float, str]]) -> int:
    edges = sorted([(start, 1) for start, _, _ in spans] + [(end, -1) for _, end, _ in spans])
    most = now = 0
    for _, step in edges:  # an end sorts before a start at the same instant (-1 < 1)
        now += step
        most = max(most, now)
    return most


def test_two_processes_take_turns_on_one_host_through_the_database(database_url, tmp_path):
    site = _crawl_from_two_processes(database_url, tmp_path, shared=True)
    spans = sorted(site.spans)
    pages = [path for _, _, path in spans if path != "/robots.txt"]
    assert len(pages) == 2 * PAGES_EACH
    assert _most_in_flight(spans) == 1
    gaps = [later[0] - earlier[1] for earlier, later in itertools.pairwise(spans)]
    # Each start waits the delay after the previous request ended (a few ms of loopback jitter aside).
    assert min(gaps) >= DELAY - 0.02, gaps
    # And the two processes interleaved rather than one waiting for the other to finish everything.
    firsts = "".join(path[1] for path in pages)
    assert "ab" in firsts or "ba" in firsts


def test_without_shared_turns_the_same_two_processes_overlap_on_the_host(database_url, tmp_path):
    site = _crawl_from_two_processes(database_url, tmp_path, shared=False)
    assert _most_in_flight(sorted(site.spans)) == 2
