"""Extraction off the fetch path: a process pool sized to the cores (extraction is CPU-bound).

With one worker (Cloud Functions, tests) it runs in-process and starts nothing.
"""

from __future__ import annotations

import os
from concurrent.futures import Executor, Future, ProcessPoolExecutor

from gleaner.extract.page import ExtractedPage, extract_page


class ExtractPool:
    def __init__(self, workers: int = 0) -> None:
        self.workers = workers or os.cpu_count() or 1
        self._executor: Executor | None = None

    def _pool(self) -> Executor | None:
        if self.workers <= 1:
            return None
        if self._executor is None:
            import multiprocessing

            # forkserver: workers start from a clean process, not a copy of a threaded one.
            ctx = multiprocessing.get_context("forkserver")
            self._executor = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx)
        return self._executor

    def submit(self, body: bytes, charset: str | None, url: str) -> Future[ExtractedPage]:
        """A future for one fetched page (the scrape stage overlaps extraction with fetching)."""
        pool = self._pool()
        if pool is None:
            future: Future[ExtractedPage] = Future()
            future.set_result(extract_page(body, charset, url))
            return future
        return pool.submit(extract_page, body, charset, url)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
