"""What one rendered page may ask for, and the record of what it asked (pure).

The Fetcher decides everything about an address (policy, robots.txt, politeness, size); this gate
decides what a *page* may spend: how many sub-requests and bytes, which methods and kinds of
resource. A refusal here is recorded like the Fetcher's, so a page's fetch facts list every request
its scripts tried, answered or not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Refused(StrEnum):
    """Why the gate answered a sub-request itself, without the Fetcher."""

    METHOD = "refused-method"  # the Fetcher only reads (GET): a page's POST is never sent
    KIND = "skipped-kind"  # images, media, fonts: nothing the text depends on
    REQUESTS = "refused-requests"  # the page's cap on sub-requests
    BYTES = "refused-bytes"  # the page's cap on bytes
    NAVIGATION = "refused-navigation"  # a script sending the tab elsewhere (or a frame): not this page
    SCHEME = "refused-scheme"  # ws:, data: handled by the browser itself, file:, chrome: never
    CLOSED = "refused-closed"  # the page's time is up
    SOCKET = "refused-socket"  # WebSockets: closed before they connect


# Resource kinds never fetched: text extraction reads none of them, and each costs a polite request.
SKIPPED_KINDS = frozenset({"image", "media", "font", "manifest", "texttrack", "beacon", "ping", "other",
                           "eventsource", "websocket"})


@dataclass(frozen=True, slots=True)
class Limits:
    """One page's allowance: time, sub-requests (after the document) and bytes, and scroll steps."""

    seconds: float = 15.0
    max_requests: int = 100
    max_bytes: int = 25 * 1024 * 1024
    scroll_steps: int = 3


@dataclass(frozen=True, slots=True)
class SubRequest:
    """One request the page made: what it was, and how it ended (the Fetcher's outcome or a refusal)."""

    url: str
    kind: str
    outcome: str
    status: int | None = None
    bytes: int = 0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url[:500], "kind": self.kind, "outcome": self.outcome, "status": self.status,
                "bytes": self.bytes, "reason": self.reason[:200]}


@dataclass(slots=True)
class PageAllowance:
    """What one page has spent; the gate's decision for its next request."""

    limits: Limits
    requests: int = 0
    bytes: int = 0
    log: list[SubRequest] = field(default_factory=list)

    def admit(self, *, url: str, method: str, kind: str, navigation: bool, main_frame: bool) -> Refused | None:
        """None if the Fetcher may be asked for this request, else why not (the caller records it)."""
        if not url.startswith(("http://", "https://")):
            return Refused.SCHEME
        if navigation and main_frame:
            return Refused.NAVIGATION  # the document itself is answered before any script runs
        if navigation:
            return Refused.NAVIGATION
        if method.upper() != "GET":
            return Refused.METHOD
        if kind in SKIPPED_KINDS:
            return Refused.KIND
        if self.requests >= self.limits.max_requests:
            return Refused.REQUESTS
        if self.bytes >= self.limits.max_bytes:
            return Refused.BYTES
        self.requests += 1
        return None

    def spend(self, count: int) -> bool:
        """Count a body's bytes; False when it takes the page past its byte cap (then it is not served)."""
        self.bytes += count
        return self.bytes <= self.limits.max_bytes

    def record(self, entry: SubRequest) -> None:
        self.log.append(entry)
