"""The in-process bus: a real implementation of the bus port, used by the CLI.

Messages are queued and dispatched to the registered handlers by :meth:`LocalBus.drain`,
with the same semantics the cloud gives: permanent errors are logged and the
message dropped (acked); retryable errors are retried with backoff, then
dead-lettered. Task names are remembered, so a batch is enqueued once.

Like Pub/Sub, the bus delivers several messages at once (``concurrency``
threads), so the snapshot and ingest of one scrape batch overlap the fetching
and extraction of the next. Scrape batches themselves go one at a time by
default (``topic_limits``): each batch has its own fetcher, and two at once
would double the per-host concurrency a run is allowed. The local runner,
which lends one fetcher to every batch of its run, raises that limit. Handlers are idempotent and
safe to run concurrently (the cloud runs them so), so this changes timing only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gleaner.errors import PermanentError, RetryableError
from gleaner.messages import Message, ScrapeBatch, decode, encode

if TYPE_CHECKING:
    from gleaner.changes.events import ChangeEvent

log = logging.getLogger(__name__)

Handler = Callable[[Message], None]


@dataclass(slots=True)
class DeadLetter:
    message: Message
    error: str
    attempts: int


@dataclass
class LocalBus:
    """Single-process bus; ``round_trip`` encodes and decodes every message like the wire would."""

    max_attempts: int = 5
    backoff_seconds: float = 0.2
    round_trip: bool = True
    # Messages delivered at once; 1 drains strictly in order.
    concurrency: int = 4
    # At most this many messages of a topic in flight (one scrape batch: one fetcher's politeness).
    topic_limits: dict[str, int] = field(default_factory=lambda: {ScrapeBatch.topic: 1})
    handlers: dict[str, list[Handler]] = field(default_factory=dict)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    # In-process consumers of change events (topic -> callables of one ChangeEvent).
    change_handlers: dict[str, list[Callable[[ChangeEvent], None]]] = field(default_factory=dict)
    _queue: deque[tuple[Message, int]] = field(default_factory=deque)
    _task_names: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def subscribe(self, topic: str, handler: Handler) -> None:
        self.handlers.setdefault(topic, []).append(handler)

    def publish(self, message: Message, *, ordering_key: str | None = None) -> None:
        if self.round_trip:
            message = decode(encode(message))
        with self._lock:
            self._queue.append((message, 0))

    def enqueue(self, batch: ScrapeBatch) -> bool:
        with self._lock:
            if batch.task_name in self._task_names:
                return False
            self._task_names.add(batch.task_name)
        self.publish(batch)
        return True

    def announce(self, event: ChangeEvent) -> None:
        """Hand a change event to this process's subscribers of `documents-changed`, at once."""
        from gleaner.changes.events import TOPIC

        for handler in self.change_handlers.get(TOPIC, []):
            handler(event)

    def enqueue_delivery(self, delivery_id: str) -> bool:
        # Locally the database is the delivery queue: the run works it before it returns.
        return False

    def pending(self) -> int:
        return len(self._queue)

    def drain(self, on_dispatch: Callable[[Message], None] | None = None) -> None:
        """Dispatch until the queue is empty and nothing is in flight."""
        if self.concurrency <= 1:
            while True:
                with self._lock:
                    if not self._queue:
                        return
                    message, attempts = self._queue.popleft()
                self._dispatch(message, attempts)
                if on_dispatch is not None:
                    on_dispatch(message)
        in_flight: dict[Future[None], Message] = {}
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="gleaner-bus") as pool:
            while True:
                for message, attempts in self._take(self.concurrency - len(in_flight), in_flight.values()):
                    in_flight[pool.submit(self._dispatch, message, attempts)] = message
                if not in_flight:
                    return
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in done:
                    message = in_flight.pop(future)
                    future.result()  # _dispatch settles every error itself; anything else is a bug: raise it
                    if on_dispatch is not None:
                        on_dispatch(message)

    def _take(self, slots: int, running: Iterable[Message]) -> list[tuple[Message, int]]:
        """Up to slots queued messages, oldest first, skipping topics at their in-flight limit."""
        busy: dict[str, int] = {}
        for message in running:
            busy[message.topic] = busy.get(message.topic, 0) + 1
        taken: list[tuple[Message, int]] = []
        with self._lock:
            kept: deque[tuple[Message, int]] = deque()
            while self._queue and len(taken) < slots:
                item = self._queue.popleft()
                topic = item[0].topic
                limit = self.topic_limits.get(topic)
                if limit is not None and busy.get(topic, 0) >= limit:
                    kept.append(item)
                    continue
                busy[topic] = busy.get(topic, 0) + 1
                taken.append(item)
            kept.extend(self._queue)
            self._queue = kept
        return taken

    def _dispatch(self, message: Message, attempts: int) -> None:
        for handler in self.handlers.get(message.topic, []):
            self._deliver(handler, message, attempts)

    def _deliver(self, handler: Handler, message: Message, attempts: int) -> None:
        while True:
            attempts += 1
            try:
                handler(message)
                return
            except PermanentError as exc:
                log.warning("dropping %s after a permanent error: %s", type(message).__name__, exc)
                return
            except RetryableError as exc:
                if attempts >= self.max_attempts:
                    log.error("dead-lettering %s after %d attempts: %s", type(message).__name__, attempts, exc)
                    self.dead_letters.append(DeadLetter(message, str(exc), attempts))
                    return
                log.info("retrying %s (attempt %d): %s", type(message).__name__, attempts, exc)
                time.sleep(self.backoff_seconds * 2 ** (attempts - 1))
