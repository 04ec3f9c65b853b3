"""A run's status and the process that drives it: what run control decides on, as values.

::

    active (a stage may still work on it)      terminal (nothing will, unless resumed)
    queued → mapping → mapped → sampling →     finished     every included page settled
    scraping                                   partial      settled, some pages limited or not stored
                                               failed       could not map, or nothing could be stored
                                               cancelled    the operator said stop (``runs cancel``)
                                               interrupted  Ctrl-C / SIGTERM, or a crash settled by sweep

A local run records its worker as ``host:pid:start`` (the process's start time, so a reused pid
is not mistaken for the crawl): on the same host that says for sure whether the worker is alive.
A cloud run has no worker; its ``heartbeat_at`` (moved by every stage) is all a sweep can go by.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class RunStatus(StrEnum):
    QUEUED = "queued"
    MAPPING = "mapping"
    MAPPED = "mapped"
    SAMPLING = "sampling"
    SCRAPING = "scraping"
    FINISHED = "finished"
    PARTIAL = "partial"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    @property
    def terminal(self) -> bool:
        return self not in ACTIVE


ACTIVE = (RunStatus.QUEUED, RunStatus.MAPPING, RunStatus.MAPPED, RunStatus.SAMPLING, RunStatus.SCRAPING)
TERMINAL = tuple(s for s in RunStatus if s not in ACTIVE)


class Liveness(StrEnum):
    ALIVE = "alive"  # a process on this host with the recorded pid and start time exists
    GONE = "gone"  # the recorded process is not running on this host
    UNKNOWN = "unknown"  # no worker recorded (cloud) or another host's: only the heartbeat tells


@dataclass(frozen=True, slots=True)
class Worker:
    host: str
    pid: int
    start: str  # the process's start time in clock ticks since boot ("" where /proc is absent)

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}:{self.start}"

    @classmethod
    def parse(cls, text: str | None) -> Worker | None:
        if not text:
            return None
        host, _, rest = text.rpartition(":")
        host, _, pid = host.rpartition(":")
        if not host or not pid.isdigit():
            return None
        return cls(host, int(pid), rest)

    @classmethod
    def current(cls) -> Worker:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _start_time(pid) or "")

    def liveness(self) -> Liveness:
        if self.host != socket.gethostname():
            return Liveness.UNKNOWN
        started = _start_time(self.pid)
        if started is None:
            return Liveness.GONE
        return Liveness.ALIVE if not self.start or started == self.start else Liveness.GONE


def _start_time(pid: int) -> str | None:
    """The start time of a running (not zombie) process, or None if there is none."""
    if not Path("/proc/self/stat").exists():  # not Linux: all we can tell is whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = stat[stat.rfind(")") + 2:].split()
    state, start = fields[0], fields[19]
    return None if state in ("Z", "X") else start
