"""Runs always settle and nothing accepted is lost: real `gleaner` processes killed, interrupted,
cancelled, swept and resumed over one generated loopback site and a real PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
import sqlalchemy as sa

from gleaner.demosite.testsite import TestSite
from gleaner.settings.config import Settings
from gleaner.store.backends import db

from ..generated_site import Gate, generated_site, page_requests

PAGES = 150
SAMPLE = "/p/0"  # the section's sample: the sample stage fetches it besides the scrape


@pytest.fixture(scope="module")
def site() -> Iterator[TestSite]:
    with generated_site(PAGES) as served:
        yield served


@pytest.fixture
def env(tmp_path: Path, database_url: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    base.update(GLEANER_DATABASE_URL=database_url, GLEANER_HOME=str(tmp_path / "data"),
                GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_HOST_DELAY="0", GLEANER_HOST_CONCURRENCY="4",
                GLEANER_EXTRACT_WORKERS="1")
    return base


def gleaner(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gleaner.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


class Crawl:
    """A `gleaner crawl` in the background whose stderr lines can be waited for."""

    def __init__(self, env: dict[str, str], url: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "crawl", url, "--json"], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def saw(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def finish(self, timeout: float = 120) -> tuple[int, str]:
        assert self.proc.stdout is not None  # stderr belongs to the reader thread: not communicate()
        out = self.proc.stdout.read()
        code = self.proc.wait(timeout)
        self._reader.join(timeout=5)
        return code, out

    def kill(self) -> None:
        self.proc.kill()
        self.finish()


def wait_until(condition: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the crawl to reach the kill point")
        time.sleep(0.01)


def rows(database_url: str, sql: str, **params: object) -> list[sa.Row]:
    engine = db.create_engine(Settings(database_url=database_url))
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql), params).all())
    finally:
        engine.dispose()


def only_run(database_url: str) -> str:
    return str(rows(database_url, "SELECT id FROM knowledge.crawl_runs ORDER BY created_at DESC LIMIT 1")[0][0])


def assert_the_copy_is_whole(database_url: str, data_dir: Path) -> None:
    """Every page is active with a current snapshot whose blobs and canonical text exist; every run settled."""
    docs = rows(database_url,
                "SELECT d.path, d.status::text, s.processed_markdown_ref, s.raw_markdown_ref, t.text_hash"
                " FROM knowledge.documents d LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
                " LEFT JOIN knowledge.snapshot_texts t ON t.snapshot_id = s.id WHERE d.path LIKE '/p/%'")
    assert len(docs) == PAGES
    for path, status, content, raw, text in docs:
        assert status == "active" and content and raw, path
        assert (data_dir / "blobs" / content).is_file() and (data_dir / "blobs" / raw).is_file(), path
        assert text is not None, f"{path}: current snapshot without canonical text"
    statuses = [r[0] for r in rows(database_url, "SELECT status::text FROM knowledge.crawl_runs")]
    assert statuses and all(s in ("finished", "partial", "failed", "cancelled", "interrupted") for s in statuses)


def assert_no_page_fetched_more_than_twice(site: TestSite, since: int) -> None:
    counts = page_requests(site, since)
    # The sample page is fetched by the sample stage of each run besides the scrape.
    over = {path: n for path, n in counts.items() if n > (4 if path == SAMPLE else 2)}
    assert not over, over


def _kill_at_map(site: TestSite, crawl_env: dict[str, str]) -> None:
    gate = Gate(site.pages["/sitemap.xml"])
    original = site.pages["/sitemap.xml"]
    site.pages["/sitemap.xml"] = type(original)("", handler=gate.handler)
    try:
        crawl = Crawl(crawl_env, site.url + "/")
        assert gate.reached.wait(60)
        crawl.kill()
    finally:
        gate.released.set()
        site.pages["/sitemap.xml"] = original


def _kill_on_line(text: str) -> Callable[[TestSite, dict[str, str]], None]:
    def kill(site: TestSite, crawl_env: dict[str, str]) -> None:
        crawl = Crawl(crawl_env, site.url + "/")
        wait_until(lambda: crawl.saw(text))
        crawl.kill()

    return kill


def _kill_mid_scrape(site: TestSite, crawl_env: dict[str, str]) -> None:
    since = len(site.log)
    crawl = Crawl(crawl_env, site.url + "/")
    wait_until(lambda: sum(page_requests(site, since).values()) >= 60)
    crawl.kill()


KILL_POINTS = {
    "map": _kill_at_map,  # discovery in flight: the run is mapping
    "sample": _kill_on_line("scraping:"),  # sampled, batches queued, nothing scraped
    "scrape": _kill_mid_scrape,  # some pages fetched and recorded, some in flight
    "ingest": _kill_on_line("batch 0:"),  # batch 0 versioned, its ingest in flight
}


@pytest.mark.parametrize(("point", "recovery"), [
    ("map", "resume"), ("sample", "resume"), ("scrape", "resume"), ("scrape", "recrawl"), ("ingest", "recrawl"),
])
def test_a_crawl_killed_at_any_stage_is_settled_by_sweep_and_completed_by_one_more_run(
        site: TestSite, env: dict[str, str], database_url: str, tmp_path: Path, point: str, recovery: str) -> None:
    since = len(site.log)
    KILL_POINTS[point](site, env)
    run_id = only_run(database_url)
    status = rows(database_url, "SELECT status::text FROM knowledge.crawl_runs")[0][0]
    swept = gleaner(env, "sweep", "--idle", "0", "--json")
    assert swept.returncode == 0, swept.stderr
    settled = json.loads(swept.stdout)
    if status in ("finished", "partial"):  # the kill came after the last stage settled the run
        assert settled == []
    else:
        assert [s["run_id"] for s in settled] == [run_id] and settled[0]["now"] in ("interrupted", "finished")
    if recovery == "resume":
        again = gleaner(env, "runs", "resume", run_id, "--json")
    else:
        again = gleaner(env, "crawl", site.url + "/", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["status"] == "finished"
    assert_the_copy_is_whole(database_url, tmp_path / "data")
    assert_no_page_fetched_more_than_twice(site, since)


def test_ctrl_c_marks_the_run_interrupted_and_resume_fetches_only_what_was_left(
        site: TestSite, env: dict[str, str], database_url: str, tmp_path: Path) -> None:
    since = len(site.log)
    original = site.pages["/p/40"]
    gate = Gate(original)  # the crawl cannot finish before the signal, however fast the machine
    site.pages["/p/40"] = type(original)("", handler=gate.handler)
    try:
        crawl = Crawl(env, site.url + "/")
        assert gate.reached.wait(60)
        crawl.proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
    finally:
        gate.released.set()
        site.pages["/p/40"] = original
    code, _ = crawl.finish()
    stderr = "".join(crawl.lines)
    run_id = only_run(database_url)
    assert code == 130 and "Traceback" not in stderr
    assert f"run {run_id} interrupted; `gleaner runs resume {run_id}`" in stderr
    assert rows(database_url, "SELECT status::text FROM knowledge.crawl_runs")[0][0] == "interrupted"
    listed = gleaner(env, "runs", run_id, "--json")  # the listing still answers under the run-control group
    assert listed.returncode == 0 and json.loads(listed.stdout)["status"] == "interrupted"
    resumed = gleaner(env, "runs", "resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["run_id"] == run_id and summary["status"] == "finished" and summary["snapshots"]["new"] == PAGES
    assert_the_copy_is_whole(database_url, tmp_path / "data")
    assert_no_page_fetched_more_than_twice(site, since)


def test_sigterm_interrupts_like_ctrl_c(site: TestSite, env: dict[str, str], database_url: str) -> None:
    since = len(site.log)
    crawl = Crawl(env, site.url + "/")
    wait_until(lambda: sum(page_requests(site, since).values()) >= 20)
    crawl.proc.terminate()
    code, _ = crawl.finish()
    assert code == 130 and "interrupted" in "".join(crawl.lines)
    assert rows(database_url, "SELECT status::text FROM knowledge.crawl_runs")[0][0] == "interrupted"


def test_a_live_crawl_is_left_alone_by_sweep_and_stops_when_cancelled(
        site: TestSite, env: dict[str, str], database_url: str) -> None:
    original = site.pages["/p/30"]
    gate = Gate(original)
    site.pages["/p/30"] = type(original)("", handler=gate.handler)
    try:
        crawl = Crawl(env, site.url + "/")
        assert gate.reached.wait(60)
        run_id = only_run(database_url)
        swept = gleaner(env, "sweep", "--idle", "0", "--json")
        assert swept.returncode == 0 and json.loads(swept.stdout) == []  # its worker is alive
        cancelled = gleaner(env, "runs", "cancel", run_id)
        assert cancelled.returncode == 0 and f"run {run_id} cancelled" in cancelled.stdout
    finally:
        gate.released.set()
        site.pages["/p/30"] = original
    code, out = crawl.finish()
    assert code == 1 and json.loads(out)["status"] == "cancelled"
    assert f"run {run_id} ended cancelled: cancelled by the operator" in "".join(crawl.lines)
    again = gleaner(env, "runs", "cancel", run_id)
    assert again.returncode == 0 and "already cancelled" in again.stdout


def test_run_control_refuses_what_it_cannot_do_in_one_line(site: TestSite, env: dict[str, str]) -> None:
    # The whole site: a run stopped by --limit ends partial (left URLs to fetch), not finished.
    crawl = gleaner(env, "crawl", site.url + "/", "--json")
    run_id = json.loads(crawl.stdout)["run_id"]
    for args, message in ((["runs", "resume", run_id], "is finished; nothing to resume"),
                          (["runs", "cancel", run_id], "already ended finished"),
                          (["runs", "cancel", "00000000-0000-0000-0000-000000000000"], "no run")):
        result = gleaner(env, *args)
        assert result.returncode == 1 and message in result.stderr and "Traceback" not in result.stderr
    assert "cancel" in gleaner(env, "runs", "--help").stdout


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """A directory even root cannot write into (``chattr +i``): chmod does not stop root, this does."""
    path.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False).returncode != 0:
        if os.environ.get("CI"):
            raise AssertionError("chattr +i is needed for the read-only directory tests")
        pytest.skip("this filesystem does not support chattr +i")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_read_only_blob_directory_fails_the_run_at_map_in_one_line_without_fetching_pages(
        site: TestSite, env: dict[str, str], database_url: str, tmp_path: Path) -> None:
    blobs = tmp_path / "readonly"
    since = len(site.log)
    with immutable(blobs):
        result = gleaner({**env, "GLEANER_BLOB_URL": f"file://{blobs}"}, "crawl", site.url + "/", "--json")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "blob store failed: cannot write blob" in result.stderr and "Operation not permitted" in result.stderr
    assert rows(database_url, "SELECT status::text FROM knowledge.crawl_runs")[0][0] == "failed"
    assert sum(page_requests(site, since).values()) == 0  # the map never became pages to fetch


def test_snapshots_that_cannot_be_stored_end_the_run_partial_and_resume_stores_them_without_refetching(
        site: TestSite, env: dict[str, str], database_url: str, tmp_path: Path) -> None:
    since = len(site.log)
    with immutable(tmp_path / "data" / "blobs" / "domains" / "gen.test" / "document-snapshots"):
        result = gleaner(env, "crawl", site.url + "/", "--site-domain", "gen.test", "--json")
    run_id = json.loads(result.stdout)["run_id"]
    assert result.returncode == 1 and "Traceback" not in result.stderr
    # Each snapshot message was retried, then dead-lettered, and the dead letter is recorded on the run.
    assert json.loads(result.stdout)["status"] == "partial"
    assert f"run {run_id} ended partial: snapshot of batch" in result.stderr and "dead-lettered" in result.stderr
    fetched = page_requests(site, since)
    resumed = gleaner(env, "runs", "resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["snapshots"]["new"] == PAGES
    assert page_requests(site, since) == fetched  # the run-scoped bodies were there: nothing fetched again
    assert_the_copy_is_whole(database_url, tmp_path / "data")


@pytest.mark.parametrize("wait", ["30", "0"])  # a connect waits the restart out / the stores' retries do
def test_a_postgresql_restart_mid_crawl_costs_a_pause_not_the_run(site: TestSite, env: dict[str, str],
                                                                  tmp_path: Path, wait: str) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
        from pgserver._commands import pg_ctl

    server = pgserver.get_server(tmp_path / "pg", cleanup_mode="stop")  # its own server: this test stops it
    try:
        url = server.get_uri()
        original = site.pages["/p/40"]
        gate = Gate(original)
        site.pages["/p/40"] = type(original)("", handler=gate.handler)
        since = len(site.log)
        try:
            crawl = Crawl({**env, "GLEANER_DATABASE_URL": url, "GLEANER_DATABASE_WAIT_SECONDS": wait}, site.url + "/")
            assert gate.reached.wait(60)
            pg_ctl(["-w", "stop", "-m", "fast"], pgdata=server.pgdata, user=server.system_user)
            gate.released.set()  # the crawl goes on fetching while the database is away
            time.sleep(3)
            pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user)
            code, out = crawl.finish()
        finally:
            gate.released.set()
            site.pages["/p/40"] = original
        stderr = "".join(crawl.lines)
        assert code == 0, stderr + out
        summary = json.loads(out)
        assert summary["status"] == "finished" and summary["snapshots"]["new"] == PAGES
        assert "Traceback" not in stderr and not any(line.startswith("  File ") for line in crawl.lines)
        assert_no_page_fetched_more_than_twice(site, since)
        assert_the_copy_is_whole(url, tmp_path / "data")
    finally:
        # `pg_ctl restart` started a postmaster that pgserver's cleanup does not know: stop it by its
        # data directory, whatever the test's outcome.
        with suppress(Exception):
            pg_ctl(["-w", "stop", "-m", "fast"], pgdata=server.pgdata, user=server.system_user)
        server.cleanup()


def test_a_killed_crawl_is_resumed_at_once_without_a_sweep_or_an_idle_wait(
        site: TestSite, env: dict[str, str], database_url: str, tmp_path: Path) -> None:
    """kill -9 leaves the run active with a dead worker on this host: resume takes it over right away."""
    since = len(site.log)
    _kill_mid_scrape(site, env)
    run_id = only_run(database_url)
    assert rows(database_url, "SELECT status::text FROM knowledge.crawl_runs")[0][0] == "scraping"
    resumed = gleaner(env, "runs", "resume", run_id, "--json")  # no sweep, no --idle: the default limit
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "finished"
    assert_the_copy_is_whole(database_url, tmp_path / "data")
    assert_no_page_fetched_more_than_twice(site, since)


def test_a_blob_directory_made_read_only_mid_crawl_leaves_every_url_with_a_status_and_exact_counters(
        site: TestSite, env: dict[str, str], database_url: str, tmp_path: Path) -> None:
    original = site.pages["/p/30"]
    gate = Gate(original)
    site.pages["/p/30"] = type(original)("", handler=gate.handler)
    frozen = None
    try:
        crawl = Crawl(env, site.url + "/")
        assert gate.reached.wait(60)
        run_id = only_run(database_url)
        # The run's blob directory and everything in it become read-only (a full or failed disk).
        frozen = next((tmp_path / "data" / "blobs").glob(f"domains/*/runs/{run_id}"))
        if subprocess.run(["chattr", "-R", "+i", str(frozen)], capture_output=True, check=False).returncode:
            frozen = None
            pytest.skip("this filesystem does not support chattr +i")
    finally:
        gate.released.set()
        site.pages["/p/30"] = original
    try:
        code, out = crawl.finish()
    finally:
        if frozen is not None:
            subprocess.run(["chattr", "-R", "-i", str(frozen)], check=False)
    summary = json.loads(out)
    assert code == 1 and summary["status"] in ("failed", "partial"), summary
    listed = gleaner(env, "runs", run_id, "--urls", "--json")
    assert listed.returncode == 0, listed.stderr
    included = [u for u in json.loads(listed.stdout) if u["decision"] == "include"]
    assert len(included) == summary["included"] >= PAGES
    statuses = {u["status"] for u in included}
    assert "pending" not in statuses and "store-failed" in statuses, statuses
    # The summary's counters are the ledger's, counted after the last stage wrote.
    ledger = rows(database_url, "SELECT count(*) FILTER (WHERE fetch_outcome = 'fetched'),"
                  " count(*) FILTER (WHERE snapshot_outcome = 'new') FROM knowledge.crawl_page_decisions"
                  " WHERE run_id = :r", r=run_id)[0]
    final = json.loads(gleaner(env, "runs", run_id, "--json").stdout)
    assert (final["fetched"], final["snapshots"]["new"]) == tuple(ledger)
