"""Sitemap ``<lastmod>``: skip URLs that say they did not change since Gleaner last fetched them.

The map stage records each sitemap URL's lastmod on the run's ledger row
(``crawl_page_decisions.sitemap_lastmod``); on a run that honours it (a scheduled run of an ``auto``
site), the sample stage settles every included page whose lastmod is not after its last fetch as
``not-modified`` without a request. A date without a time means "some time that day", so it counts
as the end of the day; an unparsable or missing lastmod means the page is fetched as usual.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.store.sqlstore import json_rows

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


def record_lastmods(engine: Engine, run_id: str, site: str, lastmods: Mapping[str, str]) -> None:
    """canonical url -> lastmod as the sitemap wrote it, onto the run's ledger rows."""
    rows = [{"u": url, "lm": parsed.isoformat()} for url, text in lastmods.items()
            if (parsed := parse_lastmod(text)) is not None]
    if not rows:
        return
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE knowledge.crawl_page_decisions c SET sitemap_lastmod = t.lm"
                " FROM knowledge.documents d, json_to_recordset(CAST(:rows AS json)) AS t(u text, lm timestamptz)"
                " WHERE c.run_id = :r AND d.id = c.document_id AND d.site_domain = :s AND d.canonical_url = t.u"
            ),
            {"r": run_id, "s": site, "rows": json_rows(rows)},
        )


def unchanged_since_last_fetch(engine: Engine, run_id: str, document_ids: Sequence[str]) -> set[str]:
    """Of ``document_ids``, those with a version whose sitemap lastmod is not after their last fetch."""
    if not document_ids:
        return set()
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT c.document_id FROM knowledge.crawl_page_decisions c"
                " JOIN knowledge.documents d ON d.id = c.document_id"
                " WHERE c.run_id = :r AND c.document_id = ANY(CAST(:ids AS uuid[]))"
                " AND c.sitemap_lastmod IS NOT NULL AND d.current_snapshot_id IS NOT NULL"
                " AND d.last_fetched_at IS NOT NULL AND c.sitemap_lastmod <= d.last_fetched_at"
            ),
            {"r": run_id, "ids": list(document_ids)},
        ).scalars().all()
    return {str(r) for r in rows}
