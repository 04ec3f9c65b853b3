"""Queued messages of one run that the in-process bus hands to a stage as one (:class:`gleaner.bus.local.LocalBus`).

Scrape hands its pages to snapshot a few at a time while the batch goes on, and snapshot hands each
group's versions to ingest: each message costs those stages a few transactions whatever its size. When
the stages fall behind (many sites crawled at once on few cores), several such messages of one run
wait in the queue together; taken as one, they cost the transactions once. The merged message is what
scrape would have published had it waited for all of those pages: the handlers are the same, so their
order of effects (body, metadata, publish) and their idempotence on redelivery hold as they are. Only
the in-process bus does this; on Pub/Sub every message stays an invocation of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from gleaner.messages import Message, PagesFetched, SnapshotsWritten

# The most pages (or snapshots) one merged message carries: a scrape batch's worth.
MAX_ITEMS = 100

Merge = Callable[[Message, Message], Message | None]


def merge_pages(first: Message, later: Message) -> Message | None:
    """Two PagesFetched of one run as one, or None when they may not go together (a page in both)."""
    assert isinstance(first, PagesFetched) and isinstance(later, PagesFetched)
    if later.run_id != first.run_id or later.site_domain != first.site_domain:
        return None
    if len(first.pages) + len(later.pages) > MAX_ITEMS:
        return None
    if {p.document_id for p in first.pages} & {p.document_id for p in later.pages}:
        return None  # a page announced again: each announcement is snapshotted on its own, as published
    return PagesFetched(run_id=first.run_id, site_domain=first.site_domain, batch_no=first.batch_no,
                        pages=first.pages + later.pages)


def merge_snapshots(first: Message, later: Message) -> Message | None:
    """Two SnapshotsWritten of one run as one (each snapshot once), or None past the size bound."""
    assert isinstance(first, SnapshotsWritten) and isinstance(later, SnapshotsWritten)
    if first.run_id is None or later.run_id != first.run_id or later.site_domain != first.site_domain:
        return None
    ids = tuple(dict.fromkeys(first.snapshot_ids + later.snapshot_ids))
    if len(ids) > MAX_ITEMS:
        return None
    return SnapshotsWritten(run_id=first.run_id, site_domain=first.site_domain, snapshot_ids=ids)


def default_merges() -> dict[str, Merge]:
    return {PagesFetched.topic: merge_pages, SnapshotsWritten.topic: merge_snapshots}
