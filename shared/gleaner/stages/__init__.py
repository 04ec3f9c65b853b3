"""The five stages: each a ``handle(message, deps)`` over one typed message.

``STAGES`` maps each topic to the stage that consumes it; the in-process bus and
the Cloud Functions entry points both dispatch through it, so local and cloud run
the same code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
from gleaner.references import landing
from gleaner.references.identity import REFERENCES_SITE
from gleaner.stages import ingest, map, sample, scrape, snapshot
from gleaner.tenancy import scope, site_for

STAGES: dict[str, tuple[str, type[Message], Callable[[Any, Deps], Any]]] = {
    CrawlRequested.topic: ("map", CrawlRequested, map.handle),
    CrawlMapped.topic: ("sample", CrawlMapped, sample.handle),
    ScrapeBatch.topic: ("scrape", ScrapeBatch, scrape.handle),
    PagesFetched.topic: ("snapshot", PagesFetched, snapshot.handle),
    SnapshotsWritten.topic: ("ingest", SnapshotsWritten, ingest.handle),
    # The feed-poller webhook's hand-off: the ingest function lands accepted articles as reference items.
    ArticlesAccepted.topic: ("ingest", ArticlesAccepted, landing.handle),
}


def tenant_of(message: Message) -> str:
    """The tenant a message's work belongs to (feed articles land under Gleaner's own references tenant)."""
    if isinstance(message, CrawlRequested):
        from gleaner.urls import canonicalize

        return site_for(canonicalize(message.target_url), message.site_domain)
    if isinstance(message, ArticlesAccepted):
        return REFERENCES_SITE
    site: str = getattr(message, "site_domain")  # noqa: B009  (every other message names its tenant)
    return site


@contextmanager
def acting_for(message: Message) -> Iterator[None]:
    """Database transactions inside act for the message's tenant only (row-level security)."""
    with scope(tenant_of(message)):
        yield


def dispatch(message: Message, deps: Deps) -> Any:
    """Run the stage that consumes this message, as the message's tenant."""
    _name, _cls, handler = STAGES[message.topic]
    with acting_for(message):
        return handler(message, deps)


def wire(bus: Any, deps: Deps) -> None:
    """Subscribe every stage to its topic on an in-process bus; what it gives up on is recorded on the
    run exactly as the cloud's dead-letter topic does (:mod:`gleaner.runtime.deadletters`)."""
    from gleaner.runtime.deadletters import record_failure

    for topic in STAGES:
        bus.subscribe(topic, lambda message, _deps=deps: dispatch(message, _deps))
    bus.on_give_up = lambda message, reason: record_failure(message, deps, reason)
