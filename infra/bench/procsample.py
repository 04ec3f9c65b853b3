"""A benchmarked process's footprint while it runs: its tree's peak RSS, its CPU apart by part (the main
process, its extraction workers, an embedded PostgreSQL), and how busy the whole machine was, second by
second (``multisite.py``)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from contextlib import suppress

import psutil


class PeakRss:
    """The largest summed RSS of a process and its descendants, sampled every 0.2 s; with ``pgdata``, also
    the CPU seconds of the process (its own, its live children's and those it reaped: the extraction
    workers) and of the PostgreSQL server whose command line names ``pgdata`` (the postmaster's own, its
    live backends' and the ones it reaped)."""

    def __init__(self, pid: int, pgdata: str | None = None) -> None:
        self.peak = 0
        self.pgdata = pgdata
        self.cpu = {"main": 0.0, "workers": 0.0, "postgres": 0.0}
        # (monotonic time, the whole machine's busy share since the sample before): when the cores idled
        # and when they were the limit, over the process's life (the other tool ran alone, so it is the
        # process's own shape).
        self.busy: list[tuple[float, float]] = []
        self._ticks = _machine_ticks()
        self._postmaster: psutil.Process | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(pid,), daemon=True)
        self._thread.start()

    def _sample(self, pid: int) -> None:
        try:
            root = psutil.Process(pid)
        except psutil.Error:
            return
        while not self._stop.wait(0.2):
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                return
            total = 0
            for proc in tree:
                with suppress(psutil.Error):  # a process that just ended
                    total += proc.memory_info().rss
            self.peak = max(self.peak, total)
            ticks = _machine_ticks()
            spent = ticks[1] - self._ticks[1]
            if spent > 0:
                self.busy.append((time.monotonic(), (ticks[0] - self._ticks[0]) / spent))
            self._ticks = ticks
            if self.pgdata is not None:
                self._cpu(root, tree[1:])

    def _cpu(self, root: psutil.Process, children: list[psutil.Process]) -> None:
        with suppress(psutil.Error):
            own = root.cpu_times()
            live = 0.0
            for proc in children:
                with suppress(psutil.Error):
                    if proc.name().startswith("postgres"):
                        continue
                    t = proc.cpu_times()
                    live += t.user + t.system
            self.cpu["main"] = max(self.cpu["main"], own.user + own.system)
            self.cpu["workers"] = max(self.cpu["workers"], own.children_user + own.children_system + live)
        if self._postmaster is None:
            for proc in psutil.process_iter(["name", "cmdline"]):
                if (proc.info["name"] or "").startswith("postgres") and self.pgdata in " ".join(
                        proc.info["cmdline"] or []):
                    self._postmaster = proc
                    break
        if self._postmaster is not None:
            with suppress(psutil.Error):
                pm = self._postmaster.cpu_times()
                total = pm.user + pm.system + pm.children_user + pm.children_system
                for proc in self._postmaster.children():
                    with suppress(psutil.Error):
                        t = proc.cpu_times()
                        total += t.user + t.system
                self.cpu["postgres"] = max(self.cpu["postgres"], total)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=2)
        return self.peak


def _machine_ticks() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine since boot (idle and I/O wait are not busy)."""
    times = psutil.cpu_times()
    every = sum(times)
    return every - times.idle - getattr(times, "iowait", 0.0), every


def busy_by_second(samples: list[tuple[float, float]], started: float) -> list[int]:
    """The machine's busy share in percent for each whole second after ``started`` (the samples' mean)."""
    seconds: dict[int, list[float]] = {}
    for at, share in samples:
        if at >= started:
            seconds.setdefault(int(at - started), []).append(share)
    last = max(seconds, default=-1)
    return [round(100 * sum(v) / len(v)) if (v := seconds.get(n)) else 0 for n in range(last + 1)]


class BusyLoops:
    """``count`` processes that each spin one core for as long as the bench runs (``multisite.py --busy``):
    a machine shared with other work, for both tools alike. Each stops by itself after ``seconds``."""

    def __init__(self, count: int, seconds: float = 3600.0) -> None:
        self.count, self.seconds = count, seconds
        self._procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> BusyLoops:
        spin = f"import time\nend = time.monotonic() + {self.seconds}\nwhile time.monotonic() < end:\n    pass\n"
        self._procs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(self.count)]
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self._procs:
            proc.kill()
            proc.wait()
        self._procs.clear()
