"""Subscriptions (``gleaner notify add|list|remove``): who receives which change events, and how.

A target is a Standard Webhooks URL (http(s)) or a notification channel through Apprise
(:mod:`gleaner.changes.channels`: Slack, e-mail, Discord …). It must pass the fetcher's address
policy when it is added (no server-side request forgery by subscription: loopback, private,
link-local and metadata addresses are refused unless inside ``GLEANER_ALLOW_NETWORKS``), and again
at every delivery (DNS may answer differently later). A subscription may ask for a digest
(:mod:`gleaner.changes.digest`) instead of one message per event. Listings show the URL masked
(:meth:`Subscription.public`). They are stored by :mod:`gleaner.store.notifications.subscriptions`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gleaner.changes import channels
from gleaner.changes.events import ChangeEvent, EventType
from gleaner.changes.signing import new_secret
from gleaner.errors import InvalidInput, PolicyRefused
from gleaner.fetch.addresses import (
    AddressBook,
    AddressRefused,
    CheckedUrl,
    Resolver,
    UrlRefused,
    check_url,
    system_resolver,
)
from gleaner.settings.config import IPNetwork

if TYPE_CHECKING:
    from gleaner.store.notifications.subscriptions import SubscriptionStore


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
    digest_seconds: int | None = None  # one message per period instead of one per event
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
        """What every listing shows (CLI, API, back office): the URL masked, never the secret."""
        return {"id": self.id, "url": channels.masked(self.url), "site": self.site_domain, "types": list(self.types),
                "digest": digest_label(self.digest_seconds), "created_at": self.created_at, "status": self.status}


# ``--digest`` periods: one message per UTC hour or day.
DIGESTS = {"1h": 3600, "1d": 86400}


def digest_label(seconds: int | None) -> str | None:
    return next((k for k, v in DIGESTS.items() if v == seconds), f"{seconds}s") if seconds else None


def parse_digest(raw: str | None) -> int | None:
    if not raw:
        return None
    if raw not in DIGESTS:
        raise InvalidInput(f"--digest takes {' or '.join(DIGESTS)}, got {raw!r}")
    return DIGESTS[raw]


def checked_target(url: str, allow: tuple[IPNetwork, ...], resolver: Resolver | None = None,
                   ) -> tuple[CheckedUrl, str]:
    """The URL and the address to connect to, under the fetcher's address policy; PolicyRefused otherwise."""
    try:
        checked = check_url(url)
        address = AddressBook(resolver or system_resolver, allow).pin(checked.host, checked.port)[0]
    except (UrlRefused, AddressRefused) as exc:
        raise PolicyRefused(f"refused webhook target {channels.masked(url)}: {exc}") from exc
    return checked, str(address)


def parse_types(raw: str | None) -> tuple[str, ...]:
    """``--types``: none given is every type but the run events (Subscription.receives); ``all`` is
    every type, run events included."""
    if not raw:
        return ()
    if raw.strip().lower() == "all":
        return tuple(str(t) for t in EventType)
    known = {str(t) for t in EventType}
    types = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
    unknown = [t for t in types if t not in known]
    if unknown:
        raise InvalidInput(f"unknown event types {unknown}; known: {', '.join(sorted(known))}")
    return types


def check_target(url: str, allow: tuple[IPNetwork, ...], resolver: Resolver | None = None) -> None:
    """A channel or a webhook URL that passes the address policy now; PolicyRefused otherwise."""
    if channels.is_channel(url):
        channels.check(url, allow, resolver)
        return
    scheme = url.partition(":")[0].lower()
    if scheme not in ("http", "https"):
        raise PolicyRefused(f"refused webhook target {channels.masked(url)}: scheme {scheme!r} is neither http(s)"
                            " nor a notification service Apprise knows (docs/changes.md)")
    checked_target(url, allow, resolver)


def add(store: SubscriptionStore, url: str, *, site: str | None, types: Sequence[str],
        allow: tuple[IPNetwork, ...], digest_seconds: int | None = None,
        resolver: Resolver | None = None) -> Subscription:
    """Subscribe ``url`` (refused unless it passes the address policy now) with a new signing secret
    (webhooks sign with it; channels carry their own credentials in the URL)."""
    check_target(url, allow, resolver)
    return store.add_subscription(url, site, types, new_secret(), digest_seconds)
