"""Citations bound to stored bytes: cite, verify, tamper, slice, and drift as the page shifts, changes and goes."""

from __future__ import annotations

import json

import blake3
import sqlalchemy as sa

from gleaner.provenance.quotes import QuoteRefusal
from gleaner.provenance.verification import CitedSpan, DriftState, VerifyState
from gleaner.runtime.runner import crawl, new_request
from gleaner.serving.textsapi import TextReader, text_slice
from gleaner.serving.webhook import WebhookRequest, handle
from gleaner.store.documents.citations import Refused

from .provenance_site import BODY, LEAD, article_html, news_site, publish

OPERATOR = TextReader.operator()

QUOTE = "approved the new harbour budget on Monday"


def _crawl(deps, site):
    return crawl(deps, new_request(site.url + "/", site_domain="news.test"))


def _cite(deps, url, quote=QUOTE):
    return deps.provenance.cite(deps.provenance.document_at(url), quote)


def test_a_citation_verifies_from_the_stored_bytes_until_its_row_is_tampered_with(deps):
    with news_site({"/news/budget": article_html("Budget", [LEAD, *BODY])}) as site:
        _crawl(deps, site)
        url = site.url + "/news/budget"
        cited = _cite(deps, url)
    assert isinstance(cited, CitedSpan)
    assert cited.quote == QUOTE and cited.version == 1
    body = deps.provenance.text_bytes(cited.text_hash)
    assert blake3.blake3(body).hexdigest() == cited.text_hash  # what a third party checks, with no Gleaner
    assert body[cited.start:cited.end] == QUOTE.encode()
    assert deps.provenance.verify_citation(cited).state is VerifyState.VERIFIED
    assert _cite(deps, url) == cited  # citing the same words again is the same citation

    with deps.engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge.citations SET span_start = span_start + 1, span_end = span_end + 1"
                             " WHERE id = :i"), {"i": cited.citation_id})
    shifted = deps.provenance.citation(cited.citation_id)
    verdict = deps.provenance.verify_citation(shifted)
    assert (verdict.state, verdict.reason) == (VerifyState.REJECTED, "not-verbatim")

    with deps.engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge.citations SET span_start = :a, span_end = :b,"
                             " quote = 'approved the new harbour budget on Friday' WHERE id = :i"),
                     {"i": cited.citation_id, "a": cited.start, "b": cited.end})
    assert deps.provenance.verify_citation(deps.provenance.citation(cited.citation_id)).state is VerifyState.REJECTED


def test_quotes_are_refused_when_too_long_inside_words_personal_or_absent(deps):
    with news_site({"/news/budget": article_html("Budget", [LEAD, *BODY])}) as site:
        _crawl(deps, site)
        url = site.url + "/news/budget"
        assert _cite(deps, url, "pprove") == Refused(QuoteRefusal.NOT_ON_WORD_BOUNDARIES)
        assert _cite(deps, url, LEAD) == Refused(QuoteRefusal.TOO_MANY_WORDS)
        assert _cite(deps, url, "write to editor@harbour.test") == Refused(QuoteRefusal.PERSONAL_DATA)
        assert _cite(deps, url, "rejected the budget") == Refused(QuoteRefusal.NOT_IN_TEXT)
    with deps.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM knowledge.citations")).scalar() == 0


def test_drift_reports_a_shift_then_a_change_then_the_page_gone(deps):
    path = "/news/budget"
    with news_site({path: article_html("Budget", [LEAD, *BODY])}) as site:
        _crawl(deps, site)
        cited = _cite(deps, site.url + path)
        assert deps.provenance.drift_of(cited)[1].state is DriftState.HOLDS

        publish(site, path, article_html("Budget", ["Correction: an earlier version misnamed the pier.", LEAD,
                                                    *BODY]))
        _crawl(deps, site)
        shift = deps.provenance.drift_of(cited)[1]
        assert shift.state is DriftState.CHANGED
        assert shift.current["version"] == 2 and shift.current["start"] > cited.start
        now = deps.provenance.text_bytes(shift.current["text_hash"])
        assert now[shift.current["start"]:shift.current["end"]] == QUOTE.encode()

        publish(site, path, article_html("Budget", [LEAD.replace("approved", "postponed"), *BODY]))
        _crawl(deps, site)
        assert deps.provenance.drift_of(cited)[1].state is DriftState.DRIFTED

        publish(site, path, None, status=404)
        _crawl(deps, site)
        assert deps.provenance.drift_of(cited)[1].state is DriftState.GONE
    # The citation still verifies against its own version's bytes: drift is marked, never rewritten.
    assert deps.provenance.verify_citation(cited).state is VerifyState.VERIFIED


def test_a_snapshot_records_the_blake3_of_the_bytes_as_fetched(deps):
    html = article_html("Budget", [LEAD, *BODY])
    with news_site({"/news/budget": html}) as site:
        _crawl(deps, site)
        url = site.url + "/news/budget"
    with deps.engine.connect() as conn:
        fetched, linked, version = conn.execute(sa.text(
            "SELECT s.source_blake3, t.source_blake3, c.canonicaliser_version FROM knowledge.document_snapshots s"
            " JOIN knowledge.documents d ON d.id = s.document_id"
            " JOIN knowledge.snapshot_texts t ON t.snapshot_id = s.id"
            " JOIN knowledge.canonical_texts c ON c.text_hash = t.text_hash WHERE d.canonical_url = :u"),
            {"u": url}).one()
    assert fetched == linked == blake3.blake3(html.encode()).hexdigest()
    assert version == 2


def test_a_slice_of_stored_text_is_served_over_http_with_its_range_checked(make_deps):
    deps = make_deps(webhook_secret="s3cret")
    with news_site({"/news/budget": article_html("Budget", [LEAD, *BODY])}) as site:
        _crawl(deps, site)
        cited = _cite(deps, site.url + "/news/budget")
    status, body = text_slice(deps, cited.text_hash, {"start": str(cited.start), "end": str(cited.end)}, OPERATOR)
    assert (status, body["text"]) == (200, QUOTE)
    assert text_slice(deps, cited.text_hash, {"start": "5", "end": "1"}, OPERATOR)[0] == 400
    assert text_slice(deps, "0" * 64, {}, OPERATOR)[0] == 404
    assert text_slice(deps, "not-a-hash", {}, OPERATOR)[0] == 400
    status, answer = handle(WebhookRequest("GET", f"/v1/texts/{cited.text_hash}",
                                           headers={"authorization": "Bearer s3cret"},
                                           query={"start": str(cited.start), "end": str(cited.end)}), deps)
    assert status == 200 and json.loads(json.dumps(answer))["text"] == QUOTE
    assert handle(WebhookRequest("GET", f"/v1/texts/{cited.text_hash}"), deps)[0] == 401
