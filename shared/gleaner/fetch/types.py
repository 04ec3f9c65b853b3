"""Values the fetcher returns: one outcome per URL, exactly the statuses of DESIGN.md."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from enum import StrEnum


class FetchOutcome(StrEnum):
    """Every URL of a run ends with exactly one of these (DESIGN.md); the reason says why."""

    FETCHED = "fetched"
    NOT_MODIFIED = "not-modified"
    ROBOTS_DENIED = "robots-denied"
    ROBOTS_UNKNOWN = "robots-unknown"
    REFUSED_SIZE = "refused-size"
    REFUSED_CONTENT = "refused-content"
    REDIRECT_REFUSED = "redirect-refused"
    DENIED = "denied"
    UNAVAILABLE = "unavailable"
    EXHAUSTED = "exhausted"

    @property
    def ok(self) -> bool:
        return self in (FetchOutcome.FETCHED, FetchOutcome.NOT_MODIFIED)

    @property
    def retryable(self) -> bool:
        """Transient: the next run (or walk) may succeed."""
        return self in (FetchOutcome.UNAVAILABLE, FetchOutcome.ROBOTS_UNKNOWN, FetchOutcome.EXHAUSTED)


# Refused by policy, not failed by the site (DESIGN.md "Document lifecycle": the summary's "refused").
REFUSED_OUTCOMES = frozenset({FetchOutcome.ROBOTS_DENIED, FetchOutcome.ROBOTS_UNKNOWN, FetchOutcome.REDIRECT_REFUSED,
                              FetchOutcome.REFUSED_SIZE, FetchOutcome.REFUSED_CONTENT})
# Left by a limit or budget (the summary's "limited", with the URLs discovery found past the run's limit).
LIMITED_OUTCOMES = frozenset({FetchOutcome.EXHAUSTED})
# The address policy's refusals travel as ``unavailable`` (DESIGN.md's fetcher contract) with these reasons
# (fetcher.py writes them); the summary counts them as refused.
REFUSED_REASON_PREFIXES = ("non-public address", "refused-url:")


def refused_reason_sql(column: str) -> str:
    """A SQL condition: ``column`` (a fetch reason) is one of the address policy's refusals."""
    return "(" + " OR ".join(f"{column} LIKE '{prefix}%'" for prefix in REFUSED_REASON_PREFIXES) + ")"


class ContentKind(StrEnum):
    HTML = "html"
    XML = "xml"  # sitemaps
    FEED = "feed"
    PDF = "pdf"
    TEXT = "text"  # robots.txt
    ANY = "any"


@dataclass(frozen=True, slots=True)
class FetchRequest:
    url: str
    etag: str | None = None
    last_modified: str | None = None
    accept: tuple[ContentKind, ...] = (ContentKind.HTML,)
    key: str | None = None  # caller's id for the request (a document id), returned on the result


@dataclass(frozen=True, slots=True)
class FetchResult:
    url: str
    outcome: FetchOutcome
    reason: str = ""
    final_url: str | None = None
    status: int | None = None
    content_type: str | None = None
    charset: str | None = None
    kind: ContentKind | None = None
    body: bytes | None = None
    etag: str | None = None
    last_modified: str | None = None
    elapsed_ms: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    key: str | None = None
    wire_bytes: int | None = None  # bytes received on the wire (compressed), for the run's byte budget

    @property
    def ok(self) -> bool:
        return self.outcome is FetchOutcome.FETCHED

    def text(self) -> str:
        """The body decoded by the declared or sniffed charset (replacement on bad bytes)."""
        if self.body is None:
            return ""
        return decode_body(self.body, self.charset)


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"""<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_\-.]+)""", re.IGNORECASE)


def sniff_charset(body: bytes, declared: str | None) -> str:
    """Declared charset if Python knows it, else a BOM, a meta/XML declaration, else UTF-8."""
    for candidate in (declared,):
        if candidate and _known(candidate):
            return candidate.lower()
    if body.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    head = body[:4096]
    match = _META_CHARSET.search(head) or _XML_ENCODING.search(head)
    if match:
        name = match.group(1).decode("ascii", "replace")
        if _known(name):
            return name.lower()
    return "utf-8"


def _known(name: str) -> bool:
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True


def decode_body(body: bytes, charset: str | None) -> str:
    return body.decode(sniff_charset(body, charset), errors="replace")
