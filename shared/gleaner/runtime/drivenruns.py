"""The runs this process is driving right now, so a resume does not race the driver that is still
winding down after a cancel.

Cancelling a run ends it at once, but the thread that drove it finishes its batch in flight and then
settles the run. A resume claimed in between made the run active again, and that winding-down driver
then found an active run with pages unsettled and ended it ``failed``. A resume in this process now
waits for the previous driver to let go (a few seconds at most), or says exactly why it cannot.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_driven: dict[str, threading.Event] = {}


@contextmanager
def driving(run_id: str) -> Iterator[None]:
    """Mark ``run_id`` as driven by this process until the block ends (its settling included)."""
    done = threading.Event()
    with _lock:
        _driven[run_id] = done
    try:
        yield
    finally:
        with _lock:
            if _driven.get(run_id) is done:
                del _driven[run_id]
        done.set()


def wait_released(run_id: str, seconds: float) -> bool:
    """True once no driver of this process holds ``run_id`` (at once if none does); False after ``seconds``."""
    with _lock:
        held = _driven.get(run_id)
    return held is None or held.wait(seconds)
