"""Subscriptions (webhooks and channels) in PostgreSQL (``knowledge.notify_subscriptions``).

The target's address policy and the secret are :mod:`gleaner.changes.subscriptions`'s; this stores
what it decided. Removing or disabling a subscription keeps its delivery log and cancels what is still
pending; only an active one is given new deliveries or attempts.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gleaner.changes.subscriptions import Subscription, SubscriptionStatus
from gleaner.store.backends import generation
from gleaner.store.backends.generation import cache_of
from gleaner.store.backends.sqlstore import SqlStore
from gleaner.store.ledger.records import record_from_row

_COLUMNS = "id, url, site_domain, types, secret, created_at, digest_seconds, status::text"


def _active(conn: Connection, _key: None) -> tuple[Subscription, ...]:
    rows = conn.execute(sa.text(f"SELECT {_COLUMNS} FROM knowledge.notify_subscriptions"
                                " WHERE removed_at IS NULL AND status = 'active' ORDER BY created_at")).all()
    return tuple(record_from_row(Subscription, r) for r in rows)


class SubscriptionStore(SqlStore):
    def add_subscription(self, url: str, site: str | None, types: Sequence[str], secret: str,
                         digest_seconds: int | None = None) -> Subscription:
        row = self._write_first(
            f"INSERT INTO knowledge.notify_subscriptions (url, site_domain, types, secret, digest_seconds)"
            f" VALUES (:u, :s, CAST(:t AS text[]), :k, :d) RETURNING {_COLUMNS}",
            {"u": url, "s": site, "t": list(types), "k": secret, "d": digest_seconds},
        )
        generation.moved(self.engine)
        return record_from_row(Subscription, row)

    def subscription(self, subscription_id: str) -> Subscription | None:
        row = self._first(f"SELECT {_COLUMNS} FROM knowledge.notify_subscriptions"
                          " WHERE CAST(id AS text) = :i AND removed_at IS NULL", {"i": subscription_id})
        return record_from_row(Subscription, row) if row else None

    def active_subscriptions(self) -> list[Subscription]:
        """The subscriptions new events are delivered to: neither removed nor disabled.

        Kept per process while the cache generation stands: any write to the subscriptions moves it
        (store/backends/generation.py), so a subscription added or disabled anywhere holds for the next flush."""
        return list(cache_of(self, "_active_subscriptions", _active).get(None))

    def listed_subscriptions(self) -> list[Subscription]:
        """Every subscription not removed, disabled ones too (what `notify list` and the back office show)."""
        rows = self._all(f"SELECT {_COLUMNS} FROM knowledge.notify_subscriptions"
                         " WHERE removed_at IS NULL ORDER BY created_at")
        return [record_from_row(Subscription, r) for r in rows]

    def set_subscription_status(self, subscription_id: str, status: SubscriptionStatus) -> Subscription | None:
        """Disable or enable it; disabling cancels its pending deliveries. None if there is no such subscription."""
        with self._tx() as conn:
            row = conn.execute(
                sa.text("UPDATE knowledge.notify_subscriptions"
                        " SET status = CAST(:st AS knowledge.subscription_status),"
                        " status_changed_at = CASE WHEN status::text = :st THEN status_changed_at ELSE now() END"
                        f" WHERE CAST(id AS text) = :i AND removed_at IS NULL RETURNING {_COLUMNS}"),
                {"i": subscription_id, "st": str(status)},
            ).first()
            if row is not None and status is SubscriptionStatus.DISABLED:
                conn.execute(sa.text("UPDATE knowledge.notify_deliveries SET state = 'cancelled'"
                                     " WHERE subscription_id = :i AND state = 'pending'"), {"i": row[0]})
        generation.moved(self.engine)
        return record_from_row(Subscription, row) if row is not None else None

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
        generation.moved(self.engine)
        return row is not None
