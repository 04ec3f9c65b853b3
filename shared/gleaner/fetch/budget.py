"""A run's budget of requests, wire bytes and wall time, shared by every fetch of the run.

Exhausting any part of it makes every later request ``exhausted`` (never silently
dropped), and the run ends ``partial``. A stage that resumes a run in another
process (a scrape batch) passes what the run already spent, so the budget is per
run, not per process.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Spent:
    """What a run spent before this process took over."""

    requests: int = 0
    bytes: int = 0
    seconds: float = 0.0


class RunBudget:
    """Thread-safe counters against optional limits (0 means unlimited)."""

    def __init__(self, *, max_requests: int = 0, max_bytes: int = 0, max_seconds: float = 0.0,
                 spent: Spent = Spent()) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.requests = spent.requests
        self.bytes = spent.bytes
        self._started = time.monotonic() - spent.seconds
        self._lock = threading.Lock()
        self._exhausted: str | None = None

    @property
    def deadline(self) -> float | None:
        """The run's wall-time deadline on the time.monotonic clock, if it has one."""
        return self._started + self.max_seconds if self.max_seconds else None

    def exhausted(self) -> str | None:
        """Why the budget is spent, or None."""
        with self._lock:
            return self._check()

    def _check(self) -> str | None:
        if self._exhausted is None:
            if self.max_requests and self.requests >= self.max_requests:
                self._exhausted = f"run request budget of {self.max_requests} spent"
            elif self.max_bytes and self.bytes >= self.max_bytes:
                self._exhausted = f"run byte budget of {self.max_bytes} spent"
            elif self.max_seconds and time.monotonic() >= self._started + self.max_seconds:
                self._exhausted = f"run time budget of {self.max_seconds:g}s spent"
        return self._exhausted

    def claim_request(self) -> str | None:
        """Take one request from the budget; the reason if none is left."""
        with self._lock:
            reason = self._check()
            if reason is None:
                self.requests += 1
            return reason

    def add_bytes(self, count: int) -> str | None:
        """Count wire bytes; the reason once the byte budget is overrun."""
        with self._lock:
            self.bytes += count
            if self.max_bytes and self.bytes > self.max_bytes:
                self._exhausted = self._exhausted or f"run byte budget of {self.max_bytes} spent"
                return self._exhausted
            return None
