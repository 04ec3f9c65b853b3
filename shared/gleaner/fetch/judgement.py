"""The fetcher's response judgement: pure decisions on what came back, apart from how it was fetched.

The fetcher (``fetcher.py``) drives the exchange: address policy, robots.txt first, politeness,
budget, redirects, the body under its caps. What a status, a content type, a body's first bytes or
a Retry-After header *mean* is decided here, from values alone, so it can be read and tested
without a network.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from gleaner.fetch.robots import RobotsRules
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest, FetchResult

KIND_TYPES: dict[ContentKind, tuple[str, ...]] = {
    ContentKind.HTML: ("text/html", "application/xhtml+xml"),
    ContentKind.XML: ("application/xml", "text/xml", "application/x-gzip", "application/gzip",
                      "application/octet-stream", "text/plain"),
    ContentKind.FEED: ("application/rss+xml", "application/atom+xml", "application/rdf+xml",
                       "application/xml", "text/xml", "application/feed+json"),
    ContentKind.PDF: ("application/pdf",),
    ContentKind.TEXT: ("text/plain",),
}
ACCEPT_HEADER: dict[ContentKind, str] = {
    ContentKind.HTML: "text/html,application/xhtml+xml",
    ContentKind.XML: "application/xml,text/xml",
    ContentKind.FEED: "application/rss+xml,application/atom+xml,application/xml",
    ContentKind.PDF: "application/pdf",
    ContentKind.TEXT: "text/plain",
}
REDIRECTS = frozenset({301, 302, 303, 307, 308})
DENIED = frozenset({401, 403, 407, 451})
BACKOFF = frozenset({429, 503})


def judge_status(request: FetchRequest, status: int, robots: bool) -> tuple[FetchOutcome, str] | None:
    """The outcome a status alone decides, or None when the body should be read."""
    if status in REDIRECTS:
        return FetchOutcome.REDIRECT_REFUSED, f"HTTP {status} redirect"  # _follow decides what happens next
    if status == 304:
        if request.etag or request.last_modified:
            return FetchOutcome.NOT_MODIFIED, "304 not modified"
        return FetchOutcome.UNAVAILABLE, "unexpected 304 to an unconditional request"
    if robots:
        return None if 200 <= status < 300 else (FetchOutcome.UNAVAILABLE, f"HTTP {status}")
    if status in DENIED:
        return FetchOutcome.DENIED, f"HTTP {status}"
    if status not in (200, 203):
        return FetchOutcome.UNAVAILABLE, f"HTTP {status}"
    return None


@dataclass(frozen=True, slots=True)
class Readable:
    """Headers that let the body be read: its declared type, and the kind it will be taken as.

    ``kind`` None: no type was declared and the request wants HTML, so the body's first bytes decide
    (:func:`judge_sniffed`)."""

    content_type: str | None
    charset: str | None
    kind: ContentKind | None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Headers that refuse the body before a byte of it is read."""

    outcome: FetchOutcome
    reason: str
    content_type: str | None = None


def judge_headers(request: FetchRequest, headers: Mapping[str, str], url: str, *, limit: int,
                  robots: bool) -> Readable | Refusal:
    """What a 2xx response's headers (lower-cased names) decide: read the body, or refuse it unread."""
    declared = headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        return Refusal(FetchOutcome.REFUSED_SIZE, f"Content-Length {declared} exceeds {limit} bytes")
    content_type, charset = parse_content_type(headers.get("content-type", ""))
    kind = ContentKind.ANY if robots else kind_of(content_type, url, request.accept)
    sniff = kind is None and content_type is None and ContentKind.HTML in request.accept
    if kind is None and not sniff:
        return Refusal(FetchOutcome.REFUSED_CONTENT, f"content type {content_type or 'missing'!r} not accepted "
                       f"(wanted {', '.join(request.accept)})", content_type)
    return Readable(content_type, charset, kind)


def judge_sniffed(body: bytes) -> Readable | Refusal:
    """A body that came without a content type, to a request that wants HTML: HTML if it looks it."""
    if not looks_like_html(body):
        return Refusal(FetchOutcome.REFUSED_CONTENT, "content type missing and the body is not HTML")
    return Readable("text/html", None, ContentKind.HTML)


def robots_rules_from(result: FetchResult) -> RobotsRules:
    """What a robots.txt fetch means for its host (RFC 9309): rules, no rules, or fetch nothing."""
    if result.outcome is FetchOutcome.FETCHED:
        return RobotsRules.parse(result.body or b"")
    if result.outcome is FetchOutcome.EXHAUSTED:
        return replace(RobotsRules.unknown(result.reason), exhausted=True)
    status = result.status
    if status is not None and 400 <= status < 500 and status != 429 and result.outcome is not (
            FetchOutcome.REDIRECT_REFUSED):
        return RobotsRules.allow_all(f"robots.txt answered {status}: no rules")
    if result.outcome is FetchOutcome.REFUSED_SIZE:
        return RobotsRules.unknown(f"robots.txt oversized ({result.reason})")
    if status is None and result.outcome is FetchOutcome.UNAVAILABLE:
        # The host never answered (refused, unreachable, a non-public address): that is the cause to
        # name, not robots.txt, which only happened to be the first request.
        return RobotsRules.unknown(result.reason)
    return RobotsRules.unknown(f"robots.txt unavailable ({result.outcome}: {result.reason}); RFC 9309 "
                               "says to fetch nothing from the host then")


def retry_after(value: str | None, *, default: float) -> float:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return default
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default
    return max(0.0, when.timestamp() - time.time())


def accept_header(kinds: tuple[ContentKind, ...]) -> str:
    values = [ACCEPT_HEADER[k] for k in kinds if k in ACCEPT_HEADER]
    return ",".join(values) + ";q=1.0,*/*;q=0.1" if values else "*/*"


def looks_like_html(body: bytes) -> bool:
    head = body[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"\xef\xbb\xbf<!doctype html", b"\xef\xbb\xbf<html"))


def parse_content_type(value: str) -> tuple[str | None, str | None]:
    if not value:
        return None, None
    parts = [p.strip() for p in value.split(";")]
    charset = None
    for p in parts[1:]:
        name, _, val = p.partition("=")
        if name.strip().lower() == "charset":
            charset = val.strip().strip('"\'') or None
    return parts[0].lower() or None, charset


def kind_of(content_type: str | None, url: str, accept: tuple[ContentKind, ...]) -> ContentKind | None:
    if ContentKind.ANY in accept:
        return ContentKind.ANY
    path = urlsplit(url).path.lower()
    for kind in accept:
        if content_type and content_type in KIND_TYPES.get(kind, ()):
            return kind
        if content_type is None and kind is ContentKind.XML and path.endswith((".xml", ".xml.gz", ".gz")):
            return kind
    return None
