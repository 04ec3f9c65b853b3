"""``gleaner serve`` over real HTTP (a subprocess, as an operator runs it) and ``gleaner refs`` on what landed."""

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
from click.testing import CliRunner

from gleaner.cli import main
from gleaner.demosite.testsite import TestSite
from gleaner.references.identity import reference_item_id
from tests.feed_site import ARTICLES, feed_site

from ..processes import announced_url

ROOT = Path(__file__).resolve().parents[2]
SECRET = "serve-secret-0123456789abcdef0123456789abcdef"


@pytest.fixture
def site() -> Iterator[TestSite]:
    with feed_site() as test_site:
        yield test_site


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "gleaner"),
            "GLEANER_WEBHOOK_SECRET": SECRET, "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8",
            "GLEANER_HOST_DELAY": "0", "GLEANER_FETCH_TIMEOUT": "5"}


@pytest.fixture
def server(env: dict[str, str]) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "gleaner.cli", "serve", "--port", "0"],
        env={**os.environ, **env, "PYTHONPATH": str(ROOT / "shared")}, stderr=subprocess.PIPE, text=True)
    yield announced_url(process, r"serving the ingest webhook on (http://127\.0\.0\.1:\d+)/")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0


def wait_for(check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail("timed out")


def test_gleaner_serve_accepts_a_batch_over_http_and_lands_it_in_the_background(server, site):
    auth = {"Authorization": f"Bearer {SECRET}"}
    batch = {"articles": [{"url": site.url + p, "title": ARTICLES[p][0], "workspace_id": "ws-http",
                           "published_at": None, "summary": None, "feed_source": None} for p in ARTICLES]}
    with httpx.Client(base_url=server, timeout=30) as client:
        assert client.post("/", json=batch).status_code == 401
        response = client.post("/", json=batch, headers=auth)
        assert response.status_code == 202
        assert response.json() == {"accepted": 3, "duplicates": 0, "rejected": []}
        ref_id = reference_item_id(site.url + "/articles/tidal-power")
        item = wait_for(lambda: (r := client.get(f"/refs/{ref_id}", headers=auth)).status_code == 200 and r.json())
        assert "Four tidal turbines" in item["body"]
        assert item["ingestion_source"] == "url_import"  # no feed_source: a direct import
        results = wait_for(lambda: client.get("/refs", params={"q": "perovskite"}, headers=auth).json()["results"])
        assert results[0]["source_url"] == site.url + "/articles/solar-cells"
        assert client.post("/", json=batch, headers=auth).json()["duplicates"] == 3
        for path in ARTICLES:  # all three landed (in the background, in any order): a walk has nothing left
            wait_for(lambda p=path: client.get(f"/refs/{reference_item_id(site.url + p)}", headers=auth)
                     .status_code == 200)
        assert client.post("/", content=b"", headers=auth).json() == {"walk": True, "scheduled": 0}
        assert client.post("/", content=b"x" * (2 * 1024 * 1024), headers=auth).status_code == 413
        assert client.delete("/", headers=auth).status_code == 405


def test_refs_cli_searches_and_shows_what_landed(env, site):
    runner = CliRunner()
    from gleaner.app import Deps
    from gleaner.serving.webhook import WebhookRequest, handle
    from gleaner.settings.config import Settings

    deps = Deps(Settings.from_env(env))
    try:
        status, answer = handle(WebhookRequest("POST", "/", {"authorization": f"Bearer {SECRET}"}, json.dumps(
            {"articles": [{"url": site.url + "/articles/sea-ice", "title": ARTICLES["/articles/sea-ice"][0],
                           "workspace_id": "ws-cli", "published_at": "2026-05-30T10:00:00+00:00",
                           "summary": "Ice", "feed_source": site.url + "/feeds/rss2.xml"}]}).encode()), deps)
    finally:
        deps.close()
    assert (status, answer["accepted"]) == (202, 1)

    pending = runner.invoke(main, ["refs", "search", "sea ice"], env=env)
    assert pending.exit_code == 1  # recorded, not landed yet: nothing drained the bus in that process
    walked = runner.invoke(main, ["refs", "walk", "--json"], env=env)
    assert walked.exit_code == 0, walked.output
    assert json.loads(walked.stdout)["landed"] == 1

    found = runner.invoke(main, ["refs", "search", "sea ice", "--json"], env=env)
    assert found.exit_code == 0, found.output
    (hit,) = json.loads(found.stdout)["results"]
    assert hit["published_at"] == "2026-05-30T10:00:00+00:00"
    listed = runner.invoke(main, ["refs", "search", "sea ice"], env=env)
    assert len(listed.stdout.splitlines()) == 3  # one result, three lines, however its preview is broken
    shown = runner.invoke(main, ["refs", "show", hit["reference_id"]], env=env)
    assert shown.exit_code == 0
    assert "Glaciologists attribute the loss" in shown.stdout
    assert "from workspace ws-cli" in shown.stderr
    missing = runner.invoke(main, ["refs", "show", "nope"], env=env)
    assert missing.exit_code == 1 and "no reference 'nope'" in missing.stderr


def test_gleaner_serve_refuses_to_start_without_a_webhook_secret(env):
    result = CliRunner().invoke(main, ["serve", "--port", "0"],
                                env={**env, "GLEANER_WEBHOOK_SECRET": ""})
    assert result.exit_code == 1
    assert "GLEANER_WEBHOOK_SECRET must be set" in result.stderr
    assert "export GLEANER_WEBHOOK_SECRET=" in result.stderr  # says what to set, and how


def test_a_short_webhook_secret_is_refused_with_the_variable_named(env):
    result = CliRunner().invoke(main, ["serve", "--port", "0"], env={**env, "GLEANER_WEBHOOK_SECRET": "hunter2"})
    assert result.exit_code != 0
    assert "GLEANER_WEBHOOK_SECRET is 7 characters; it must be at least 32" in result.stderr
