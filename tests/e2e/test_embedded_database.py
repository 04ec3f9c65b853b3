"""The embedded PostgreSQL never leaks: a holder killed with SIGKILL leaves an orphan the next command stops."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

# A gleaner process that starts the embedded database, says where it is, and waits to be killed.
HOLDER = """
import sys, time
from pathlib import Path
from gleaner.store.backends.db import embedded_url
print(embedded_url(Path(sys.argv[1])), flush=True)
time.sleep(300)
"""


def postmaster_pid(pgdata: Path) -> int | None:
    pid_file = pgdata / "postmaster.pid"
    return int(pid_file.read_text().split("\n", 1)[0]) if pid_file.exists() else None


def running(pid: int | None) -> bool:
    return pid is not None and psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_a_postmaster_orphaned_by_kill_9_is_stopped_by_the_next_command(tmp_path):
    data_dir = tmp_path / "home"
    pgdata = data_dir / "pg"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env["GLEANER_HOME"] = str(data_dir)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(data_dir)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    postmaster = None
    try:
        assert holder.stdout is not None and holder.stdout.readline().startswith("postgresql://")
        postmaster = postmaster_pid(pgdata)
        assert running(postmaster)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        assert holder.pid in json.loads((pgdata / ".handle_pids.json").read_text())
        assert running(postmaster)  # the orphan: nobody is left to stop it

        command = subprocess.run([sys.executable, "-m", "gleaner.cli", "db", "upgrade"], env=env,
                                 capture_output=True, text=True, timeout=180, check=False)
        assert command.returncode == 0, command.stderr
        assert wait_until(lambda: not running(postmaster), 20), "the orphan postmaster is still running"
        assert json.loads((pgdata / ".handle_pids.json").read_text()) == []
    finally:
        if holder.poll() is None:
            holder.kill()
        if running(postmaster):  # never leave a server behind, whatever the test saw
            assert postmaster is not None
            os.kill(postmaster, signal.SIGTERM)
