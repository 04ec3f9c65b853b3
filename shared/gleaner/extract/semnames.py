"""The extraction pool's semaphores lose their names once every worker holds them: a killed crawl leaks none.

A ``ProcessPoolExecutor`` on the forkserver (extract/pool.py) shares the locks of its call and result
queues with its workers as POSIX named semaphores (``/dev/shm/sem.mp-…``, five a pool): a worker
started by the forkserver opens them by name. The standard library unlinks the names when the queues
are collected or the process exits, and registers them with its resource tracker for a process that
dies first. So a ``kill -9`` of ``gleaner crawl`` had the tracker unlink them and say so on the
command's stderr (``resource_tracker: There appear to be 5 leaked semaphore objects``), and one killed
with its tracker (``kill -9`` of the process group) left the files in /dev/shm for good.

The names are needed only until every worker the pool will ever have has opened them: a pool at its
size starts no other (workers are not replaced), and a worker that answered has opened them. Then the
names are unlinked at once (a semaphore lives on while a process holds it) and the tracker and the
exit-time cleanup are told they are gone. Until then, or where the standard library's insides differ,
nothing changes.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import suppress

# How long each start-up task holds its worker: long enough that the pool's other workers, started
# together, take the other tasks, so one answer from each shows that each opened the queues.
HOLD_SECONDS = 0.1
# Rounds of start-up tasks before giving up (the names then go as before, at the pool's end).
ROUNDS = 5


def started_pid() -> int:
    """Run in a worker: its pid, once it has held the worker :data:`HOLD_SECONDS`."""
    time.sleep(HOLD_SECONDS)
    return os.getpid()


def forget_once_started(executor: ProcessPoolExecutor, workers: int) -> None:
    """Start the pool's ``workers`` processes now (one task each; RuntimeError if it is shut down) and, in
    the background, unlink its semaphores' names once each of them answered one."""
    started = [executor.submit(started_pid) for _ in range(workers)]
    threading.Thread(target=_forget, args=(executor, workers, started), name="gleaner-extract-semnames",
                     daemon=True).start()


def _forget(executor: ProcessPoolExecutor, workers: int, started: list[Future[int]]) -> None:
    answered: set[int] = set()
    for _ in range(ROUNDS):
        for future in started:
            try:
                answered.add(future.result())
            except Exception:  # cancelled by a shutdown, or the pool broke: nothing to do
                return
        if forget_names(executor, workers, answered):
            return
        try:  # a worker took two tasks while another was starting: ask again
            started = [executor.submit(started_pid) for _ in range(workers)]
        except RuntimeError:  # shut down meanwhile
            return


def forget_names(executor: ProcessPoolExecutor, workers: int, answered: set[int]) -> int:
    """Unlink the pool's semaphore names if every one of its ``workers`` processes answered; how many."""
    lock = getattr(executor, "_shutdown_lock", None)
    if lock is None:
        return 0
    with lock:  # not while the pool shuts down (its queues' own cleanup may have run)
        if getattr(executor, "_shutdown_thread", True) or getattr(executor, "_broken", True):
            return 0
        processes = getattr(executor, "_processes", None) or {}
        if len(processes) < workers or not set(processes) <= answered:
            return 0  # a worker may still start and open them by name
        return _unlink(executor)


def _unlink(executor: ProcessPoolExecutor) -> int:
    from _multiprocessing import sem_unlink
    from multiprocessing import resource_tracker, synchronize, util

    names = []
    for queue in (getattr(executor, "_call_queue", None), getattr(executor, "_result_queue", None)):
        for attr in ("_rlock", "_wlock", "_sem"):
            name = getattr(getattr(getattr(queue, attr, None), "_semlock", None), "name", None)
            if isinstance(name, str):
                names.append(name)
    cleanup = getattr(synchronize.SemLock, "_cleanup", None)
    registry = getattr(util, "_finalizer_registry", None)
    if cleanup is None or registry is None:
        return 0
    for name in names:
        with suppress(OSError):
            sem_unlink(name)
        resource_tracker.unregister(name, "semaphore")
    # The exit-time cleanup would unlink them again and print a traceback for each: cancelled.
    for finalizer in list(registry.values()):
        if getattr(finalizer, "_callback", None) is cleanup and getattr(finalizer, "_args", (None,))[0] in names:
            finalizer.cancel()
    return len(names)
