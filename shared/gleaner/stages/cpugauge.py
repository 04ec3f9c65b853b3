"""How busy this machine's cores have been lately: whether there is CPU to spare for work that can wait.

The in-process crawl hands pages on early only while the cores have room (:mod:`gleaner.stages.scrapebatch`):
storing a few pages costs a message's fixed work, worth paying while the cores would otherwise idle
through the hosts' delays, not while they are the limit. The reading is the whole machine's, since the
extraction processes and the embedded PostgreSQL share the cores with this one.

Linux's ``/proc/stat`` is read at most every :data:`PERIOD` seconds and compared with the reading before;
where it does not exist, the one-minute load average stands in (coarse, but it errs both ways alike).
"""

from __future__ import annotations

import os
import threading
import time

# Seconds between two readings: the busy share is over the last period or two.
PERIOD = 0.25


class CpuGauge:
    """The share (0..1) of the machine's CPU time spent busy since the reading before last."""

    def __init__(self, path: str = "/proc/stat") -> None:
        self.path = path
        self._lock = threading.Lock()
        self._at = 0.0
        self._last: tuple[int, int] | None = None
        self._busy = 0.0

    def busy(self) -> float:
        now = time.monotonic()
        with self._lock:
            if now - self._at < PERIOD:
                return self._busy
            self._at = now
            reading = self._read()
            if reading is None:
                self._busy = _from_load_average()
            else:
                if self._last is not None:
                    busy, total = reading[0] - self._last[0], reading[1] - self._last[1]
                    self._busy = busy / total if total > 0 else self._busy
                self._last = reading
            return self._busy

    def _read(self) -> tuple[int, int] | None:
        """(busy ticks, all ticks) of every core since boot, or None where /proc/stat cannot be read."""
        try:
            with open(self.path, "rb") as handle:
                fields = handle.readline().split()[1:]
        except OSError:
            return None
        ticks = [int(f) for f in fields[:8]]
        if len(ticks) < 5:
            return None
        idle = ticks[3] + ticks[4]  # idle and iowait
        return sum(ticks) - idle, sum(ticks)


def _from_load_average() -> float:
    try:
        return min(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:
        return 0.0


GAUGE = CpuGauge()
