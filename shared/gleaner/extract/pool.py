"""Extraction off the fetch path: a process pool sized to the cores (extraction is CPU-bound).

With one worker (Cloud Functions, tests) it runs in-process and starts nothing. With more, the worker
processes start on the first page that needs extraction (or an earlier :meth:`ExtractPool.warm`), so a
run whose pages all come back unchanged starts none.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import suppress
from typing import Any, TypeVar

from gleaner.extract.orphan import worker_started
from gleaner.extract.page import ExtractedPage, extract_pages
from gleaner.extract.semnames import forget_once_started

Items = list[tuple[bytes, str | None, str, str | None]]
# What the forkserver imports before it forks a worker: the extractors (trafilatura, lxml, pypdf are
# costly imports, which extract/ itself defers) and what trafilatura builds on first use (extract/warm.py),
# done once there instead of in every worker; serverwatch ends it with its parent (extract/orphan.py).
PRELOAD = ["gleaner.extract.serverwatch", "gleaner.extract.page", "trafilatura", "pypdf", "gleaner.extract.warm"]
T = TypeVar("T")


class ExtractPool:
    def __init__(self, workers: int = 0) -> None:
        self.workers = workers or os.cpu_count() or 1
        self._executor: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._warming: threading.Thread | None = None
        # Pages submitted while the processes start: handed to them once they are up, so that a fetch
        # loop never waits for a process start (forkserver imports the extractors first).
        self._queued: list[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]]] | None = []
        self._closed = False
        self._prestarted = False
        self._aside: ProcessPoolExecutor | None = None
        # Run in the process beside the workers as soon as they are up (retrieval/prepare.py loads the
        # embedder there), so a stage's first call_aside does not wait for it.
        self.aside_warmup: tuple[Callable[..., Any], tuple[Any, ...]] | None = None

    @property
    def started(self) -> bool:
        """Whether any extraction process was started (a run of unchanged pages starts none)."""
        return self._warming is not None

    def prestart(self) -> None:
        """Start the forkserver now (its imports run in the background), before anything says a page needs
        extraction: a command that likely will (a tick, watch, several sites) overlaps those imports
        with its database's start and its runs' map stage. No worker is forked until :meth:`warm` or a
        page; a pool closed without one stops the forkserver at once, mid-import if need be."""
        if self.workers <= 1:
            return
        with self._lock:
            if self._prestarted or self._warming is not None or self._closed:
                return
            import multiprocessing
            from multiprocessing import forkserver

            multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
            forkserver.ensure_running()  # spawns it and returns; the imports go on in that process
            self._prestarted = True

    def warm(self) -> None:
        """Start the worker processes now, in the background, rather than at the first page (once).

        The local runner calls this before a site's first crawl maps it (every page will need
        extraction, and map's requests leave a core idle). Otherwise the first :meth:`submit` starts them.
        """
        if self.workers <= 1:
            return
        with self._lock:
            if self._warming is not None or self._closed:
                return
            import multiprocessing

            # forkserver: workers start from a clean process, not a copy of a threaded one, with PRELOAD
            # imported once before it forks them (ignored if this process started one already).
            ctx = multiprocessing.get_context("forkserver")
            # Every process of the pool exits when its parent does, however the crawl ends (extract/orphan.py).
            ctx.set_forkserver_preload(PRELOAD)
            executor = self._executor = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx,
                                                            initializer=worker_started)
            # A submit forks a worker and waits for it (and for the forkserver's imports): not on the caller's thread.
            self._warming = threading.Thread(target=self._spawn, args=(executor,), name="gleaner-extract-start",
                                             daemon=True)
            self._warming.start()

    def _spawn(self, executor: ProcessPoolExecutor) -> None:
        try:  # the semaphores' names go once every worker answered (extract/semnames.py)
            forget_once_started(executor, self.workers)
        except RuntimeError:  # closed while starting: the queued pages are cancelled by close()
            pass
        finally:
            with self._lock:
                queued, self._queued = self._queued or [], None
            for fn, args, outer in queued:
                _hand_over(executor, fn, args, outer)
            if self.aside_warmup is not None:
                with suppress(RuntimeError):  # closed meanwhile
                    fn, args = self.aside_warmup
                    self.call_aside(fn, *args)

    def submit(self, items: Items) -> Future[list[ExtractedPage]]:
        """A future for a few fetched pages, (body, charset, url, content type) each (scrape overlaps extraction with
        fetching). Several pages a task: the pool's per-task cost in this process (pickling, its
        manager and feeder threads) is paid once for them all."""
        return self.call(extract_pages, items)

    def call(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """A future for ``fn(*args)`` run where extraction runs (``fn`` a module-level function, picklable
        arguments): the extractors are imported there, never in this process (sample's page goes there too)."""
        if self.workers <= 1:
            future: Future[T] = Future()
            future.set_result(fn(*args))
            return future
        self.warm()
        with self._lock:
            if self._closed:
                raise RuntimeError("the extraction pool is closed")
            if self._queued is not None:  # the processes are starting
                queued: Future[T] = Future()
                self._queued.append((fn, args, queued))
                return queued
        assert self._executor is not None
        return self._executor.submit(fn, *args)

    def call_aside(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """A future for ``fn(*args)`` in one process of its own beside the extraction workers (started on
        first use, from the same forkserver): for work a stage waits for (ingest's chunks and vectors,
        retrieval/prepare.py), which must not queue behind the pages scrape has submitted while a bus
        thread is held. Only while the workers run (:attr:`started`); else RuntimeError."""
        with self._lock:
            if self._closed or self._warming is None or self._executor is None:
                raise RuntimeError("the extraction processes are not running")
            if self._aside is None:
                import multiprocessing

                ctx = multiprocessing.get_context("forkserver")
                self._aside = ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=worker_started)
                forget_once_started(self._aside, 1)
            aside = self._aside
        return aside.submit(fn, *args)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            warming = self._warming
            aside, self._aside = self._aside, None
        if warming is not None:
            warming.join()
        if aside is not None:
            aside.shutdown(wait=True, cancel_futures=True)
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
        if self._prestarted or warming is not None:
            _stop_forkserver()


def _stop_forkserver() -> None:
    """Stop the forkserver now that its workers are gone, rather than when it sees this process exit.

    It inherited this process's stdout and stderr: until it exits (polling for its parent's end, see
    extract/orphan.py), whoever reads the command's output (a pipe, a caller's subprocess) waits for
    it. It holds nothing to clean up, so it is killed rather than asked: asked, it would first finish
    its imports (a prestarted one) and then tear its interpreter down, while this command waits. A
    pool started later in this process starts a new one (a process has one forkserver: its pool closes
    at the end). ``_stop`` is the standard library's own way
    to forget it (its tests use it); a Python without it leaves the forkserver to its watch.
    """
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)
    if stop is None:
        return
    pid = getattr(server, "_forkserver_pid", None)
    if pid is not None:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with suppress(OSError):  # already gone
        stop()


def _hand_over(executor: ProcessPoolExecutor, fn: Callable[..., Any], args: tuple[Any, ...],
               outer: Future[Any]) -> None:
    """Submit work queued while the processes started; its future settles as the pool's does."""

    def settle(inner: Future[Any]) -> None:
        if inner.cancelled():
            outer.cancel()
        elif (error := inner.exception()) is not None:
            outer.set_exception(error)
        else:
            outer.set_result(inner.result())

    try:
        executor.submit(fn, *args).add_done_callback(settle)
    except Exception as exc:  # the pool broke or was shut down meanwhile: the caller sees why
        outer.set_exception(exc)
