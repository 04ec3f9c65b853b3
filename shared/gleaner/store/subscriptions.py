"""Subscriptions (webhooks and channels) in PostgreSQL (``knowledge.notify_subscriptions``).

The target's address policy and the secret are :mod:`gleaner.changes.subscriptions`'s; this stores
what it decided. Removing a subscription keeps its delivery log and cancels what is still pending.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from gleaner.changes.subscriptions import Subscription
from gleaner.store.records import record_from_row
from gleaner.store.sqlstore import SqlStore

_COLUMNS = "id, url, site_domain, types, secret, created_at, digest_seconds"


class SubscriptionStore(SqlStore):
    def add_subscription(self, url: str, site: str | None, types: Sequence[str], secret: str,
                         digest_seconds: int | None = None) -> Subscription:
        row = self._write_first(
            f"INSERT INTO knowledge.notify_subscriptions (url, site_domain, types, secret, digest_seconds)"
            f" VALUES (:u, :s, CAST(:t AS text[]), :k, :d) RETURNING {_COLUMNS}",
            {"u": url, "s": site, "t": list(types), "k": secret, "d": digest_seconds},
        )
        return record_from_row(Subscription, row)

    def subscription(self, subscription_id: str) -> Subscription | None:
        row = self._first(f"SELECT {_COLUMNS} FROM knowledge.notify_subscriptions"
                          " WHERE CAST(id AS text) = :i AND removed_at IS NULL", {"i": subscription_id})
        return record_from_row(Subscription, row) if row else None

    def active_subscriptions(self) -> list[Subscription]:
        rows = self._all(f"SELECT {_COLUMNS} FROM knowledge.notify_subscriptions"
                         " WHERE removed_at IS NULL ORDER BY created_at")
        return [record_from_row(Subscription, r) for r in rows]

    def remove_subscription(self, subscription_id: str) -> bool:
        """Stop delivering to it (its delivery log is kept); False if there is no such subscription."""
        with self._tx() as conn:
            row = conn.execute(
                sa.text("UPDATE knowledge.notify_subscriptions SET removed_at = now()"
                        " WHERE CAST(id AS text) = :i AND removed_at IS NULL RETURNING id"),
                {"i": subscription_id},
            ).first()
            if row is not None:
                conn.execute(sa.text("UPDATE knowledge.notify_deliveries SET state = 'cancelled'"
                                     " WHERE subscription_id = :i AND state = 'pending'"), {"i": row[0]})
        return row is not None
