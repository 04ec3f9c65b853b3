"""Webhook subscriptions (``gleaner notify add|list|remove``): who receives which change events.

A target URL must pass the fetcher's address policy when it is added (no server-side request forgery
by subscription: loopback, private, link-local and metadata addresses are refused unless inside
``GLEANER_ALLOW_NETWORKS``), and again at every delivery (DNS may answer differently later).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.changes.events import EventType
from gleaner.changes.signing import new_secret
from gleaner.config import IPNetwork
from gleaner.errors import InvalidInput, PolicyRefused
from gleaner.fetch.addresses import AddressBook, AddressRefused, CheckedUrl, UrlRefused, check_url, system_resolver


@dataclass(frozen=True, slots=True)
class Subscription:
    id: str
    url: str
    site_domain: str | None
    types: tuple[str, ...]
    secret: str
    created_at: str

    def public(self) -> dict[str, Any]:
        """What `notify list` shows: everything but the secret."""
        return {"id": self.id, "url": self.url, "site": self.site_domain, "types": list(self.types),
                "created_at": self.created_at}


def checked_target(url: str, allow: tuple[IPNetwork, ...]) -> tuple[CheckedUrl, str]:
    """The URL and the address to connect to, under the fetcher's address policy; PolicyRefused otherwise."""
    try:
        checked = check_url(url)
        address = AddressBook(system_resolver, allow).pin(checked.host, checked.port)[0]
    except (UrlRefused, AddressRefused) as exc:
        raise PolicyRefused(f"refused webhook target {url}: {exc}") from exc
    return checked, str(address)


def parse_types(raw: str | None) -> tuple[str, ...]:
    if not raw:
        return ()
    known = {str(t) for t in EventType}
    types = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
    unknown = [t for t in types if t not in known]
    if unknown:
        raise InvalidInput(f"unknown event types {unknown}; known: {', '.join(sorted(known))}")
    return types


def add(engine: Engine, url: str, *, site: str | None, types: Sequence[str],
        allow: tuple[IPNetwork, ...]) -> Subscription:
    checked_target(url, allow)
    with engine.begin() as conn:
        row = conn.execute(
            sa.text("INSERT INTO knowledge.notify_subscriptions (url, site_domain, types, secret)"
                    " VALUES (:u, :s, CAST(:t AS text[]), :k) RETURNING id, created_at"),
            {"u": url, "s": site, "t": list(types), "k": new_secret()},
        ).one()
    found = get(engine, str(row[0]))
    assert found is not None
    return found


_COLUMNS = "id, url, site_domain, types, secret, created_at"


def _from_row(row: Sequence[Any]) -> Subscription:
    return Subscription(str(row[0]), row[1], row[2], tuple(row[3] or ()), row[4], row[5].isoformat())


def get(engine: Engine, subscription_id: str) -> Subscription | None:
    with engine.connect() as conn:
        row = conn.execute(
            sa.text(f"SELECT {_COLUMNS} FROM knowledge.notify_subscriptions"
                    " WHERE CAST(id AS text) = :i AND removed_at IS NULL"),
            {"i": subscription_id},
        ).first()
    return _from_row(row) if row else None


def active(engine: Engine) -> list[Subscription]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT {_COLUMNS} FROM knowledge.notify_subscriptions"
                                    " WHERE removed_at IS NULL ORDER BY created_at")).all()
    return [_from_row(r) for r in rows]


def remove(engine: Engine, subscription_id: str) -> bool:
    """Stop delivering to it (its delivery log is kept); False if there is no such subscription."""
    with engine.begin() as conn:
        row = conn.execute(
            sa.text("UPDATE knowledge.notify_subscriptions SET removed_at = now()"
                    " WHERE CAST(id AS text) = :i AND removed_at IS NULL RETURNING id"),
            {"i": subscription_id},
        ).first()
        if row is not None:
            conn.execute(sa.text("UPDATE knowledge.notify_deliveries SET state = 'cancelled'"
                                 " WHERE subscription_id = :i AND state = 'pending'"), {"i": row[0]})
    return row is not None
