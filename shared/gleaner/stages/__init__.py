"""The five stages: each a ``handle(message, deps)`` over one typed message.

``STAGES`` maps each topic to the stage that consumes it; the in-process bus and
the Cloud Functions entry points both dispatch through it, so local and cloud run
the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gleaner.app import Deps
from gleaner.messages import (
    ArticlesAccepted,
    CrawlMapped,
    CrawlRequested,
    Message,
    PagesFetched,
    ScrapeBatch,
    SnapshotsWritten,
)
from gleaner.stages import ingest, landing, map, sample, scrape, snapshot

STAGES: dict[str, tuple[str, type[Message], Callable[[Any, Deps], Any]]] = {
    CrawlRequested.topic: ("map", CrawlRequested, map.handle),
    CrawlMapped.topic: ("sample", CrawlMapped, sample.handle),
    ScrapeBatch.topic: ("scrape", ScrapeBatch, scrape.handle),
    PagesFetched.topic: ("snapshot", PagesFetched, snapshot.handle),
    SnapshotsWritten.topic: ("ingest", SnapshotsWritten, ingest.handle),
    # The feed-poller webhook's hand-off: the ingest function lands accepted articles as reference items.
    ArticlesAccepted.topic: ("ingest", ArticlesAccepted, landing.handle),
}


def dispatch(message: Message, deps: Deps) -> Any:
    """Run the stage that consumes this message."""
    _name, _cls, handler = STAGES[message.topic]
    return handler(message, deps)


def wire(bus: Any, deps: Deps) -> None:
    """Subscribe every stage to its topic on an in-process bus; what it gives up on is recorded on the
    run exactly as the cloud's dead-letter topic does (:mod:`gleaner.deadletters`)."""
    from gleaner.deadletters import record_failure

    for topic in STAGES:
        bus.subscribe(topic, lambda message, _deps=deps: dispatch(message, _deps))
    bus.on_give_up = lambda message, reason: record_failure(message, deps, reason)
