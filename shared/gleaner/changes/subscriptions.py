"""Webhook subscriptions (``gleaner notify add|list|remove``): who receives which change events.

A target URL must pass the fetcher's address policy when it is added (no server-side request forgery
by subscription: loopback, private, link-local and metadata addresses are refused unless inside
``GLEANER_ALLOW_NETWORKS``), and again at every delivery (DNS may answer differently later).
They are stored by :mod:`gleaner.store.subscriptions` (``deps.metadata.active_subscriptions()`` ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gleaner.changes.events import ChangeEvent, EventType
from gleaner.changes.signing import new_secret
from gleaner.config import IPNetwork
from gleaner.errors import InvalidInput, PolicyRefused
from gleaner.fetch.addresses import AddressBook, AddressRefused, CheckedUrl, UrlRefused, check_url, system_resolver

if TYPE_CHECKING:
    from gleaner.store.subscriptions import SubscriptionStore


class SubscriptionStatus(StrEnum):
    """``gleaner notify disable|enable``: a disabled subscription gets no deliveries and its pending ones
    are cancelled (as for a removed one); enabled again, it receives what happens from then on."""

    ACTIVE = "active"
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class Subscription:
    id: str
    url: str
    site_domain: str | None
    types: tuple[str, ...]
    secret: str
    created_at: str
    status: str = "active"  # SubscriptionStatus: a disabled one receives nothing until it is enabled

    def receives(self, event: ChangeEvent) -> bool:
        """Whether the event is one of its site and types, from its creation on."""
        if self.site_domain not in (None, event.site_domain):
            return False
        # No types named: every document event; run events go only to those who name them.
        if (event.type not in self.types) if self.types else event.is_run_event:
            return False
        return datetime.fromisoformat(self.created_at) <= datetime.fromisoformat(event.occurred_at)

    def public(self) -> dict[str, Any]:
        """What `notify list` shows: everything but the secret."""
        return {"id": self.id, "url": self.url, "site": self.site_domain, "types": list(self.types),
                "created_at": self.created_at, "status": self.status}


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


def add(store: SubscriptionStore, url: str, *, site: str | None, types: Sequence[str],
        allow: tuple[IPNetwork, ...]) -> Subscription:
    """Subscribe ``url`` (refused unless it passes the address policy now) with a new signing secret."""
    checked_target(url, allow)
    return store.add_subscription(url, site, types, new_secret())
