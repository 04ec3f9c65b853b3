"""A run killed (kill -9) while it maps, samples or scrapes, then resumed, asks the site for each page once:
the resumed stage replays what the first one kept (stages/walkkeep.py, stages/answerkeep.py), and the resume
leaves no leaked semaphore behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from gleaner.demosite.testsite import Page, TestSite

from ..generated_site import Gate, article, site_pages


def _links(*paths: str) -> str:
    items = "".join(f"<li><a href='{p}'>{p}</a></li>" for p in paths)
    return f"<html><head><title>Index</title></head><body><main><ul>{items}</ul></main></body></html>"


def _env(home: Path, database_url: str, workers: int = 1) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env.update(GLEANER_DATABASE_URL=database_url, GLEANER_HOME=str(home), GLEANER_ALLOW_NETWORKS="127.0.0.0/8",
               GLEANER_HOST_DELAY="0", GLEANER_EXTRACT_WORKERS=str(workers))
    return env


def _kill(crawl: subprocess.Popen[str]) -> str:
    """``kill -9`` of the command alone, as a user would: its extraction processes and the resource tracker
    outlive it a moment (extract/orphan.py); what they all printed on its stderr once they are gone."""
    os.kill(crawl.pid, signal.SIGKILL)
    return crawl.communicate(timeout=60)[1]


def test_a_run_killed_while_mapping_and_resumed_asks_for_each_page_once(tmp_path: Path, database_url: str, make_deps):
    home = tmp_path / "data"
    env = _env(home, database_url)
    pages = {"/robots.txt": Page("User-agent: *\nAllow: /\n", content_type="text/plain"),
             "/": Page(_links("/a", "/b")), "/a": Page(_links(*(f"/p/{i}" for i in range(8)))),
             **{f"/p/{i}": Page(article(i)) for i in range(8)}}
    gate = Gate(Page(_links("/p/0")), limit=60)
    pages["/b"] = Page("", handler=gate.handler)
    with TestSite(pages, max_seconds=300) as site:
        crawl = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "crawl", site.url + "/", "--json"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            assert gate.reached.wait(120), "the walk never reached /b"
            # The walk kept "/" and "/a" (their answers beside their bodies) while /b is held: then it dies.
            deadline = time.monotonic() + 60
            while len(list(home.glob("blobs/domains/*/runs/*/answers/*.json"))) < 2:
                assert time.monotonic() < deadline, "the walk kept nothing"
                time.sleep(0.05)
            os.killpg(crawl.pid, signal.SIGKILL)
            crawl.wait(timeout=30)
        finally:
            gate.released.set()
        (run,) = make_deps().metadata.recent_runs(limit=5)
        assert run["status"] == "mapping"
        resumed = subprocess.run([sys.executable, "-m", "gleaner.cli", "runs", "resume", run["run_id"], "--json"],
                                 env=env, capture_output=True, text=True, timeout=180, check=False)
        requests = Counter(r.path for r in site.log if r.path not in ("/robots.txt", "/sitemap.xml"))

    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["status"] == "finished"
    # /b's first request was never answered (the walk died waiting): only it is asked again.
    assert requests.pop("/b") <= 2
    assert requests and max(requests.values()) == 1, requests
    assert "leaked semaphore" not in resumed.stderr, resumed.stderr


def test_a_run_killed_while_scraping_and_resumed_asks_for_each_page_once(tmp_path: Path, database_url: str, make_deps):
    home = tmp_path / "data"
    env = _env(home, database_url, workers=2)  # a pool, its semaphores, its tracker
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=300) as site:
        pages.update(site_pages(site.url, 40))
        gate = Gate(pages["/p/30"], limit=60)
        pages["/p/30"] = Page("", handler=gate.handler)
        crawl = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "crawl", site.url + "/", "--json"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            assert gate.reached.wait(120), "the scrape never reached /p/30"
            time.sleep(1.0)  # the pages answered meanwhile are stored, or not: either way none is asked twice
            killed = _kill(crawl)
        finally:
            gate.released.set()
        (run,) = make_deps().metadata.recent_runs(limit=5)
        resumed = subprocess.run([sys.executable, "-m", "gleaner.cli", "runs", "resume", run["run_id"], "--json"],
                                 env=env, capture_output=True, text=True, timeout=180, check=False)
        requests = Counter(r.path for r in site.log if r.path.startswith("/p/") and "if-none-match" not in r.headers)

    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["status"] == "finished"
    assert requests.pop("/p/30") <= 2  # held unanswered at the kill
    assert max(requests.values()) == 1, sorted(path for path, n in requests.items() if n > 1)
    assert "leaked semaphore" not in killed + resumed.stderr, killed + resumed.stderr


def test_a_run_killed_while_sampling_and_resumed_asks_for_each_page_once(tmp_path: Path, database_url: str, make_deps):
    home = tmp_path / "data"
    env = _env(home, database_url, workers=2)  # a pool, its semaphores, its tracker
    sections = ("a", "b", "c")
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=300) as site:
        paths = [f"/{s}/{i}" for s in sections for i in range(6)]
        urls = "".join(f"<url><loc>{site.url}{p}</loc></url>" for p in paths)
        pages.update({p: Page(article(n)) for n, p in enumerate(paths)})
        pages["/"] = Page("<html><head><title>Home</title></head><body><h1>Home</h1></body></html>")
        pages["/robots.txt"] = Page(f"User-agent: *\nAllow: /\nSitemap: {site.url}/sitemap.xml\n",
                                    content_type="text/plain")
        pages["/sitemap.xml"] = Page(f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                                     f"{urls}</urlset>", content_type="application/xml")
        # One page a section is sampled, section by section: /c/0's answer is held once /a/0 and /b/0 answered.
        gate = Gate(pages["/c/0"], limit=60)
        pages["/c/0"] = Page("", handler=gate.handler)
        crawl = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "crawl", site.url + "/", "--json"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            assert gate.reached.wait(120), "the sample never reached /c/0"
            killed = _kill(crawl)
        finally:
            gate.released.set()
        (run,) = make_deps().metadata.recent_runs(limit=5)
        assert run["status"] == "sampling"
        sampled = {r.path for r in site.log if r.path.startswith(("/a/", "/b/"))}
        resumed = subprocess.run([sys.executable, "-m", "gleaner.cli", "runs", "resume", run["run_id"], "--json"],
                                 env=env, capture_output=True, text=True, timeout=180, check=False)
        requests = Counter(r.path for r in site.log if r.path in paths and "if-none-match" not in r.headers)

    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["status"] == "finished"
    assert sampled == {"/a/0", "/b/0"}  # the samples answered before the kill: neither is asked again
    assert requests.pop("/c/0") <= 2  # held unanswered at the kill
    assert sorted(requests) == sorted(p for p in paths if p != "/c/0") and max(requests.values()) == 1, requests
    assert "leaked semaphore" not in killed + resumed.stderr, killed + resumed.stderr
