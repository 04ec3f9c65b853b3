"""A database outage is a wait: `gleaner serve` answers 503 with Retry-After while its embedded
PostgreSQL is down and recovers by itself; a crawl gives up in bounded time with one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gleaner.demosite.testsite import Page, TestSite

from ..generated_site import Gate, site_pages
from ..processes import announced_url

SECRET = "outage-secret-" + "x" * 32
pytestmark = pytest.mark.filterwarnings("ignore:XDG_RUNTIME_DIR")


@pytest.fixture
def home_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env.update(GLEANER_HOME=str(tmp_path / "data"), GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_HOST_DELAY="0",
               GLEANER_EXTRACT_WORKERS="1", GLEANER_WEBHOOK_SECRET=SECRET, GLEANER_DATABASE_WAIT_SECONDS="1")
    templates = os.environ.get("GLEANER_PG_TEMPLATES")
    if templates:
        env["GLEANER_PG_TEMPLATES"] = templates
    return env


def postmaster_pid(home: Path) -> int:
    return int((home / "pg" / "postmaster.pid").read_text().split("\n", 1)[0])


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def stop_postgres(home: Path) -> None:
    """A fast shutdown of the embedded server (what `pg_ctl stop` sends), waited for."""
    pid = postmaster_pid(home)
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + 30
    while not gone(pid):
        assert time.monotonic() < deadline, "the embedded PostgreSQL did not stop"
        time.sleep(0.05)


@pytest.fixture
def pgserver_lock() -> Iterator[object]:
    """pgserver's inter-process lock, which every start of an embedded server takes: held, nothing restarts it."""
    from pgserver.postgres_server import PostgresServer

    return PostgresServer._lock


def test_serve_answers_503_while_its_database_is_down_and_recovers_without_another_command(home_env, pgserver_lock):
    home = Path(home_env["GLEANER_HOME"])
    server = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "serve", "--port", "0"], env=home_env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = announced_url(server, r"back office at (http://\S+)/ui/", seconds=120)
        assert httpx.get(url + "/v1/sites", timeout=30).status_code == 200
        with pgserver_lock:  # type: ignore[attr-defined]
            stop_postgres(home)
            down = [httpx.get(url + "/v1/sites", timeout=30) for _ in range(2)]
        assert [a.status_code for a in down] == [503, 503], [a.text for a in down]
        assert int(down[0].headers["Retry-After"]) > 0 and "database" in down[0].json()["error"]
        deadline = time.monotonic() + 60
        statuses = []
        while not statuses or statuses[-1] != 200:
            assert time.monotonic() < deadline, f"serve did not recover: {statuses}"
            statuses.append(httpx.get(url + "/v1/sites", timeout=30).status_code)
            time.sleep(0.2)
        assert set(statuses) <= {503, 200}, statuses
    finally:
        server.send_signal(signal.SIGINT)
        _out, err = server.communicate(timeout=60)
    assert "Traceback" not in err, err


def test_a_crawl_whose_database_stops_exits_within_45_s_with_one_line_and_a_resumable_run(home_env):
    home = Path(home_env["GLEANER_HOME"])
    del home_env["GLEANER_DATABASE_WAIT_SECONDS"]  # the documented wait (30 s) is what is measured
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=300) as site:
        pages.update(site_pages(site.url, 12))
        gate = Gate(pages["/p/6"], limit=120)
        pages["/p/6"] = Page("", handler=gate.handler)
        crawl = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "crawl", site.url + "/", "--json"],
                                 env=home_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert gate.reached.wait(120), "the crawl never reached the held page"
            stop_postgres(home)  # nothing starts it again: a crawl never restarts the database it lost
            started = time.monotonic()
            gate.released.set()
            out, err = crawl.communicate(timeout=120)
            took = time.monotonic() - started
        finally:
            gate.released.set()
            if crawl.poll() is None:
                crawl.kill()
        print(f"exited {crawl.returncode} after {took:.1f} s\n{err}\n{out}")
        assert crawl.returncode not in (0, None) and took < 45, (took, err)
        assert "Traceback" not in err, err
        assert len([line for line in err.splitlines() if "error" in line.lower()]) == 1, err
        run_id = json.loads(out.strip().splitlines()[-1])["run_id"]
        # The database back (any command starts it), the run is taken over and finished.
        resumed = subprocess.run([sys.executable, "-m", "gleaner.cli", "runs", "resume", run_id, "--json"],
                                 env=home_env, capture_output=True, text=True, timeout=180, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["status"] == "finished"
