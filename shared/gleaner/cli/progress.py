"""A crawl's progress on stderr, counted in pages: rich columns on a terminal, plain lines otherwise.

Mapping reports the URLs it has found; scraping reports pages done of the run's total, the rate and
the time left. Without a terminal (CI, a log file) a plain line comes every ``interval`` seconds
while something moved, so a long polite crawl is never silent; scrape batches are reported in
batch order although two of them run at once.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import click

from gleaner.messages import CrawlMapped, Message, ScrapeBatch

# A plain line at most this often: often enough to show life, rarely enough for a log file.
PLAIN_INTERVAL = 5.0
# Politeness alone making a crawl longer than this earns an up-front estimate.
LONG_CRAWL_SECONDS = 60.0


def duration(span: float) -> str:
    seconds = max(0, round(span))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """Watches a run (a :class:`~gleaner.observe.RunObserver` plus the bus's dispatches).

    ``pages_total(run_id)`` says how many pages the run will scrape once sample has decided;
    ``seconds_per_page`` is what politeness costs per page on one host (delay / concurrency).
    """

    def __init__(self, enabled: bool = True, *, pages_total: Callable[[str], int] | None = None,
                 seconds_per_page: float = 0.0, interval: float = PLAIN_INTERVAL, tty: bool | None = None) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.interval = interval
        self._pages_total = pages_total
        self._seconds_per_page = seconds_per_page
        self._lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None
        self._phase = "mapping"
        self.urls = 0
        self.done = 0
        self.total: int | None = None
        self._started = 0.0
        self._batches_done: dict[int, int] = {}
        self._next_batch = 0
        self._last_shown: tuple[str, int, int] = ("", -1, -1)
        self._last_line = ""  # the last line said, so the same news is not printed twice in a row
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> Progress:
        if not self.enabled:
            return self
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                            console=Console(stderr=True), transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task("mapping: 0 URLs found", total=None, rate="")
        else:
            self._ticker = threading.Thread(target=self._tick, name="gleaner-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1.0)
        self._flush_batches(final=True)
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def line(self, text: str) -> None:
        if not self.enabled:
            return
        with self._lock:  # the ticker may have just said it ("mapping: 12 URLs found" twice in a row)
            if text == self._last_line:
                return
            self._last_line = text
        if self._bar is not None:
            self._bar.console.print(f"gleaner: {text}", highlight=False)
        else:
            click.echo(f"gleaner: {text}", err=True)

    # -- the observer port -----------------------------------------------------------------------

    def urls_found(self, count: int, run_id: str | None = None) -> None:
        with self._lock:
            self.urls = count
        if self._bar is not None:
            self._bar.update(self._task, description=f"mapping: {count} URLs found")

    def page_fetched(self, run_id: str | None = None) -> None:
        with self._lock:
            if not self._started:
                self._started = time.monotonic()
            self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, rate=self._rate_text())

    # -- the bus's dispatches --------------------------------------------------------------------

    def on_message(self, topic: str, message: Message) -> None:
        # Called once each message's handlers finished: CrawlMapped means sample has decided.
        if isinstance(message, CrawlMapped):
            self.line(f"mapping: {self.urls} URLs found")
            self.scraping(message.run_id)
        elif isinstance(message, ScrapeBatch):
            self._batch_done(message)

    def _batch_done(self, message: ScrapeBatch) -> None:
        with self._lock:
            self._batches_done[message.batch_no] = len(message.document_ids)
        self._flush_batches()

    def _flush_batches(self, final: bool = False) -> None:
        lines: list[str] = []
        with self._lock:
            while self._next_batch in self._batches_done or (final and self._batches_done):
                batch_no = self._next_batch if self._next_batch in self._batches_done else min(self._batches_done)
                pages = self._batches_done.pop(batch_no)
                lines.append(f"batch {batch_no}: {pages} pages done")
                self._next_batch = batch_no + 1
        for text in lines:
            self.line(text)

    def scraping(self, run_id: str) -> None:
        """Sample has decided: the run's page total is known; say how long politeness makes it."""
        total = self._pages_total(run_id) if self._pages_total is not None else 0
        with self._lock:
            self.total = total
            self._phase = "scraping"
        if self._bar is not None:
            self._bar.update(self._task, total=total, description="scraping")
        at_least = total * self._seconds_per_page
        self.line(f"scraping: {total} pages" + (
            f"; politeness alone makes this at least {duration(at_least)} (one host, "
            f"{self._seconds_per_page:g} s a page; --delay / --concurrency change it for sites you may load harder)"
            if at_least >= LONG_CRAWL_SECONDS else ""))

    # -- plain lines -----------------------------------------------------------------------------

    def _rate(self) -> float:
        elapsed = time.monotonic() - self._started if self._started else 0.0
        return self.done / elapsed if elapsed > 0 else 0.0

    def _rate_text(self) -> str:
        rate = self._rate()
        return f"{rate:.1f} pages/s" if rate else ""

    def status_line(self) -> str:
        with self._lock:
            phase, urls, done, total = self._phase, self.urls, self.done, self.total
        if phase in ("mapping", "sampling") and not done:
            return f"mapping: {urls} URLs found"
        rate = self._rate()
        text = f"scraping: {done}/{total if total is not None else '?'} pages"
        if rate:
            text += f", {rate:.1f} pages/s"
            if total:
                text += f", ETA {duration(max(total - done, 0) / rate)}"
        return text

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                state = (self._phase, self.urls, self.done)
            if state != self._last_shown and (state[1] or state[2]):
                self._last_shown = state
                self.line(self.status_line())
