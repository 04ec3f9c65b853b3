"""`gleaner submit` against map-http served by functions-framework, as an operator would use it."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gleaner.cli import main
from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import TestSite
from tests.cloud_fixtures import emulators
from tests.e2e.test_operator_paths import identity_token

ROOT = Path(__file__).resolve().parents[2]
SECRET = "submit-secret-0123456789abcdef0123456789abcdef"


@pytest.fixture
def map_http(tmp_path: Path, database_url: str) -> Iterator[str]:
    """map's on_http with IAM trusted (as deployed) and the in-process bus, so a crawl runs right there."""
    port = emulators.free_port()
    env = {**os.environ, "GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "gleaner"),
           "GLEANER_HTTP_AUTH": "iam", "GLEANER_WEBHOOK_SECRET": SECRET, "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8",
           "GLEANER_HOST_DELAY": "0", "GLEANER_EXTRACT_WORKERS": "1", "PYTHONPATH": str(ROOT / "shared")}
    env.pop("GLEANER_TEST_DATABASE_URL", None)
    proc = emulators.Process("map-http", [sys.executable, "-m", "functions_framework", "--source",
                                          str(ROOT / "functions" / "map" / "main.py"), "--target", "on_http",
                                          "--host", "127.0.0.1", "--port", str(port)],
                             port, tmp_path / "map-http.log", env=env).start(90)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.stop()


def submit(*args: str, secret: str | None = None) -> tuple[int, dict[str, object]]:
    env = {"GLEANER_WEBHOOK_SECRET": secret or ""}
    result = CliRunner().invoke(main, ["submit", *args], env=env)
    lines = result.output.strip().splitlines()
    return result.exit_code, json.loads(lines[0]) if lines and lines[0].startswith("{") else {}


def test_an_operator_submits_a_crawl_with_an_identity_token_and_reads_its_status(map_http):
    pages: dict = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        code, answer = submit(site.url + "/", "--to", map_http, "--site-domain", "demo.test",
                              "--identity-token", identity_token())
    assert code == 0, answer
    assert answer["site_domain"] == "demo.test" and answer["run_id"]
    code, status = submit("--to", map_http, "--status", str(answer["run_id"]), "--identity-token", identity_token())
    assert code == 0
    assert status["run_id"] == answer["run_id"] and status["status"] == "finished"
    assert status["fetched"] > 0


def test_the_shared_bearer_works_too_and_no_credentials_fail_clearly(map_http):
    code, status = submit("--to", map_http, "--status", "8b0f6d6e-0000-4000-8000-000000000000", secret=SECRET)
    assert code == 1 and status == {"error": "no run 8b0f6d6e-0000-4000-8000-000000000000"}
    code, status = submit("--to", map_http, "--status", "8b0f6d6e-0000-4000-8000-000000000000", secret="wrong" * 8)
    assert code == 1 and "bearer" in str(status.get("error"))
