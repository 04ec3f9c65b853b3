"""How long this process has found the database unreachable: one clock for every connection.

Each new connection waits out a restart (``GLEANER_DATABASE_WAIT_SECONDS``, 30 s), but a crawl makes
many: a retried message, a store call retried, the run's settling, each waited the whole time again,
and a crawl took minutes to give up. The wait is now counted from the first failure any connection
met, for the process: once it has passed, every connect fails at once, the bus's draining loop stops
the command (:func:`raise_if_gone`), and the retries' log lines are quiet meanwhile (the command's
one error line says what happened). A successful connect ends the outage.
"""

from __future__ import annotations

import threading
import time

_LOCK = threading.Lock()
_SINCE: list[float | None] = [None]
_LAST: list[str] = [""]
# The longest wait of the engines built in this process (their GLEANER_DATABASE_WAIT_SECONDS).
LIMIT: list[float] = [30.0]
# The command is never stopped sooner: with no connect wait (GLEANER_DATABASE_WAIT_SECONDS=0) the
# stores' own retries still ride out a restart of a few seconds, as they did before this clock.
GIVE_UP_FLOOR = 30.0


def unreachable(error: object) -> None:
    """A connect failed: the outage starts now, unless it already had."""
    with _LOCK:
        if _SINCE[0] is None:
            _SINCE[0] = time.monotonic()
        _LAST[0] = str(error).splitlines()[0][:300] if str(error) else type(error).__name__


def reached() -> None:
    with _LOCK:
        _SINCE[0] = None


def down_for() -> float | None:
    """Seconds since the outage began, or None while the database answers."""
    since = _SINCE[0]
    return None if since is None else time.monotonic() - since


def wait_left(wait_seconds: float) -> float:
    """How long a new connection may still wait for the database: the whole wait when none is failing."""
    since = down_for()
    return wait_seconds if since is None else max(0.0, wait_seconds - since)


def raise_if_gone() -> None:
    """Raise DatabaseUnavailable in the main thread once the outage outlasted the wait: the command ends."""
    since = down_for()
    if since is None or since < max(LIMIT[0], GIVE_UP_FLOOR) \
            or threading.current_thread() is not threading.main_thread():
        return
    from gleaner.store.backends.dberrors import DatabaseUnavailable

    raise DatabaseUnavailable(f"database error: unreachable for {since:.0f} s ({_LAST[0]})")
