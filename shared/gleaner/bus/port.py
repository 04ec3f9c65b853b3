"""The bus port: how a stage hands work to the next one.

Two verbs, matching the two cloud services that implement them:

- ``publish(message)``: fan-out to the message's topic (Pub/Sub), at least once;
- ``enqueue(batch)``: one named HTTP task for the scrape stage (Cloud Tasks); a task
  whose name was already used is not enqueued again, so a re-sent request cannot
  schedule a batch twice.

The in-process implementation (:mod:`gleaner.bus.local`) is what the CLI runs.
"""

from __future__ import annotations

from typing import Protocol

from gleaner.messages import Message, ScrapeBatch


class Bus(Protocol):
    def publish(self, message: Message, *, ordering_key: str | None = None) -> None:
        """Deliver to every subscriber of message.topic; returns once the publish is durable."""
        ...

    def enqueue(self, batch: ScrapeBatch) -> bool:
        """Schedule one scrape task named batch.task_name; False if that name was already used."""
        ...
