"""Per-process caches of reads that stay correct while ``knowledge.cache_generation`` has not moved.

The site rules, "has this tenant erased anything?" and the active subscriptions are read many times a run
by every stage, and change only when an operator writes one of them (migration 0039's triggers move the counter in the
writer's transaction). Every application transaction's tenant guard reads the counter (rls.py) and
reports it here, so the latest value any transaction of this process saw costs no statement of its own.

A cached value is used only while it carries that latest value and that value was seen by a transaction
that began at most ``FRESH_SECONDS`` ago; otherwise the value is read again (its transaction's guard
refreshing the counter). So a rule or an erasure committed anywhere (another process, the back office,
another cloud instance) holds for every read after the next transaction that begins in this process,
and never later than FRESH_SECONDS after its commit: the order of the window a fresh read has between
its check and the work it guards. In a busy process transactions begin every few milliseconds.

A value is labelled with the counter its own transaction's guard read, never a newer one another thread
saw: in READ COMMITTED the guard's snapshot precedes the read's, so a label is never newer than the data.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from sqlalchemy.engine import Connection, Engine

from gleaner import tenancy

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Older than this, the latest counter no longer vouches for a cached value: it is read again.
FRESH_SECONDS = 0.2
_INFO_KEY = "gleaner.cache_generation"


class _Seen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.value: int | None = None
        self.at = 0.0


_SEEN: weakref.WeakKeyDictionary[Engine, _Seen] = weakref.WeakKeyDictionary()
_SEEN_LOCK = threading.Lock()


def _seen(engine: Engine) -> _Seen:
    with _SEEN_LOCK:
        seen = _SEEN.get(engine)
        if seen is None:
            seen = _SEEN[engine] = _Seen()
        return seen


def observe(engine: Engine, conn: Connection, value: int | None) -> None:
    """The tenant guard's report: this transaction began with the counter at ``value`` (None: no counter)."""
    conn.info[_INFO_KEY] = value
    if value is None:
        return
    seen = _seen(engine)
    now = time.monotonic()
    with seen.lock:
        if seen.value is None or value >= seen.value:
            seen.value, seen.at = value, now


def moved(engine: Engine) -> None:
    """This process has just committed a write the counter watches: its caches read again (the counter
    its writer's guard saw predates the write, so the latest one no longer vouches for anything)."""
    seen = _seen(engine)
    with seen.lock:
        seen.at = float("-inf")


def of(conn: Connection) -> int | None:
    """The counter this connection's current transaction began with (None: not known)."""
    return conn.info.get(_INFO_KEY)


def latest(engine: Engine) -> int | None:
    """The newest counter a transaction of this process began with in the last FRESH_SECONDS; None when
    there is none that recent (or the database has no counter)."""
    seen = _seen(engine)
    with seen.lock:
        return seen.value if seen.value is not None and time.monotonic() - seen.at <= FRESH_SECONDS else None


class GenerationCache(Generic[K, V]):
    """Values read by ``read`` per key, kept while the counter stays what their read saw (bounded LRU)."""

    def __init__(self, engine: Engine, read: Callable[[Connection, K], V], size: int = 256) -> None:
        self._engine, self._read, self._size = engine, read, size
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[tenancy.Scope, K], tuple[int, V]] = OrderedDict()

    def get(self, key: K) -> V:
        # Row-level security decides what a read sees: a value holds only for the tenant scope it was read in.
        slot = (tenancy.current(), key)
        current = latest(self._engine)
        with self._lock:
            hit = self._entries.get(slot)
            if hit is not None and current is not None and hit[0] == current:
                self._entries.move_to_end(slot)
                return hit[1]
        with self._engine.connect() as conn:
            value = self._read(conn, key)
            label = of(conn)
        if label is not None:
            with self._lock:
                self._entries[slot] = (label, value)
                self._entries.move_to_end(slot)
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        return value


def cache_of(owner: Any, name: str, read: Callable[[Connection, K], V]) -> GenerationCache[K, V]:
    """``owner``'s cache called ``name`` (made on first use), on ``owner.engine``."""
    cache = owner.__dict__.get(name)
    if cache is None:
        cache = owner.__dict__.setdefault(name, GenerationCache(owner.engine, read))
    return cache
