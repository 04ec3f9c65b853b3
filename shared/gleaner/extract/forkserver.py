"""The extraction processes' forkserver: started, and stopped, apart from the pool that forks from it.

A command that will extract (``tick``, ``watch``, ``crawl``) starts it first thing
(:mod:`gleaner.earlystart`), so the extractors' imports run in that process while the command
imports its own modules and its database starts; the pool built later forks its workers from it.
Light on purpose: importing this module imports neither the pool nor the extractors.
"""

from __future__ import annotations

import os
import signal
from contextlib import suppress

# What the forkserver imports before it forks a worker: the extractors (trafilatura, lxml, pypdf are
# costly imports, which extract/ itself defers) and what trafilatura builds on first use (extract/warm.py),
# done once there instead of in every worker; serverwatch ends it with its parent (extract/orphan.py).
PRELOAD = ["gleaner.extract.serverwatch", "gleaner.extract.page", "trafilatura", "pypdf", "gleaner.extract.warm"]

# Whether this process started the forkserver before any pool asked: the first pool closed stops it.
_started_early = False


def start(*, early: bool = False) -> None:
    """Spawn the forkserver (once a process) and return at once; its imports go on in that process.

    ``early``: before any pool exists (earlystart.py); the first pool that closes then stops it too."""
    global _started_early
    import multiprocessing
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    forkserver.ensure_running()
    _started_early = _started_early or early


def started_early() -> bool:
    return _started_early


def stop() -> None:
    """Stop the forkserver now that its workers are gone, rather than when it sees this process exit.

    It inherited this process's stdout and stderr: until it exits (polling for its parent's end, see
    extract/orphan.py), whoever reads the command's output (a pipe, a caller's subprocess) waits for
    it. It holds nothing to clean up, so it is killed rather than asked: asked, it would first finish
    its imports (a prestarted one) and then tear its interpreter down, while this command waits. A
    pool started later in this process starts a new one (a process has one forkserver: its pool closes
    at the end). ``_stop`` is the standard library's own way
    to forget it (its tests use it); a Python without it leaves the forkserver to its watch.
    """
    global _started_early
    from multiprocessing import forkserver

    _started_early = False
    server = getattr(forkserver, "_forkserver", None)
    halt = getattr(server, "_stop", None)
    if halt is None:
        return
    pid = getattr(server, "_forkserver_pid", None)
    if pid is not None:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with suppress(OSError):  # already gone
        halt()
