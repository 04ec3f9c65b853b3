"""Ctrl-C (or SIGTERM) that no phase of a crawl or tick can lose.

Python turns SIGINT into a KeyboardInterrupt raised wherever the main thread happens to be. Raised
inside a finalizer (``__del__``, a weakref callback, a generator closed by the garbage collector) it
is printed as "Exception ignored" and dropped, and the crawl went on to its end and exited 0. Under
:func:`catching`, the signal is also remembered, and the bus's draining loop raises it again at the
next message it hears of (:func:`raise_if_requested`), so a lost one costs at most one message.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_REQUESTED = threading.Event()
_DEPTH = [0]  # catching() nests (a tick's command around its engine's drive): the outermost forgets the signal


def _on_signal(_signo: int, _frame: Any) -> None:
    _REQUESTED.set()
    raise KeyboardInterrupt


@contextmanager
def catching() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread, and are remembered until the end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signo: signal.signal(signo, _on_signal) for signo in (signal.SIGINT, signal.SIGTERM)}
    _DEPTH[0] += 1
    try:
        yield
    finally:
        for signo, handler in previous.items():
            signal.signal(signo, handler)
        _DEPTH[0] -= 1
        if _DEPTH[0] == 0:
            _REQUESTED.clear()


def requested() -> bool:
    return _REQUESTED.is_set()


def raise_if_requested() -> None:
    """Raise KeyboardInterrupt again if a signal came and this is the main thread (where it was raised first)."""
    if _REQUESTED.is_set() and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt
