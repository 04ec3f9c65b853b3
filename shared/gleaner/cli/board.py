"""Every active run on one screen: a line per site with its pages done, rate and time left.

What the multi-site engine (``gleaner tick``, ``watch``, ``crawl URL URL ...``) shows on stderr: on a
terminal, one rich progress row per run; otherwise a plain block of lines every ``interval`` seconds
while something moved, so a long polite cycle over many sites is never silent in a log.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from gleaner.cli.progress import PLAIN_INTERVAL, duration
from gleaner.messages import CrawlMapped, Message


@dataclass(slots=True)
class RunLine:
    """One run's counts as the board shows them."""

    site: str
    urls: int = 0
    done: int = 0
    total: int | None = None
    started: float = 0.0
    task: Any = None

    def rate(self, now: float) -> float:
        elapsed = now - self.started if self.started else 0.0
        return self.done / elapsed if elapsed > 0 else 0.0

    def text(self, now: float) -> str:
        if self.total is None and not self.done:
            return f"{self.site}: mapping, {self.urls} URLs found"
        rate = self.rate(now)
        text = f"{self.site}: {self.done}/{self.total if self.total is not None else '?'} pages"
        if rate:
            text += f", {rate:.1f} pages/s"
            if self.total:
                text += f", ETA {duration(max(self.total - self.done, 0) / rate)}"
        return text


class RunBoard:
    """A :class:`~gleaner.observe.RunObserver` for many runs plus the bus's dispatches.

    ``sites`` names each run's site (run id -> site); ``pages_total(run_id)`` is the run's page total
    once sample has decided.
    """

    def __init__(self, sites: dict[str, str], *, pages_total: Callable[[str], int] | None = None,
                 interval: float = PLAIN_INTERVAL, tty: bool | None = None) -> None:
        self.runs = {run_id: RunLine(site) for run_id, site in sites.items()}
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.interval = interval
        self._pages_total = pages_total
        self._lock = threading.Lock()
        self._bar: Any = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._last_shown: tuple[tuple[int, int], ...] = ()
        # Runs whose total is to be read: on a thread of its own, not the bus's draining thread (each
        # is a database round trip, and fifty runs mapped together held their next dispatches back).
        self._totals: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._reader: threading.Thread | None = None

    def __enter__(self) -> RunBoard:
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                            console=Console(stderr=True), transient=False)
            self._bar.__enter__()
            for line in self.runs.values():
                line.task = self._bar.add_task(f"{line.site}: mapping", total=None, rate="")
        else:
            self._ticker = threading.Thread(target=self._tick, name="gleaner-board", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._reader is not None:
            self._totals.put(None)
            self._reader.join(timeout=1.0)
        if self._ticker is not None:
            self._ticker.join(timeout=1.0)
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def line(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(f"gleaner: {text}", highlight=False)
        else:
            click.echo(f"gleaner: {text}", err=True)

    # -- the observer port -----------------------------------------------------------------------

    def urls_found(self, count: int, run_id: str | None = None) -> None:
        line = self.runs.get(run_id or "")
        if line is None:
            return
        line.urls = count
        if self._bar is not None:
            self._bar.update(line.task, description=f"{line.site}: mapping, {count} URLs")

    def page_fetched(self, run_id: str | None = None) -> None:
        line = self.runs.get(run_id or "")
        if line is None:
            return
        now = time.monotonic()
        with self._lock:
            if not line.started:
                line.started = now
            line.done += 1
        if self._bar is not None:
            rate = line.rate(now)
            self._bar.update(line.task, completed=line.done, rate=f"{rate:.1f} pages/s" if rate else "")

    def on_message(self, message: Message) -> None:
        """Called once each message's handlers finished: CrawlMapped means sample has decided."""
        if isinstance(message, CrawlMapped) and message.run_id in self.runs:
            if self._pages_total is None:
                self._set_total(message.run_id, 0)
                return
            with self._lock:
                if self._reader is None:
                    self._reader = threading.Thread(target=self._read_totals, name="gleaner-board-totals",
                                                    daemon=True)
                    self._reader.start()
            self._totals.put(message.run_id)

    def _read_totals(self) -> None:
        while (run_id := self._totals.get()) is not None:
            try:
                total = self._pages_total(run_id) if self._pages_total is not None else 0
            except Exception:  # only the display's: the run goes on, its line shows "?" pages
                continue
            self._set_total(run_id, total)

    def _set_total(self, run_id: str, total: int) -> None:
        line = self.runs[run_id]
        line.total = total
        if self._bar is not None:
            self._bar.update(line.task, total=line.total, description=line.site)

    # -- plain lines -----------------------------------------------------------------------------

    def status_lines(self) -> list[str]:
        now = time.monotonic()
        return [line.text(now) for line in self.runs.values()]

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            state = tuple((line.urls, line.done) for line in self.runs.values())
            if state != self._last_shown and any(urls or done for urls, done in state):
                self._last_shown = state
                for text in self.status_lines():
                    self.line(text)
