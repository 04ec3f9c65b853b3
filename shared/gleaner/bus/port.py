"""The bus port: how a stage hands work to the next one.

Two verbs, matching the two cloud services that implement them:

- ``publish(message)``: fan-out to the message's topic (Pub/Sub), at least once;
- ``enqueue(batch)``: one named HTTP task for the scrape stage (Cloud Tasks); a task
  whose name was already used is not enqueued again, so a re-sent request cannot
  schedule a batch twice;
- ``announce(event)``: a change event on the `documents-changed` topic, the event's
  JSON itself as the message (downstream systems subscribe to it);
- ``enqueue_delivery(id)``: one named task making a webhook delivery attempt;
- ``defer(batch, seconds)``: ``enqueue`` no sooner than ``seconds`` from now (a batch whose site's
  batch slots are all taken goes back to the queue rather than holding an instance);
- ``cancel(task_name)``: delete a deferred task not yet run (a waiting batch sent for early no longer
  needs its delayed fallback, whose run would be a billed invocation that does nothing).

The in-process implementation (:mod:`gleaner.bus.local`) is what the CLI runs.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from gleaner.messages import Message, ScrapeBatch

if TYPE_CHECKING:
    from gleaner.changes.events import ChangeEvent


class Bus(Protocol):
    def publish(self, message: Message, *, ordering_key: str | None = None) -> None:
        """Deliver to every subscriber of message.topic; returns once the publish is durable."""
        ...

    def enqueue(self, batch: ScrapeBatch) -> bool:
        """Schedule one scrape task named batch.task_name; False if that name was already used."""
        ...

    def announce(self, event: ChangeEvent) -> None:
        """Publish a change event on `documents-changed`; returns once the publish is durable."""
        ...

    def defer(self, batch: ScrapeBatch, seconds: float) -> bool:
        """Schedule the scrape task ``batch.task_name`` to run in ``seconds``; False if already scheduled."""
        ...

    def cancel(self, task_name: str) -> bool:
        """Delete the deferred scrape task ``task_name``; False if there is none (it ran, was deleted, or this
        bus never holds one back)."""
        ...

    def enqueue_delivery(self, delivery_id: str, not_before: datetime | None = None) -> bool:
        """Schedule one webhook delivery task (not before ``not_before``: a digest's period end); False if
        this bus leaves deliveries to the database queue (worked by the local run and ``gleaner deliver``)."""
        ...
