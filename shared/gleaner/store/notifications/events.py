"""Change events in PostgreSQL: recorded in the change's own transaction, listed, drained by the outbox.

:func:`record_changes` is called by the other store modules inside the transaction that makes the
change (a snapshot, a status update, an erasure, a conflict), so an event exists exactly when its
change does. ``knowledge.document_events`` is unique per tenant on the change's business identity
(:attr:`gleaner.changes.events.Change.dedupe_key`): recording the same change again inserts nothing.

:meth:`EventStore.publish_events` is the outbox's transaction: it claims unpublished events
(``FOR UPDATE SKIP LOCKED``, so concurrent instances share the work), lets the caller announce them
and plan their deliveries, writes the deliveries and marks the events published, all or nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from gleaner.changes.events import Change, ChangeEvent, EventType
from gleaner.store.backends.sqlstore import SqlStore, json_rows, text
from gleaner.store.ledger.records import record_from_row
from gleaner.store.notifications.deliveries import NewDelivery, NewDigestItem, add_digest_items

# Set by record_changes, taken by the stage's flush after its commit (same thread: a message is one thread's).
_RECORDED = threading.local()

_COLUMNS = ("e.event_id, e.type::text, e.site_domain, e.document_id, e.url, e.run_id, e.version,"
            " e.snapshot_id, e.content_hash, e.previous_version, e.occurred_at, e.summary")


def record_changes(conn: Connection, changes: Sequence[Change]) -> int:
    """Insert one event per change (a change already recorded is skipped); how many were new.

    Call inside the transaction that makes the change, after it: the event reads the document's
    URL, site and (for status changes) current snapshot as the change left them.
    """
    if not changes:
        return 0
    _RECORDED.flag = True
    rows = [{"e": c.event_id, "k": c.dedupe_key, "ty": str(c.type), "d": c.document_id, "r": c.run_id,
             "s": c.snapshot_id, "ps": c.previous_snapshot_id} for c in changes]
    result = conn.execute(
        text(
            "INSERT INTO knowledge.document_events (event_id, site_domain, dedupe_key, type, document_id, url, run_id,"
            " version, snapshot_id, content_hash, previous_version, occurred_at)"
            " SELECT t.e, d.site_domain, t.k, CAST(t.ty AS knowledge.document_event_type), d.id,"
            " COALESCE(d.canonical_url, d.source_url), t.r, s.version, s.id, s.content_hash, p.version,"
            " clock_timestamp()"
            " FROM json_to_recordset(CAST(:rows AS json))"
            "   AS t(e uuid, k text, ty text, d uuid, r uuid, s uuid, ps uuid)"
            " JOIN knowledge.documents d ON d.id = t.d"
            " LEFT JOIN knowledge.document_snapshots s ON s.id = COALESCE(t.s, d.current_snapshot_id)"
            " LEFT JOIN knowledge.document_snapshots p ON p.id = t.ps"
            # Gleaner's own tenants (the feed's ``_references``) are not client documents: no document.* events.
            " WHERE left(d.site_domain, 1) <> '_'"
            " ORDER BY d.id"
            " ON CONFLICT DO NOTHING RETURNING 1"
        ),
        {"rows": json_rows(rows)},
    ).all()
    return len(result)


def take_recorded() -> bool:
    """Whether this thread recorded change events since it last asked (and forget them).

    A stage that recorded none has no events of its own to flush; the outbox's leftovers (a flush that
    failed) go with the next flush of a stage that did, the run's end or ``gleaner deliver``.
    """
    recorded = getattr(_RECORDED, "flag", False)
    _RECORDED.flag = False
    return recorded


def record_status_change(conn: Connection, *, document_id: str, type: EventType, run_id: str | None = None,
                         cause: str = "") -> bool:
    """Record one status-change event (blocked, unblocked, removed, ...) in the transaction that changed the
    status; False if this change was already recorded.

    A change outside a run needs a ``cause`` that names it (a rule id and time, an erasure id), or a
    second block after an unblock is a duplicate.
    """
    return record_changes(conn, [Change(document_id=document_id, type=type, run_id=run_id, cause=cause)]) == 1


def _event(row: Sequence[Any]) -> ChangeEvent:
    return record_from_row(ChangeEvent, row)


class EventStore(SqlStore):
    def list_events(self, *, site: str | None = None, since: datetime | None = None, since_run: str | None = None,
                    limit: int = 1000, newest_first: bool = False) -> list[ChangeEvent]:
        """Events oldest first (``newest_first``: the latest ``limit`` of them, newest first); ``since_run``:
        the events of that run and everything after it."""
        where = ["TRUE"]
        params: dict[str, Any] = {"n": limit}
        if site:
            where.append("e.site_domain = :s")
            params["s"] = site
        if since is not None:
            where.append("e.occurred_at >= :t")
            params["t"] = since
        if since_run is not None:
            where.append("e.occurred_at >= (SELECT created_at FROM knowledge.crawl_runs WHERE id = CAST(:r AS uuid))")
            params["r"] = since_run
        rows = self._all(f"SELECT {_COLUMNS} FROM knowledge.document_events e WHERE {' AND '.join(where)}"
                         f" ORDER BY e.seq{' DESC' if newest_first else ''} LIMIT :n", params)
        return [_event(r) for r in rows]

    def outbox_empty(self) -> bool:
        """No event waits to be published and no delivery to be handed to the bus: a flush has nothing to do.

        One read instead of the flush's three transactions, which every stage makes after its work.
        """
        return bool(self._scalar(
            "SELECT NOT EXISTS (SELECT 1 FROM knowledge.document_events WHERE published_at IS NULL)"
            " AND NOT EXISTS (SELECT 1 FROM knowledge.notify_deliveries WHERE state = 'pending' AND NOT scheduled)"))

    def publish_events(self, limit: int,
                       publish: Callable[[Sequence[ChangeEvent]], Sequence[NewDelivery | NewDigestItem]]) -> int:
        """Claim up to ``limit`` unpublished events, oldest first, and hand them to ``publish`` (which announces
        them and says which deliveries they make); then write those deliveries and mark the events published,
        in the claim's transaction. Returns how many events were claimed (0: the outbox is empty).

        A failure anywhere, ``publish`` included, rolls the claim back: the events stay unpublished.
        """
        with self._tx() as conn:
            rows = conn.execute(
                text(f"SELECT {_COLUMNS}, e.seq FROM knowledge.document_events e"
                        " WHERE e.published_at IS NULL ORDER BY e.seq LIMIT :n FOR UPDATE SKIP LOCKED"),
                {"n": limit},
            ).all()
            if not rows:
                return 0
            seq = {str(r[0]): r[12] for r in rows}
            planned = publish([_event(r[:12]) for r in rows])
            deliveries = [d for d in planned if isinstance(d, NewDelivery)]
            add_digest_items(conn, [d for d in planned if isinstance(d, NewDigestItem)], seq)
            if deliveries:
                conn.execute(
                    text("INSERT INTO knowledge.notify_deliveries (id, subscription_id, event_id, event_seq, body)"
                            " SELECT t.i, t.s, t.e, t.q, t.b FROM json_to_recordset(CAST(:rows AS json))"
                            " AS t(i uuid, s uuid, e uuid, q bigint, b text) ON CONFLICT DO NOTHING"),
                    {"rows": json_rows([{"i": d.id, "s": d.subscription_id, "e": d.event_id, "q": seq[d.event_id],
                                         "b": d.body} for d in deliveries])},
                )
            conn.execute(text("UPDATE knowledge.document_events SET published_at = now()"
                                 " WHERE seq = ANY(CAST(:q AS bigint[]))"), {"q": list(seq.values())})
        return len(rows)
