"""`gleaner serve` announces the back office's address and serves it on loopback without a credential."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from ..processes import announced_url

ROOT = Path(__file__).resolve().parents[2]


def test_gleaner_serve_prints_the_back_office_url_and_answers_it_without_auth(database_url, tmp_path):
    env = {**os.environ, "GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "gleaner"),
           "GLEANER_WEBHOOK_SECRET": "serve-secret-0123456789abcdef0123456789abcdef",
           "PYTHONPATH": str(ROOT / "shared")}
    process = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "serve", "--port", "0"], env=env,
                               stderr=subprocess.PIPE, text=True)
    try:
        url = announced_url(process, r"back office at (http://127\.0\.0\.1:\d+)/ui/")
        page = httpx.get(url + "/ui/", timeout=10)
        assert page.status_code == 200 and "No sites yet" in page.text
        assert httpx.get(url + "/v1/sites", timeout=10).json() == {"sites": []}
        # The webhook beside it keeps its bearer.
        assert httpx.get(url + "/refs", params={"q": "x"}, timeout=10).status_code == 401
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
