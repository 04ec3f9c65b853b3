"""The in-process bus: a real implementation of the bus port, used by the CLI.

Messages are queued and dispatched to the registered handlers by :meth:`LocalBus.drain`,
with the same semantics the cloud gives: permanent errors are logged and the
message dropped (acked); retryable errors are retried with backoff, then
dead-lettered. Task names are remembered, so a batch is enqueued once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from gleaner.errors import PermanentError, RetryableError
from gleaner.messages import Message, ScrapeBatch, decode, encode

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
    handlers: dict[str, list[Handler]] = field(default_factory=dict)
    dead_letters: list[DeadLetter] = field(default_factory=list)
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

    def pending(self) -> int:
        return len(self._queue)

    def drain(self, on_dispatch: Callable[[Message], None] | None = None) -> None:
        """Dispatch until the queue is empty."""
        while True:
            with self._lock:
                if not self._queue:
                    return
                message, attempts = self._queue.popleft()
            for handler in self.handlers.get(message.topic, []):
                self._deliver(handler, message, attempts)
            if on_dispatch is not None:
                on_dispatch(message)

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
