"""The extraction pool starts its processes only for pages, and loses none submitted while they start."""

from __future__ import annotations

import multiprocessing

import psutil

from gleaner.extract.page import extract_pages
from gleaner.extract.pool import ExtractPool

PAGE = (b"<html><head><title>Pool {n}</title></head><body><main><h1>Pool {n}</h1>"
        b"<p>Paragraph {n} of a page the pool extracts, long enough to be the main content.</p></main></body></html>")


def items(n: int) -> list[tuple[bytes, str | None, str, str | None]]:
    return [(PAGE.replace(b"{n}", str(n).encode()), "utf-8", f"http://127.0.0.1/p{n}", "text/html")]


def test_a_pool_that_is_given_no_page_starts_no_process():
    pool = ExtractPool(workers=2)
    pool.close()
    assert not pool.started
    assert multiprocessing.active_children() == []


def test_pages_submitted_while_the_processes_start_are_all_extracted_as_in_process():
    pool = ExtractPool(workers=2)
    try:
        futures = [pool.submit(items(n)) for n in range(6)]  # all before the processes are up
        assert pool.started
        results = [f.result(timeout=120) for f in futures]
    finally:
        pool.close()
    assert [r[0].content_hash for r in results] == [extract_pages(items(n))[0].content_hash for n in range(6)]
    assert [r[0].title for r in results] == [f"Pool {n}" for n in range(6)]


def test_closing_the_pool_stops_its_forkserver_and_a_later_pool_starts_another():
    from multiprocessing import forkserver

    for n in range(2):
        pool = ExtractPool(workers=2)
        try:
            assert pool.submit(items(n)).result(timeout=120)[0].title == f"Pool {n}"
            server = forkserver._forkserver._forkserver_pid
            assert server is not None
        finally:
            pool.close()
        # Gone (and reaped) when close returns: it no longer holds the command's stdout and stderr open.
        assert forkserver._forkserver._forkserver_pid is None
        assert not psutil.pid_exists(server)


def test_a_prestarted_forkserver_serves_the_pool_and_one_never_used_is_stopped_at_once():
    import time
    from multiprocessing import forkserver

    pool = ExtractPool(workers=2)
    pool.prestart()
    server = forkserver._forkserver._forkserver_pid
    assert server is not None and not pool.started  # no worker yet: only the imports go on
    try:
        assert pool.submit(items(7)).result(timeout=120)[0].title == "Pool 7"
        assert forkserver._forkserver._forkserver_pid == server  # the workers came from it
    finally:
        pool.close()
    assert not psutil.pid_exists(server)

    unused = ExtractPool(workers=2)
    unused.prestart()
    server = forkserver._forkserver._forkserver_pid
    began = time.monotonic()
    unused.close()
    assert time.monotonic() - began < 2  # not kept waiting for the imports to finish
    assert forkserver._forkserver._forkserver_pid is None and not psutil.pid_exists(server)


def test_a_pools_semaphores_leave_dev_shm_once_its_workers_run_and_it_still_extracts():
    import os
    import time

    pool = ExtractPool(workers=2)
    try:
        assert pool.submit(items(0)).result(timeout=120)[0].title == "Pool 0"
        executor = pool._executor
        queues = (executor._call_queue, executor._result_queue)
        files = [f"/dev/shm/sem.{lock._semlock.name.lstrip('/')}" for q in queues for lock in (q._rlock, q._wlock)]
        deadline = time.monotonic() + 60
        while any(os.path.exists(f) for f in files) and time.monotonic() < deadline:
            time.sleep(0.05)
        # A kill -9 of the command now leaves nothing in /dev/shm, and its resource tracker nothing to report.
        assert not any(os.path.exists(f) for f in files)
        assert [r[0].title for f in [pool.submit(items(n)) for n in range(1, 5)] for r in [f.result(timeout=120)]] \
            == [f"Pool {n}" for n in range(1, 5)]
    finally:
        pool.close()
