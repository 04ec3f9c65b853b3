"""The quality log over the back office: the feed URLs the landing refused, filtered by kind and time, paged."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from gleaner.backoffice.wsgi import BackofficeApp
from tests.backoffice.conftest import call

FINDINGS = [  # (kind, URL, reason, when)
    ("ssrf_rejected", "http://10.0.0.5/internal", "resolves to a private address", "2026-11-01T10:00:00+00:00"),
    ("fetch_refused", "https://feed.example/gone", "HTTP 410", "2026-11-10T10:00:00+00:00"),
    ("ssrf_rejected", "http://169.254.169.254/latest", "link-local address", "2026-11-20T10:00:00+00:00"),
    ("extraction_empty", "https://feed.example/empty", "no text in the page", "2026-11-25T10:00:00+00:00"),
]


@pytest.fixture
def logged(deps: Any) -> BackofficeApp:
    for kind, url, reason, when in FINDINGS:
        assert deps.references.log_quality(kind, url, reason, [])
        with deps.engine.begin() as conn:
            conn.execute(sa.text("UPDATE knowledge.ingestion_quality_log SET created_at = CAST(:t AS timestamptz)"
                                 " WHERE source_url = :u"), {"t": when, "u": url})
    return BackofficeApp(deps)


def test_the_quality_log_lists_findings_newest_first_with_their_reasons(logged: BackofficeApp):
    answer = call(logged, "GET", "/v1/quality").json()
    assert answer["total"] == 4
    assert [(e["flag_type"], e["source_url"], e["reason"]) for e in answer["entries"]] == [
        (kind, url, reason) for kind, url, reason, _ in reversed(FINDINGS)]


def test_the_quality_log_filters_by_kind_and_time_and_pages(logged: BackofficeApp):
    ssrf = call(logged, "GET", "/v1/quality", query={"kind": "ssrf_rejected"}).json()
    assert [e["source_url"] for e in ssrf["entries"]] == [FINDINGS[2][1], FINDINGS[0][1]] and ssrf["total"] == 2
    recent = call(logged, "GET", "/v1/quality", query={"since": "2026-11-15T00:00:00+00:00"}).json()
    assert [e["source_url"] for e in recent["entries"]] == [FINDINGS[3][1], FINDINGS[2][1]]
    both = call(logged, "GET", "/v1/quality", query={"kind": "ssrf_rejected", "since": "2026-11-15"}).json()
    assert [e["source_url"] for e in both["entries"]] == [FINDINGS[2][1]]
    page = call(logged, "GET", "/v1/quality", query={"limit": 2, "offset": 1}).json()
    assert [e["source_url"] for e in page["entries"]] == [FINDINGS[2][1], FINDINGS[1][1]] and page["total"] == 4


def test_the_quality_page_shows_the_filtered_log_with_a_pager(logged: BackofficeApp):
    page = call(logged, "GET", "/ui/quality", query={"kind": "ssrf_rejected", "limit": 1})
    assert page.status == 200
    html = page.body.decode()
    assert FINDINGS[2][1] in html and FINDINGS[0][1] not in html and FINDINGS[1][1] not in html
    assert "1\u20131 of 2" in html and "offset=1" in html and "kind=ssrf_rejected" in html
    empty = call(logged, "GET", "/ui/quality", query={"since": "2027-01-01"}).body.decode()
    assert "Nothing logged" in empty
    assert call(logged, "GET", "/ui/quality", query={"kind": "spam"}).status == 400
