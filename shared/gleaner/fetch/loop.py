"""The fetcher's event loop: one daemon thread per process that runs every fetch coroutine.

The stages are synchronous functions (the local bus, Pub/Sub and Cloud Tasks call them), but the
network side is asynchronous because it costs far less CPU per request than a threaded client
(infra/bench/README.md has the figures), and on two cores that CPU is taken from extraction. Synchronous callers hand
coroutines to this loop and wait on ordinary futures.

One loop per process, not per fetcher, because per-host politeness (asyncio semaphores in the
process's :class:`~gleaner.fetch.politeness.HostTable`) is shared by every fetcher of the process,
and asyncio primitives belong to one loop. A forked child starts its own loop on first use.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_owner_pid = 0


def fetch_loop() -> asyncio.AbstractEventLoop:
    """The process's fetch loop, started on first use."""
    global _loop, _owner_pid
    with _lock:
        if _loop is None or _owner_pid != os.getpid():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="gleaner-fetch-loop", daemon=True)
            thread.start()
            _loop, _owner_pid = loop, os.getpid()
        return _loop


def submit(coro: Coroutine[Any, Any, T]) -> Future[T]:
    """Schedule ``coro`` on the fetch loop; a future the calling thread can wait on."""
    loop = fetch_loop()
    if _on_loop_thread(loop):
        coro.close()
        raise RuntimeError("a synchronous fetch was called from the fetch loop itself (it would deadlock)")
    return asyncio.run_coroutine_threadsafe(_carrying(contextvars.copy_context(), coro), loop)


async def _carrying(context: contextvars.Context, coro: Coroutine[Any, Any, T]) -> T:
    """Run coro with the submitting thread's context variables (the tenant its database reads act for)."""
    for var, value in context.items():
        var.set(value)
    return await coro


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the fetch loop and wait for its result."""
    return submit(coro).result()


async def in_thread(func: Callable[..., T], *args: Any) -> T:
    """Run blocking work (DNS, a database read) off the loop so other fetches go on meanwhile."""
    context = contextvars.copy_context()  # the executor's thread would otherwise see none of this task's
    return await asyncio.get_running_loop().run_in_executor(None, context.run, func, *args)


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
