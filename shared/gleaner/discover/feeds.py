"""RSS 2.0, RSS 1.0/0.9 and Atom feeds, parsed from bytes that Gleaner's fetcher fetched.

feedparser does the format work (it is maintained and knows the many dialects),
but it is never handed anything it could open itself: a ``str`` that looks like a
URL makes it fetch, and ``bytes`` that name a file make it read that file. We give
it a stream. Before parsing, a feed is refused if it is larger than
``MAX_FEED_BYTES`` or declares XML entities (the "billion laughs" bomb needs a
``<!ENTITY`` declaration; no real feed has one). A feed that is not well-formed
is still read as far as feedparser's lenient parser gets, and the problem is
recorded (feedparser's ``bozo`` flag) rather than raised.
"""

from __future__ import annotations

import calendar
import io
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from gleaner.errors import InvalidInput
from gleaner.urls import absolutize

# A large news feed is a few hundred KB; 5 MiB leaves room for full-content feeds and no more.
MAX_FEED_BYTES = 5 * 1024 * 1024
# Entries past this are ignored (and the feed is marked truncated): a feed is a window, not an archive.
MAX_FEED_ENTRIES = 5_000
_ENTITY_DECL = re.compile(rb"<!ENTITY", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class FeedEntry:
    link: str  # absolute http(s) URL as the feed spells it (what to fetch); canonicalise for identity
    title: str | None
    summary: str | None
    published_at: datetime | None


@dataclass(frozen=True, slots=True)
class Feed:
    kind: str  # feedparser's version string: rss20, rss10, rss090, atom10, ... ("" if unknown)
    title: str | None
    entries: tuple[FeedEntry, ...]
    problems: tuple[str, ...] = ()
    truncated: bool = False


def parse_feed(data: bytes, base_url: str, content_type: str | None = None) -> Feed:
    """Parse one feed; a refused or unreadable feed raises InvalidInput, a sloppy one records problems."""
    if len(data) > MAX_FEED_BYTES:
        raise InvalidInput(f"feed is {len(data)} bytes, larger than the {MAX_FEED_BYTES}-byte cap")
    if _ENTITY_DECL.search(data):
        raise InvalidInput("feed declares XML entities (refused: entity expansion bombs)")
    import feedparser  # here, not at start: most crawls read no feed (and map imports this module)

    # Without a content type feedparser flags every feed as suspicious; the fetcher already checked it.
    headers = {"content-location": base_url, "content-type": content_type or "application/xml"}
    parsed = feedparser.parse(io.BytesIO(data), response_headers=headers, sanitize_html=True,
                              resolve_relative_uris=True)
    problems: list[str] = []
    if parsed.get("bozo"):
        problems.append(f"feed is not well-formed: {_describe(parsed.get('bozo_exception'))}")
    version = str(parsed.get("version") or "")
    raw_entries = parsed.get("entries") or []
    if not version and not raw_entries:
        raise InvalidInput(problems[0] if problems else "not an RSS or Atom feed")
    entries: list[FeedEntry] = []
    skipped = 0
    for raw in raw_entries[:MAX_FEED_ENTRIES]:
        link = _entry_link(raw, base_url)
        if link is None:
            skipped += 1
            continue
        entries.append(FeedEntry(link=link, title=_clean(raw.get("title")), summary=_clean(raw.get("summary")),
                                 published_at=_when(raw)))
    if skipped:
        problems.append(f"{skipped} entries had no usable http(s) link")
    feed_title = _clean((parsed.get("feed") or {}).get("title"))
    return Feed(version, feed_title, tuple(entries), tuple(problems), len(raw_entries) > MAX_FEED_ENTRIES)


def _describe(exc: object) -> str:
    text = str(exc) if exc is not None else "unknown error"
    return f"{type(exc).__name__}: {text}" if exc is not None else text


def _entry_link(raw: dict, base_url: str) -> str | None:
    """The entry's article URL: its alternate link, else the first link, else a permalink guid."""
    candidates: list[str] = []
    for link in raw.get("links") or []:
        if link.get("href") and link.get("rel", "alternate") == "alternate":
            candidates.append(link["href"])
    if raw.get("link"):
        candidates.append(raw["link"])
    if raw.get("id") and raw.get("guidislink", True):
        candidates.append(raw["id"])
    for href in candidates:
        url = absolutize(base_url, str(href))
        if url is not None:
            return url
    return None


def _clean(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    return text or None


def _when(raw: dict) -> datetime | None:
    for key in ("published_parsed", "updated_parsed"):
        parsed = raw.get(key)
        if parsed:
            try:
                return datetime.fromtimestamp(calendar.timegm(parsed), tz=UTC)
            except (OverflowError, ValueError, TypeError):
                continue
    return None
