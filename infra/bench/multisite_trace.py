"""``gleaner tick --json`` with a timeline: where a multi-site tick's process time goes (``multisite.py --trace``).

Runs the CLI in this process after wrapping a few seams, and writes their moments (``time.monotonic()``,
the clock the bench's servers log requests with) to the JSON file named by ``MULTISITE_TRACE``:

- ``imports``: the CLI's modules imported; ``database``: the embedded PostgreSQL up and its schema checked;
- ``extract_ready``: the extraction processes started (forkserver and its imports included);
- ``stages``: every bus message handled, with its topic, run and start/end;
- ``notify``, ``embed``, ``close``: the tail after the runs ended; ``exit``: the process about to end.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

T0 = time.monotonic()
EVENTS: dict[str, Any] = {"start": T0, "stages": []}
LOCK = threading.Lock()


def timed(fn: Callable[..., Any], done: Callable[[float, float], None]) -> Callable[..., Any]:
    """``fn``, calling ``done(started, ended)`` after each call (returned or raised)."""
    @functools.wraps(fn)
    def wrapped(*args: Any, **kw: Any) -> Any:
        started = time.monotonic()
        try:
            return fn(*args, **kw)
        finally:
            done(started, time.monotonic())
    return wrapped


def span(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def done(started: float, ended: float) -> None:
        with LOCK:
            EVENTS.setdefault(name, []).append([started, ended])
    return timed(fn, done)


def install() -> None:
    from gleaner.bus.local import LocalBus
    from gleaner.cli import operating, search
    from gleaner.extract.pool import ExtractPool
    from gleaner.store.backends import db

    EVENTS["imports"] = time.monotonic()
    db.create_engine = span("database", db.create_engine)
    db.ensure_schema = span("database", db.ensure_schema)
    spawn = ExtractPool._spawn

    def spawned(self: ExtractPool, executor: Any) -> None:
        EVENTS.setdefault("extract_warm", time.monotonic())
        spawn(self, executor)
        EVENTS.setdefault("extract_ready", time.monotonic())

    ExtractPool._spawn = spawned  # type: ignore[method-assign]
    dispatch = LocalBus._dispatch

    def traced(self: LocalBus, message: Any, attempts: int) -> None:
        started = time.monotonic()
        try:
            dispatch(self, message, attempts)
        finally:
            with LOCK:
                EVENTS["stages"].append([message.topic, getattr(message, "run_id", None), started,
                                         time.monotonic(), getattr(message, "site_domain", None),
                                         threading.get_ident(), len(getattr(message, "pages", ()))])

    LocalBus._dispatch = traced  # type: ignore[method-assign]
    operating.embed_new_chunks = span("embed", search.embed_new_chunks)
    import gleaner.runtime.runner as runner

    runner.notify = span("notify", runner.notify)
    import gleaner.runtime.engine as engine

    engine.notify = runner.notify
    engine.Engine._summary = span("summaries", engine.Engine._summary)  # type: ignore[method-assign]
    import gleaner.cli.many as many

    many.RunBoard.__exit__ = span("board_exit", many.RunBoard.__exit__)  # type: ignore[method-assign]
    from gleaner.app import Deps

    Deps.close = span("close", Deps.close)  # type: ignore[method-assign]
    if os.environ.get("MULTISITE_TRACE_CALLS"):
        _trace_calls()


def _trace_calls() -> None:
    """Every call of the metadata store, the fetcher and the blob store, with its thread: what a stage waits
    on between two requests (``calls`` in the JSON: name, thread, start, end)."""
    from gleaner.fetch.fetcher import Fetcher
    from gleaner.store.backends.localblobs import LocalBlobStore
    from gleaner.store.metadata import MetadataStore

    calls: list[list[Any]] = EVENTS.setdefault("calls", [])

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        return timed(fn, lambda started, ended: calls.append([name, threading.get_ident(), started, ended]))

    from gleaner.extract.pool import ExtractPool
    from gleaner.store.documents.blocklist import Blocklist

    def done_later(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapped(*args: Any, **kw: Any) -> Any:
            started, thread = time.monotonic(), threading.get_ident()
            future = fn(*args, **kw)
            future.add_done_callback(lambda _f: calls.append([name, thread, started, time.monotonic()]))
            return future
        return wrapped

    ExtractPool.submit = done_later("ExtractPool.submit", ExtractPool.submit)  # type: ignore[method-assign]
    ExtractPool.call = done_later("ExtractPool.call", ExtractPool.call)  # type: ignore[method-assign]
    for cls in (MetadataStore, Fetcher, LocalBlobStore, Blocklist):
        for attr in dir(cls):
            value = getattr(cls, attr)
            if not attr.startswith("_") and callable(value) and attr != "fetch_many" and not isinstance(value, type):
                setattr(cls, attr, wrap(f"{cls.__name__}.{attr}", value))


def dump() -> None:
    EVENTS["exit"] = time.monotonic()  # registered first, so it runs after every other exit handler
    with open(os.environ["MULTISITE_TRACE"], "w") as out:
        json.dump(EVENTS, out)


def main() -> None:
    atexit.register(dump)
    try:  # a tree before store/backends/embedded.py and earlystart.py (the bench's baseline) has its stop in db.py
        from gleaner.store.backends import embedded
    except ImportError:
        from gleaner.store.backends import db as embedded  # type: ignore[no-redef]
    # Wrapped before the server starts (as the command starts it, before importing gleaner.cli: earlystart.py).
    embedded.stop_if_last = span("database_stop", embedded.stop_if_last)
    try:
        from gleaner.runtime.earlystart import start_database
    except ImportError:
        pass
    else:
        start_database(sys.argv[1:])
    try:  # as the command does (a tree before session 12 has no such step)
        from gleaner.runtime.earlystart import end_quickly
    except ImportError:
        pass
    else:
        end_quickly()
    from gleaner.cli import main as cli

    install()
    cli.main(sys.argv[1:], prog_name="gleaner")


if __name__ == "__main__":
    main()
