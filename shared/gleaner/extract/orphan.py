"""Extraction processes never outlive the crawl that started them (``kill -9`` of ``gleaner crawl`` included).

The pool's processes hold each other alive once their parent is gone: every worker keeps both ends of
the pool's call queue and the forkserver's "alive" pipe, so none of them ever reads end-of-file, and
the resource tracker waits for them all. So each process watches its own parent instead:

- a worker (forked by the forkserver's one thread) asks the kernel for SIGKILL when that parent dies
  (``prctl(PR_SET_PDEATHSIG)`` on Linux, through ctypes), and polls for it elsewhere;
- the forkserver polls (``os.getppid()`` changing): a parent-death signal fires when the parent
  *thread* ends, and the thread that starts the forkserver is a short-lived one of the pool's;
- the resource tracker exits by itself once every process holding its pipe is gone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

# How often a process without the kernel's help looks whether its parent is gone: a crawl killed
# with -9 leaves its extraction processes at most this long (and their children one more round).
POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1


def exit_with_parent(*, deathsig: bool) -> None:
    """End this process when its parent process ends (``deathsig``: ask the kernel, where it can)."""
    parent = os.getppid()
    if deathsig:
        _ask_for_parent_death_signal()
    if os.getppid() != parent or parent == 1:  # the parent died before the request took hold
        os._exit(1)
    threading.Thread(target=_watch, args=(parent,), name="gleaner-orphan-watch", daemon=True).start()


def worker_started() -> None:
    """The pool workers' initializer: their parent is the forkserver's single (long-lived) thread."""
    exit_with_parent(deathsig=True)


def _ask_for_parent_death_signal() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):  # no libc prctl here: the polling thread alone does it
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    os._exit(1)
