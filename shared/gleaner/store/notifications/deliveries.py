"""Webhook deliveries in PostgreSQL: the queue of due deliveries, their leases, the log of every attempt.

Locally the database is the delivery queue (``next_attempt_at``); in the cloud each delivery is also
a Cloud Task (``scheduled``). An attempt claims its delivery with a lease (one short UPDATE: no lock
is held across the network) and records its answer afterwards. When to retry and what a state
means is :mod:`gleaner.changes.delivery`'s decision; this stores it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gleaner.changes import digest
from gleaner.store.backends.sqlstore import SqlStore


class DeliveryState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"  # for good: the last attempt failed
    CANCELLED = "cancelled"  # its subscription was removed or disabled


class Requeue(StrEnum):
    """What an operator's retry of one delivery did."""

    REQUEUED = "requeued"
    NOT_FOUND = "not-found"
    NOT_RETRYABLE = "not-retryable"  # delivered or cancelled
    SUBSCRIPTION_REMOVED = "subscription-removed"
    SUBSCRIPTION_DISABLED = "subscription-disabled"


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """One event to one subscription, with the body every attempt sends."""

    id: str
    subscription_id: str
    event_id: str
    body: str


@dataclass(frozen=True, slots=True)
class NewDigestItem:
    """One event for a digest subscription: an item of the digest of the period it is published in."""

    subscription_id: str
    digest_seconds: int
    event_id: str
    site_domain: str
    body: str  # the event as a webhook's ``data`` carries it


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery leased for one attempt: its number, what to send and where."""

    attempt: int
    body: str
    event_id: str
    url: str
    secret: str


@dataclass(frozen=True, slots=True)
class Response:
    """What one attempt got: an HTTP status, or the error that prevented one; and how long it took.

    A channel (Apprise) reports success without a status: neither a status nor an error is a success.
    """

    status: int | None
    error: str | None
    ms: int

    @property
    def ok(self) -> bool:
        if self.status is None:
            return self.error is None
        return 200 <= self.status < 300


def _log_attempt(conn: Connection, delivery_id: str, attempt: int, response: Response) -> None:
    conn.execute(
        sa.text("INSERT INTO knowledge.notify_attempts (delivery_id, attempt, http_status, error, duration_ms)"
                " VALUES (CAST(:i AS uuid), :n, :st, :err, :ms)"),
        {"i": delivery_id, "n": attempt, "st": response.status, "err": response.error, "ms": response.ms},
    )


def add_digest_items(conn: Connection, items: Sequence[NewDigestItem], seqs: dict[str, int]) -> None:
    """File each item under the open digest of its subscription's current period (creating it, due at
    the period's end), in the caller's transaction. The digest's row is locked first: a digest being
    sealed (:meth:`DeliveryStore.claim_delivery`) is waited for, and once sealed the item goes to the
    next period."""
    if not items:
        return
    now = conn.execute(sa.text("SELECT clock_timestamp()")).scalar_one()
    for item in items:
        start, until = digest.period(now, item.digest_seconds)
        while True:
            did = digest.digest_id(item.subscription_id, start)
            conn.execute(
                sa.text("INSERT INTO knowledge.notify_deliveries (id, subscription_id, event_id, body, next_attempt_at,"
                        " digest_from, digest_until) VALUES (CAST(:i AS uuid), CAST(:s AS uuid), CAST(:i AS uuid), '',"
                        " :u, :f, :u) ON CONFLICT DO NOTHING"),
                {"i": did, "s": item.subscription_id, "f": start, "u": until})
            still_open = conn.execute(
                sa.text("SELECT body = '' AND state = 'pending' FROM knowledge.notify_deliveries"
                        " WHERE id = CAST(:i AS uuid) FOR UPDATE"), {"i": did}).scalar_one()
            if still_open:
                break
            start, until = until, until + (until - start)
        conn.execute(
            sa.text("INSERT INTO knowledge.notify_digest_items (subscription_id, event_id, site_domain, delivery_id,"
                    " event_seq, body) VALUES (CAST(:s AS uuid), CAST(:e AS uuid), :site, CAST(:d AS uuid), :q, :b)"
                    " ON CONFLICT DO NOTHING"),
            {"s": item.subscription_id, "e": item.event_id, "site": item.site_domain, "d": did,
             "q": seqs.get(item.event_id), "b": item.body})


class DeliveryStore(SqlStore):
    def claim_delivery(self, delivery_id: str, lease_seconds: float, due_only: bool) -> Claimed | None:
        """Lease a pending delivery for one attempt (counted now); None if it is not pending, not due
        (with ``due_only``) or leased by another worker. A digest's first claim seals it: its items
        become its body, in this transaction (:mod:`gleaner.changes.digest`)."""
        with self._tx() as conn:
            row = conn.execute(sa.text(
                "UPDATE knowledge.notify_deliveries d SET attempts = d.attempts + 1,"
                " next_attempt_at = now() + make_interval(secs => :lease)"
                " FROM knowledge.notify_subscriptions s"
                " WHERE d.id = CAST(:i AS uuid) AND s.id = d.subscription_id AND d.state = 'pending'"
                " AND s.removed_at IS NULL AND s.status = 'active'"
                " AND (NOT :due OR d.next_attempt_at <= now())"
                " RETURNING d.attempts, d.body, d.event_id, s.url, s.secret, d.digest_from, d.digest_until"),
                {"i": delivery_id, "lease": lease_seconds, "due": due_only},
            ).first()
            if row is None:
                return None
            body = str(row[1])
            if row[6] is not None and body == "":
                items = conn.execute(sa.text(
                    "SELECT body FROM knowledge.notify_digest_items WHERE delivery_id = CAST(:i AS uuid)"
                    " ORDER BY event_seq NULLS LAST, event_id"), {"i": delivery_id}).scalars().all()
                body = digest.sealed_body(row[5], row[6], [str(b) for b in items])
                conn.execute(sa.text("UPDATE knowledge.notify_deliveries SET body = :b WHERE id = CAST(:i AS uuid)"),
                             {"b": body, "i": delivery_id})
        return Claimed(int(row[0]), body, str(row[2]), str(row[3]), str(row[4]))

    def record_attempt(self, delivery_id: str, attempt: int, response: Response, state: DeliveryState,
                       retry_in: float) -> None:
        """Log the attempt and leave the delivery in ``state`` (due again in ``retry_in`` seconds if pending)."""
        with self._tx() as conn:
            _log_attempt(conn, delivery_id, attempt, response)
            conn.execute(
                sa.text("UPDATE knowledge.notify_deliveries SET state = :state, last_status = :st, last_error = :err,"
                        " next_attempt_at = now() + make_interval(secs => :wait),"
                        " delivered_at = CASE WHEN :state = 'delivered' THEN now() ELSE delivered_at END"
                        " WHERE id = CAST(:i AS uuid)"),
                {"i": delivery_id, "state": str(state), "st": response.status, "err": response.error,
                 "wait": retry_in},
            )

    def record_test_delivery(self, message_id: str, subscription_id: str, body: str, response: Response) -> None:
        """A ``notify test`` message, sent once: a delivery (no event behind it) with its one attempt."""
        state = DeliveryState.DELIVERED if response.ok else DeliveryState.FAILED
        with self._tx() as conn:
            conn.execute(
                sa.text("INSERT INTO knowledge.notify_deliveries (id, subscription_id, event_id, body, state, attempts,"
                        " last_status, last_error, delivered_at, scheduled)"
                        " VALUES (CAST(:i AS uuid), CAST(:s AS uuid), CAST(:i AS uuid), :b, :state, 1, :st, :err,"
                        " CASE WHEN :state = 'delivered' THEN now() END, true)"),
                {"i": message_id, "s": subscription_id, "b": body, "state": str(state), "st": response.status,
                 "err": response.error},
            )
            _log_attempt(conn, message_id, 1, response)

    def due_deliveries(self) -> tuple[list[str], float | None]:
        """Pending deliveries due now, and the seconds until the next one that is not (None: none pending)."""
        with self.engine.connect() as conn:
            due = [str(i) for i in conn.execute(sa.text(
                "SELECT id FROM knowledge.notify_deliveries WHERE state = 'pending' AND next_attempt_at <= now()"
                " ORDER BY next_attempt_at, created_at")).scalars()]
            wait = conn.execute(sa.text(
                "SELECT EXTRACT(EPOCH FROM min(next_attempt_at) - now()) FROM knowledge.notify_deliveries"
                " WHERE state = 'pending' AND next_attempt_at > now()")).scalar()
        return due, float(wait) if wait is not None else None

    def requeue_delivery(self, delivery_id: str) -> Requeue:
        """Make a pending or failed delivery due now (an operator's retry), unless its subscription is gone or
        disabled."""
        row = self._first(
            "SELECT d.state, s.removed_at IS NOT NULL, s.status::text FROM knowledge.notify_deliveries d"
            " JOIN knowledge.notify_subscriptions s ON s.id = d.subscription_id WHERE d.id = CAST(:i AS uuid)",
            {"i": delivery_id})
        if row is None:
            return Requeue.NOT_FOUND
        if row[1]:
            return Requeue.SUBSCRIPTION_REMOVED
        if row[2] != "active":
            return Requeue.SUBSCRIPTION_DISABLED
        done = self._write_first(
            "UPDATE knowledge.notify_deliveries d SET state = 'pending', next_attempt_at = now()"
            " FROM knowledge.notify_subscriptions s WHERE d.id = CAST(:i AS uuid) AND s.id = d.subscription_id"
            " AND s.removed_at IS NULL AND s.status = 'active' AND d.state IN ('pending', 'failed') RETURNING d.id",
            {"i": delivery_id},
        )
        return Requeue.REQUEUED if done is not None else Requeue.NOT_RETRYABLE

    def pending_delivery_count(self) -> int:
        """Deliveries still to be sent (to subscriptions that still exist and are not disabled)."""
        row = self._first("SELECT count(*) FROM knowledge.notify_deliveries d"
                          " JOIN knowledge.notify_subscriptions s ON s.id = d.subscription_id"
                          " WHERE d.state = 'pending' AND s.removed_at IS NULL AND s.status = 'active'", {})
        return int(row[0]) if row else 0

    def unscheduled_deliveries(self) -> list[tuple[str, datetime | None]]:
        """Pending deliveries not yet handed to the bus's delivery queue, oldest first, each with the time
        before which it must not be attempted (a digest's period end; None: now)."""
        return [(str(r[0]), r[1]) for r in self._all(
            "SELECT id, digest_until FROM knowledge.notify_deliveries WHERE state = 'pending' AND NOT scheduled"
            " ORDER BY created_at")]

    def mark_scheduled(self, delivery_ids: Sequence[str]) -> None:
        if delivery_ids:
            with self._tx() as conn:
                conn.execute(sa.text("UPDATE knowledge.notify_deliveries SET scheduled = true"
                                     " WHERE id = ANY(CAST(:i AS uuid[]))"), {"i": list(delivery_ids)})

    def delivery_log(self, subscription_id: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """The delivery log, newest first, each delivery with its attempts (``log``)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT d.id, d.subscription_id, d.event_id,"
                    " COALESCE(e.type::text, CASE WHEN d.digest_until IS NOT NULL THEN 'notify.digest' END), e.url,"
                    " d.state, d.attempts,"
                    " d.last_status, d.last_error, d.next_attempt_at, d.created_at, d.delivered_at"
                    " FROM knowledge.notify_deliveries d"
                    " LEFT JOIN knowledge.document_events e ON e.seq = d.event_seq"
                    " WHERE CAST(:s AS text) IS NULL OR CAST(d.subscription_id AS text) = :s"
                    " ORDER BY d.created_at DESC, d.id LIMIT :n"
                ),
                {"s": subscription_id, "n": limit},
            ).all()
            attempts = conn.execute(
                sa.text("SELECT delivery_id, attempt, at, http_status, error, duration_ms"
                        " FROM knowledge.notify_attempts"
                        " WHERE delivery_id = ANY(CAST(:i AS uuid[])) ORDER BY delivery_id, attempt"),
                {"i": [str(r[0]) for r in rows]},
            ).all()
        by_delivery: dict[str, list[dict[str, Any]]] = {}
        for a in attempts:
            by_delivery.setdefault(str(a[0]), []).append(
                {"attempt": a[1], "at": a[2].isoformat(), "status": a[3], "error": a[4], "ms": a[5]})
        keys = ("id", "subscription_id", "event_id", "type", "url", "state", "attempts", "last_status", "last_error",
                "next_attempt_at", "created_at", "delivered_at")
        out = []
        for r in rows:
            item = dict(zip(keys, (str(r[0]), str(r[1]), str(r[2]), r[3] or "webhook.test", *r[4:9],
                                   r[9].isoformat() if r[9] else None, r[10].isoformat(),
                                   r[11].isoformat() if r[11] else None), strict=True))
            item["log"] = by_delivery.get(item["id"], [])
            out.append(item)
        return out
