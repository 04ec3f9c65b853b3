"""Webhook deliveries in the background: a daemon thread that works the due queue while its owner goes on.

A crawl ends when its pages are done; it never waits for a subscriber (a receiver answering 500, or
accepting a connection and never answering, once held a run for minutes). Long-lived processes own
a sender for their lifetime (``gleaner watch``, ``gleaner serve``); a crawl gives its sender at most
``GLEANER_NOTIFY_RUN_WAIT`` seconds (default 0) and leaves the rest pending for them, for
``gleaner deliver`` and, in the cloud, for the delivery queue. An attempt cut off when its process
exits keeps its lease and is due again when the lease ends: receivers deduplicate on ``webhook-id``.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import TYPE_CHECKING

from gleaner.changes import delivery
from gleaner.errors import GleanerError

if TYPE_CHECKING:
    from gleaner.app import Deps

log = logging.getLogger(__name__)

# How often an idle sender looks for new deliveries (a crawl's events, a retry coming due).
POLL_SECONDS = 1.0


class DeliverySender:
    """Sends due deliveries on a daemon thread for ``seconds`` (default: until stopped).

    ``with DeliverySender(deps): ...`` for a process's lifetime; ``DeliverySender(deps, seconds=w).start()
    .join()`` for a caller that may wait ``w`` seconds at most.
    """

    def __init__(self, deps: Deps, *, seconds: float = math.inf, poll: float = POLL_SECONDS) -> None:
        self._deps = deps
        self._seconds = seconds
        self._poll = poll
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gleaner-deliveries", daemon=True)
        self.counts: dict[str, int] = {}

    def start(self) -> DeliverySender:
        self._thread.start()
        return self

    def join(self) -> None:
        """Wait until the sender's time is up (or it has nothing left to wait for), then stop it."""
        if math.isfinite(self._seconds):
            self._thread.join(self._seconds)
        self.stop()

    def stop(self) -> None:
        """Stop between two attempts; an attempt in flight runs on (the thread is a daemon: it never holds exit)."""
        self._stop.set()

    def __enter__(self) -> DeliverySender:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.counts = delivery.deliver_due(self._deps, wait_seconds=self._seconds, stop=self._stop,
                                                   poll=self._poll)
                return
            except GleanerError as exc:  # the database may be restarting: try again after a pause
                log.warning("sending webhook deliveries failed: %s", exc)
                self._stop.wait(self._poll)
            except Exception:  # e.g. its owner closed the engine while an attempt was in flight
                log.debug("the delivery sender stopped", exc_info=True)
                return
