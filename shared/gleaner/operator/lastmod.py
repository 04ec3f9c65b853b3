"""Sitemap ``<lastmod>``: skip URLs that say they did not change since Gleaner last fetched them.

The map stage records each sitemap URL's lastmod on the run's ledger row
(``crawl_page_decisions.sitemap_lastmod``); on a run that honours it (a scheduled run of an ``auto``
site), the sample stage settles every included page whose lastmod is not after its last fetch as
``not-modified`` without a request. A date without a time means "some time that day", so it counts
as the end of the day; an unparsable or missing lastmod means the page is fetched as usual.
The ledger statements are :mod:`gleaner.store.ledger.lastmod`, reached through ``deps.metadata``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta

REASON = "sitemap lastmod is not after the last fetch"


def parse_lastmod(text: str | None) -> datetime | None:
    """A W3C datetime (or date) as an aware datetime; None if absent or malformed."""
    raw = (text or "").strip()
    try:
        if len(raw) == 10:
            day = date.fromisoformat(raw)
            return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def parsed_lastmods(lastmods: Mapping[str, str]) -> dict[str, datetime]:
    """canonical url -> lastmod as the sitemap wrote it, to the ones that parse."""
    return {url: parsed for url, text in lastmods.items() if (parsed := parse_lastmod(text)) is not None}
