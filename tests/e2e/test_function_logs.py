"""A deployed function's log lines, read from a real functions-framework process with LOG_EXECUTION_ID=true.

That setting (on for every 2nd-gen function) makes functions-framework reconfigure logging around
our import; the lines must still be one JSON object each, INFO included, with severity, the trace
of the request and the delivery's labels.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gleaner.messages import ScrapeBatch, encode
from tests.cloud_fixtures import emulators

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "gleaner-logs-test"
RUN_ID = "8b0f6d6e-0000-4000-8000-00000000beef"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def scrape_function(tmp_path: Path, database_url: str) -> Iterator[tuple[str, Path]]:
    port = emulators.free_port()
    env = {**os.environ, "LOG_EXECUTION_ID": "true", "GOOGLE_CLOUD_PROJECT": PROJECT,
           "GLEANER_DATABASE_URL": database_url, "GLEANER_DATA_DIR": str(tmp_path / "gleaner"),
           "PYTHONPATH": str(ROOT / "shared")}
    env.pop("GLEANER_TEST_DATABASE_URL", None)
    log = tmp_path / "function.log"
    proc = emulators.Process("scrape", [sys.executable, "-m", "functions_framework", "--source",
                                        str(ROOT / "functions" / "scrape" / "main.py"), "--target", "on_http",
                                        "--host", "127.0.0.1", "--port", str(port)], port, log, env=env).start(90)
    try:
        yield f"http://127.0.0.1:{port}/", log
    finally:
        proc.stop()


def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def json_lines(log: Path) -> list[dict[str, Any]]:
    lines = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def test_info_lines_survive_functions_framework_as_json_with_severity_trace_and_labels(scrape_function):
    url, log = scrape_function
    batch = ScrapeBatch(run_id=RUN_ID, site_domain="example.com", batch_no=0)
    assert post(url, encode(batch), {"X-Cloud-Trace-Context": f"{TRACE}/1;o=1",
                                     "Content-Type": "application/json"}) == 200
    assert post(url, b'{"type": "Nope"}', {"traceparent": f"00-{'a' * 32}-{'b' * 16}-01"}) == 400

    lines = json_lines(log)
    handled = [e for e in lines if "handled ScrapeBatch" in e.get("message", "")]
    assert len(handled) == 1, log.read_text()[-3000:]
    (line,) = handled
    assert line["severity"] == "INFO"
    assert line["logging.googleapis.com/trace"] == f"projects/{PROJECT}/traces/{TRACE}"
    labels = line["logging.googleapis.com/labels"]
    assert (labels["stage"], labels["run_id"], labels["site_domain"]) == ("scrape", RUN_ID, "example.com")
    assert labels.get("execution_id"), "functions-framework's execution id is merged into our labels"

    (rejected,) = [e for e in lines if "rejecting malformed task" in e.get("message", "")]
    assert rejected["severity"] == "ERROR"
    assert rejected["logging.googleapis.com/trace"] == f"projects/{PROJECT}/traces/{'a' * 32}"
    assert rejected["logging.googleapis.com/labels"]["stage"] == "scrape"
