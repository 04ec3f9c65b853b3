"""The in-process bus: a real implementation of the bus port, used by the CLI.

Messages are queued and dispatched to the registered handlers by :meth:`LocalBus.drain`,
with the same semantics the cloud gives: permanent errors are logged and the
message dropped (acked); retryable errors are retried with backoff, then
dead-lettered. Task names are remembered, so a batch is enqueued once.

Like Pub/Sub, the bus delivers several messages at once (``concurrency``
threads), so the snapshot and ingest of one scrape batch overlap the fetching
and extraction of the next. Scrape batches go one at a time *per run* by default
(``topic_limits`` count a topic's messages in flight for each run): the runs of
different sites go side by side (the multi-site engine, :mod:`gleaner.runtime.engine`), and
every fetcher of the process shares one per-host politeness table, so two runs on one
host still take turns. The local runner raises the per-run limit so batch N+1 fetches
while batch N is extracted. Handlers are idempotent and safe to run concurrently (the
cloud runs them so), so this changes timing only.

Queued PagesFetched and SnapshotsWritten messages of one run are handed to their stage as one
(:mod:`gleaner.bus.coalesce`, ``merges``), and a run has one of each in flight at a time (the local
runner lets two of its run's ingests go at once): when snapshot and ingest fall behind (many sites on
few cores), a run's next messages wait for the one in flight and then cost their transactions once,
however often scrape hands pages on.

``max_runs`` bounds the runs in progress: a message of a run not yet under way waits while
that many runs have messages queued or in flight (the others finish first). ``isolate``
turns an unexpected exception of one handler into a give-up of that message (logged with its
traceback), so one run's bug never stops the other runs the bus carries.

Retryable errors (a database restart, a blob store hiccup) are retried with exponential backoff
capped at ``max_backoff_seconds``, like Pub/Sub's retry policy; a message that still fails is
dead-lettered and, like the cloud's dead-letter topic, handed to ``on_give_up`` so its failure is
recorded on the run (:mod:`gleaner.runtime.deadletters`). A message dropped after a permanent error is
handed there too: nothing accepted disappears without a trace on its run.

Messages run on daemon threads: on Ctrl-C the caller marks the run interrupted and exits without
waiting for a scrape batch in flight (every handler survives being cut off; see run control).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from gleaner.bus import interrupts
from gleaner.bus.coalesce import Merge, default_merges
from gleaner.errors import PermanentError, RetryableError
from gleaner.messages import Message, PagesFetched, ScrapeBatch, SnapshotsWritten, decode, encode
from gleaner.store.backends import outage

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
    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 8.0
    round_trip: bool = True
    # Messages delivered at once; 1 drains strictly in order.
    concurrency: int = 4
    # At most this many messages of a topic in flight per run (one scrape batch: one fetcher's politeness;
    # one snapshot and one ingest message: a run's next ones wait, and go as one, see the module docstring).
    topic_limits: dict[str, int] = field(default_factory=lambda: {
        ScrapeBatch.topic: 1, PagesFetched.topic: 1, SnapshotsWritten.topic: 1})
    # Runs with work under way at once (None: no bound); see the module docstring.
    max_runs: int | None = None
    # Give up on a message whose handler raised an unexpected exception, rather than stop the drain.
    isolate: bool = False
    # Topic -> how two queued messages of one run go as one (None: they do not); see gleaner.bus.coalesce.
    merges: dict[str, Merge] = field(default_factory=default_merges)
    handlers: dict[str, list[Handler]] = field(default_factory=dict)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    # Told about every message the bus gives up on (dead-lettered or dropped as permanent), with why.
    on_give_up: Callable[[Message, str], None] | None = None
    # In-process consumers of change events (topic -> callables of one ChangeEvent).
    change_handlers: dict[str, list[Callable[[ChangeEvent], None]]] = field(default_factory=dict)
    _queue: deque[tuple[Message, int]] = field(default_factory=deque)
    _task_names: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Messages queued or in flight per run id (a run is under way while it has any).
    _load: dict[str, int] = field(default_factory=dict)
    # The same per (topic, run): what a stage may ask of its run's other stages (:meth:`busy`).
    _topic_load: dict[tuple[str, str], int] = field(default_factory=dict)
    _under_way: set[str] = field(default_factory=set)
    # The wake-up queue of the drain under way: a publish from outside it (a tick, a handler still
    # running) is taken at once, not when a message in flight next ends.
    _wake: queue.SimpleQueue[tuple[Message, BaseException | None] | None] | None = None

    def subscribe(self, topic: str, handler: Handler) -> None:
        self.handlers.setdefault(topic, []).append(handler)

    def publish(self, message: Message, *, ordering_key: str | None = None) -> None:
        if self.round_trip:
            message = decode(encode(message))
        with self._lock:
            self._queue.append((message, 0))
            run = _run_of(message)
            if run is not None:
                self._load[run] = self._load.get(run, 0) + 1
                key = (message.topic, run)
                self._topic_load[key] = self._topic_load.get(key, 0) + 1
            wake = self._wake
        if wake is not None:
            wake.put(None)

    def enqueue(self, batch: ScrapeBatch) -> bool:
        with self._lock:
            if batch.task_name in self._task_names:
                return False
            self._task_names.add(batch.task_name)
        self.publish(batch)
        return True

    def defer(self, batch: ScrapeBatch, seconds: float) -> bool:
        """At once: the in-process bus runs one process, whose own host table keeps the site's pace."""
        return self.enqueue(batch)

    def cancel(self, task_name: str) -> bool:
        """Nothing is held back here (:meth:`defer` enqueues at once), so there is nothing to delete."""
        return False

    def announce(self, event: ChangeEvent) -> None:
        """Hand a change event to this process's subscribers of `documents-changed`, at once."""
        from gleaner.changes.events import TOPIC

        for handler in self.change_handlers.get(TOPIC, []):
            handler(event)

    def enqueue_delivery(self, delivery_id: str, not_before: datetime | None = None) -> bool:
        # Locally the database is the delivery queue: the run works it before it returns.
        return False

    def pending(self) -> int:
        return len(self._queue)

    def wake(self) -> None:
        """Have a drain kept open look at its ``until`` again (set it first)."""
        wake = self._wake
        if wake is not None:
            wake.put(None)

    def active(self, run_id: str) -> bool:
        """Whether the run has a message queued or in flight (once not, it is the run's end here)."""
        with self._lock:
            return run_id in self._load

    def busy(self, run_id: str, topics: Iterable[str]) -> bool:
        """Whether a message of these topics of the run is queued or in flight (scrape asks before it hands
        pages on early: pages that would only queue behind the run's earlier ones wait to go with more)."""
        with self._lock:
            return any(self._topic_load.get((topic, run_id)) for topic in topics)

    def runs_busy(self, topics: Iterable[str]) -> int:
        """How many runs have a message of these topics queued or in flight."""
        wanted = set(topics)
        with self._lock:
            return len({run for (topic, run), n in self._topic_load.items() if n and topic in wanted})

    def runs_under_way(self) -> set[str]:
        """The runs with a message in flight now or taken before and work still queued."""
        with self._lock:
            return set(self._under_way)

    def _done_with(self, message: Message) -> None:
        run = _run_of(message)
        if run is None:
            return
        with self._lock:
            key = (message.topic, run)
            if self._topic_load.get(key, 1) > 1:
                self._topic_load[key] -= 1
            else:
                self._topic_load.pop(key, None)
            left = self._load.get(run, 1) - 1
            if left > 0:
                self._load[run] = left
            else:
                self._load.pop(run, None)
                self._under_way.discard(run)

    def drain(self, on_dispatch: Callable[[Message], None] | None = None,
              until: threading.Event | None = None) -> None:
        """Dispatch until the queue is empty and nothing is in flight; with ``until``, wait for more
        messages (published by another thread) until that event is set (then :meth:`wake`) and nothing
        is left."""
        if self.concurrency <= 1 and until is None:
            while True:
                with self._lock:
                    if not self._queue:
                        return
                    message, attempts = self._queue.popleft()
                try:
                    self._dispatch(message, attempts)
                finally:
                    self._done_with(message)
                interrupts.raise_if_requested()
                if on_dispatch is not None:
                    on_dispatch(message)
        in_flight: list[Message] = []
        done: queue.SimpleQueue[tuple[Message, BaseException | None] | None] = queue.SimpleQueue()

        def run(message: Message, attempts: int) -> None:
            error: BaseException | None = None
            try:
                self._dispatch(message, attempts)
            except BaseException as exc:  # handed to the draining thread, which raises it
                error = exc
            finally:
                # Counted done before the draining thread hears of it: its on_dispatch sees the run's end.
                self._done_with(message)
                done.put((message, error))

        # A publish wakes this loop at once: a message a handler publishes while it goes on (scrape hands
        # its first pages to snapshot mid-batch) or another thread's (a tick's) is taken then, not when a
        # message in flight next ends.
        outer, self._wake = self._wake, done
        try:
            while True:
                for message, attempts in self._take(max(1, self.concurrency) - len(in_flight), in_flight):
                    in_flight.append(message)
                    threading.Thread(target=run, args=(message, attempts), name="gleaner-bus", daemon=True).start()
                if not in_flight and (until is None or (until.is_set() and not self._queue)):
                    return
                try:  # woken at least every second: a Ctrl-C or an outage ends the drain while handlers wait
                    item = done.get(timeout=1.0)
                except queue.Empty:
                    item = None
                interrupts.raise_if_requested()  # a Ctrl-C a finalizer swallowed (gleaner.bus.interrupts)
                outage.raise_if_gone()  # the database unreachable for longer than its wait
                if item is None:  # woken by a publish, or to look at ``until`` again
                    continue
                message, error = item
                in_flight.remove(message)
                if error is not None:  # _dispatch settles every error itself; anything else is a bug: raise it
                    raise error
                if on_dispatch is not None:
                    on_dispatch(message)
        finally:
            self._wake = outer

    def _take(self, slots: int, running: Iterable[Message]) -> list[tuple[Message, int]]:
        """Up to slots queued messages, oldest first, skipping a run's topics at their in-flight limit
        and runs not yet under way while ``max_runs`` are."""
        busy: dict[tuple[str, str | None], int] = {}
        for message in running:
            key = (message.topic, _run_of(message))
            busy[key] = busy.get(key, 0) + 1
        taken: list[tuple[Message, int]] = []
        with self._lock:
            kept: deque[tuple[Message, int]] = deque()
            while self._queue and len(taken) < slots:
                item = self._queue.popleft()
                run = _run_of(item[0])
                key = (item[0].topic, run)
                limit = self.topic_limits.get(key[0])
                if limit is not None and busy.get(key, 0) >= limit:
                    kept.append(item)
                    continue
                if run is not None and run not in self._under_way:
                    if self.max_runs is not None and len(self._under_way) >= self.max_runs:
                        kept.append(item)
                        continue
                    self._under_way.add(run)
                busy[key] = busy.get(key, 0) + 1
                merge = self.merges.get(key[0])
                taken.append(self._merged(item, run, merge) if merge is not None and run is not None else item)
            kept.extend(self._queue)
            self._queue = kept
        return taken

    def _merged(self, item: tuple[Message, int], run: str, merge: Merge) -> tuple[Message, int]:
        """The taken message with the later queued messages of its topic and run merged in (first tries
        only: a message being retried keeps its own attempts); called with the lock held."""
        message, attempts = item
        if attempts:
            return item
        rest: deque[tuple[Message, int]] = deque()
        for other in self._queue:
            if other[1] == 0 and other[0].topic == message.topic and _run_of(other[0]) == run:
                both = merge(message, other[0])
                if both is not None:
                    message = both
                    self._load[run] -= 1  # two queued messages are one now; the run keeps the taken one
                    self._topic_load[(message.topic, run)] -= 1
                    continue
            rest.append(other)
        self._queue = rest
        return message, attempts

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
                self._give_up(message, f"permanent error: {exc}")
                return
            except RetryableError as exc:
                if attempts >= self.max_attempts:
                    log.log(logging.INFO if outage.down_for() is not None else logging.ERROR,
                            "dead-lettering %s after %d attempts: %s", type(message).__name__, attempts, exc)
                    self.dead_letters.append(DeadLetter(message, str(exc), attempts))
                    self._give_up(message, f"dead-lettered after {attempts} attempts: {exc}")
                    return
                # A first retry is routine (a blip); none is loud while the database is down: the command's one
                # error line says so if it stays down.
                quiet = attempts == 1 or outage.down_for() is not None
                log.log(logging.INFO if quiet else logging.WARNING,
                        "retrying %s (attempt %d): %s", type(message).__name__, attempts, exc)
                time.sleep(self.retry_delay(attempts))
            except Exception as exc:
                if not self.isolate:
                    raise
                log.exception("dropping %s after an unexpected error", type(message).__name__)
                self._give_up(message, f"unexpected error: {type(exc).__name__}: {exc}")
                return

    def retry_delay(self, attempts: int) -> float:
        """Seconds to wait after the given number of failed attempts (exponential, capped)."""
        return float(min(self.backoff_seconds * 2 ** (attempts - 1), self.max_backoff_seconds))

    def _give_up(self, message: Message, reason: str) -> None:
        if self.on_give_up is None:
            return
        try:
            self.on_give_up(message, reason)
        except RetryableError as exc:  # the record is best effort: the database may be what failed
            log.log(logging.INFO if outage.down_for() is not None else logging.WARNING,
                    "could not record the failure of %s: %s", type(message).__name__, exc)
        except Exception:
            log.exception("could not record the failure of %s", type(message).__name__)


def _run_of(message: Message) -> str | None:
    """The run a message belongs to (None: work of no run, such as an operator's re-ingest)."""
    run = getattr(message, "run_id", None)
    return run if isinstance(run, str) else None
