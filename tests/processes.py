"""Helpers for tests that start a real Gleaner process and talk to it."""

from __future__ import annotations

import re
import subprocess
import time

import pytest


def announced_url(process: subprocess.Popen[str], pattern: str, seconds: float = 60) -> str:
    """The URL a starting process prints on stderr (group 1 of ``pattern``); fails if it exits or stays silent."""
    assert process.stderr is not None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line and process.poll() is not None:
            pytest.fail(f"the process exited with {process.returncode} before announcing its address")
        match = re.search(pattern, line)
        if match:
            return match.group(1)
    pytest.fail("the process did not announce its address in time")
