"""One process crawls every due site at once: real `gleaner` processes over loopback sites on distinct
127.0.0.x hosts, each with its own delay, timed by the sites' own request logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from gleaner.app import Deps
from gleaner.demosite.testsite import Page, TestSite
from gleaner.operator.schedule import tick
from gleaner.operator.sites import add_site
from gleaner.runtime.engine import Engine, RunRef
from gleaner.runtime.runner import resume

from ..generated_site import Gate, site_pages

PAGES = 6
DELAYS = (0.15, 0.25, 0.35)


@pytest.fixture
def env(tmp_path: Path, database_url: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    base.update(GLEANER_DATABASE_URL=database_url, GLEANER_HOME=str(tmp_path / "data"),
                GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_EXTRACT_WORKERS="1")
    return base


def serve(stack: ExitStack, host: str, pages: int) -> TestSite:
    served: dict[str, Page] = {}
    site = stack.enter_context(TestSite(served, host=host, max_seconds=120))
    served.update(site_pages(site.url, pages))
    return site


@pytest.fixture
def hosts() -> Iterator[list[TestSite]]:
    with ExitStack() as stack:
        yield [serve(stack, f"127.0.0.{n + 2}", PAGES) for n in range(len(DELAYS))]


def add_sites(deps: Deps, sites: list[TestSite], delays: tuple[float, ...]) -> None:
    for site, delay in zip(sites, delays, strict=True):
        add_site(deps, site.url + "/", every="1h", delay=delay)


def tick_here(deps: Deps) -> list[dict[str, Any]]:
    """What `gleaner tick` does, in this process: start the due runs, drive them all at once."""
    report = tick(deps)
    return Engine(deps).drive([RunRef(s.run_id, s.site_domain, "") for s in report.started])


def test_a_tick_crawls_every_due_site_at_once_and_keeps_each_hosts_own_delay(make_deps, hosts):
    deps = make_deps()
    add_sites(deps, hosts, DELAYS)

    runs = tick_here(deps)

    assert [r["status"] for r in runs] == ["finished"] * len(hosts)
    assert all(r["fetched"] == PAGES for r in runs)
    spans = []
    for site, delay in zip(hosts, DELAYS, strict=True):
        times = [r.at for r in site.log]
        spans.append((times[0], times[-1]))
        # Every request to a host, robots.txt and the sitemap included, waits out that host's own delay.
        assert min(b - a for a, b in pairwise(times)) >= delay - 0.005
    # The sites were crawled side by side: each one's requests began before any other's ended.
    assert max(start for start, _ in spans) < min(end for _, end in spans)


def test_a_site_that_cannot_be_crawled_leaves_the_others_finished(make_deps, hosts):
    deps = make_deps()
    add_sites(deps, hosts[:2], DELAYS[:2])
    # Nothing listens there: its map fails (robots.txt and the start page are unreachable).
    add_site(deps, "http://127.0.0.9:9/", every="1h", delay=0.1)

    runs = {r["site_domain"]: r for r in tick_here(deps)}

    assert runs.pop("127.0.0.9")["status"] == "failed"
    assert [r["status"] for r in runs.values()] == ["finished", "finished"]


def test_ctrl_c_during_a_multi_site_tick_leaves_every_run_interrupted_and_resumable(env, make_deps):
    deps = make_deps()
    with ExitStack() as stack:
        sites = [serve(stack, f"127.0.0.{n + 2}", 30) for n in range(3)]
        # Each site holds one page's answer until the signal is sent: the tick cannot end first, however
        # fast or loaded the machine.
        gates = [Gate(site.pages["/p/7"], limit=60) for site in sites]
        for site, gate in zip(sites, gates, strict=True):
            site.pages["/p/7"] = Page("", handler=gate.handler)
        stack.callback(lambda: [gate.released.set() for gate in gates])
        add_sites(deps, sites, (0.05, 0.05, 0.05))
        tick_process = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "tick", "--json"], env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for gate in gates:
            assert gate.reached.wait(90), "the tick never reached every site's held page"
        tick_process.send_signal(signal.SIGINT)
        for gate in gates:
            gate.released.set()
        _out, err = tick_process.communicate(timeout=60)

        assert tick_process.returncode == 130, err
        runs = deps.metadata.recent_runs(limit=10)
        assert sorted(r["status"] for r in runs) == ["interrupted"] * 3
        assert err.count("gleaner runs resume") == 3
        # Resumed from the tick's own data dir: an ingest the signal left pending reads its page there.
        assert resume(make_deps(data_dir=Path(env["GLEANER_HOME"])), runs[0]["run_id"])["status"] == "finished"


def _descendants(pid: int) -> set[int]:
    """Every process whose chain of parents leads to pid (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")
def test_kill_9_of_a_crawl_leaves_no_extraction_process_behind(env, tmp_path):
    env = {**env, "GLEANER_EXTRACT_WORKERS": "2", "GLEANER_HOST_DELAY": "0.2"}
    with ExitStack() as stack:
        site = serve(stack, "127.0.0.2", 40)
        crawl = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "crawl", site.url + "/"], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        children: set[int] = set()
        while len(children) < 4:  # the resource tracker, the forkserver and its two workers
            assert time.monotonic() < deadline and crawl.poll() is None, f"only {children} started"
            time.sleep(0.2)
            children = {p for p in _descendants(crawl.pid) if "python" in _cmdline(p)}
        crawl.kill()
        crawl.wait(10)

        deadline = time.monotonic() + 10
        while any(_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in children if _alive(p)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_crawl_with_several_urls_prints_one_summary_per_url_in_order(env, hosts, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from gleaner.cli import main

    monkeypatch.chdir(tmp_path)  # no gleaner.toml of the working tree
    urls = [site.url + "/" for site in hosts[:2]]
    result = CliRunner().invoke(main, ["crawl", *urls, "--delay", "0.1", "--json"], env=env)

    assert result.exit_code == 0, result.output
    summaries = json.loads(result.stdout)
    assert [s["site_domain"] for s in summaries] == ["127.0.0.2", "127.0.0.3"]
    assert [(s["status"], s["fetched"]) for s in summaries] == [("finished", PAGES)] * 2


def test_watch_starts_a_site_when_it_falls_due_while_another_sites_run_goes_on(make_deps, hosts):
    from datetime import UTC, datetime, timedelta

    from gleaner.cli.many import watch_many

    deps = make_deps()
    slow, later = hosts[0], hosts[1]
    add_site(deps, slow.url + "/", every="1h", delay=0.6)  # ~10 requests at 0.6 s: still going at +2 s
    add_site(deps, later.url + "/", every="1h", delay=0.1, now=datetime.now(UTC) + timedelta(seconds=2))
    started = time.monotonic()

    # Two ticks, at most a minute apart: the second comes when the later site falls due (not when the slow
    # run ends, nor a minute on).
    assert watch_many(deps, every=60, rounds=2) == 2

    assert time.monotonic() - started < 120
    slow_times, later_times = [r.at for r in slow.log], [r.at for r in later.log]
    assert later_times[0] - started < 2 + 15  # started soon after it fell due (under load, a tick is slow)
    assert later_times[0] < slow_times[-1]  # while the slow site's run was still fetching
    runs = deps.metadata.recent_runs(limit=10)
    assert sorted(r["status"] for r in runs) == ["finished", "finished"]


def test_a_ticks_runs_fetch_while_its_upkeep_still_runs(env, make_deps, hosts, monkeypatch, tmp_path):
    """`gleaner tick` runs retention beside its runs: no site's first request waits for it."""
    from click.testing import CliRunner

    import gleaner.stages.upkeep as upkeep_stage
    from gleaner.cli import main

    add_sites(make_deps(), hosts[:1], DELAYS[:1])
    asked_meanwhile: list[int] = []
    retention = upkeep_stage.upkeep

    def slow_upkeep(deps: Deps) -> Any:
        deadline = time.monotonic() + 30
        while not hosts[0].log and time.monotonic() < deadline:  # before: the tick's runs waited for this
            time.sleep(0.05)
        asked_meanwhile.append(len(hosts[0].log))
        return retention(deps)

    monkeypatch.setattr(upkeep_stage, "upkeep", slow_upkeep)
    monkeypatch.chdir(tmp_path)  # no gleaner.toml of the working tree
    result = CliRunner().invoke(main, ["tick", "--json"], env=env)

    assert result.exit_code == 0, result.output
    assert asked_meanwhile and asked_meanwhile[0] > 0
    assert [(r["status"], r["fetched"]) for r in json.loads(result.stdout)["runs"]] == [("finished", PAGES)]
