"""Extraction off the fetch path: a process pool sized to the cores (extraction is CPU-bound).

With one worker (Cloud Functions, tests) it runs in-process and starts nothing.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Executor, Future, ProcessPoolExecutor

from gleaner.extract.page import ExtractedPage, extract_pages


class ExtractPool:
    def __init__(self, workers: int = 0) -> None:
        self.workers = workers or os.cpu_count() or 1
        self._executor: Executor | None = None

    def _pool(self) -> Executor | None:
        if self.workers <= 1:
            return None
        if self._executor is None:
            import multiprocessing

            # forkserver: workers start from a clean process, not a copy of a threaded one. The server
            # imports the extractors (trafilatura, lxml, pypdf: costly imports, which extract/ itself
            # defers) once, before it forks the workers, instead of every worker importing them again
            # (ignored if this process started one already).
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["gleaner.extract.page", "trafilatura", "pypdf"])
            self._executor = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx)
        return self._executor

    def start(self) -> None:
        """Start the worker processes now rather than at the first page.

        The local runner calls this before the map stage, whose requests leave a core idle, so the
        workers are ready when scrape hands them the first pages.
        """
        pool = self._pool()
        if pool is None:
            return

        def spawn() -> None:  # a submit forks a worker and waits for it: not on the caller's thread
            for _ in range(self.workers):
                pool.submit(os.getpid)

        threading.Thread(target=spawn, name="gleaner-extract-start", daemon=True).start()

    def submit(self, items: list[tuple[bytes, str | None, str, str | None]]) -> Future[list[ExtractedPage]]:
        """A future for a few fetched pages, (body, charset, url, content type) each (scrape overlaps extraction with
        fetching). Several pages a task: the pool's per-task cost in this process (pickling, its
        manager and feeder threads) is paid once for them all."""
        pool = self._pool()
        if pool is None:
            future: Future[list[ExtractedPage]] = Future()
            future.set_result(extract_pages(items))
            return future
        return pool.submit(extract_pages, items)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
