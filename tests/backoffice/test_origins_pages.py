"""The back office's upload form, feedback form and conflicts inbox (both passages side by side)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import sqlalchemy as sa

from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.origins.landing import land
from gleaner.origins.store import DocumentIdentity
from tests.backoffice.conftest import call

SITE = "acme.test"
PRICING = "# Pricing\n\nThe Pro plan price is 22 euros per month, billed yearly.\n"


def _page(deps: Any) -> str:
    ident = DocumentIdentity(SITE, f"upload://{SITE}/pricing.md", "/pricing.md", "upload", title="Pricing")
    return land(deps, ident, PRICING, extractor="test").document_id


def test_feedback_sent_from_a_document_page_is_kept_and_its_conflict_shows_both_passages_side_by_side(deps):
    app = BackofficeApp(deps)  # no credential: the operator, as on loopback
    page = _page(deps)
    shown = call(app, "GET", f"/ui/documents/{page}")
    assert shown.status == 200 and b'action="/ui/documents/' + page.encode() + b'/feedback"' in shown.body
    assert b"Rescrape this page" not in shown.body  # an upload has no URL to fetch again
    sent = call(app, "POST", f"/ui/documents/{page}/feedback",
                form=urlencode({"text": "The price is 24, not 22."}).encode())
    assert sent.status == 303 and sent.headers["Location"].endswith("?done=feedback-conflicts")
    where, done = sent.headers["Location"].split("?done=")
    feedback = call(app, "GET", where, query={"done": done})
    assert feedback.status == 200 and b"contradicts what the copy says" in feedback.body
    inbox = call(app, "GET", f"/ui/sites/{SITE}/conflicts").body.decode()
    assert 'class="side-by-side"' in inbox
    assert "“The Pro plan price is 22 euros per month, billed yearly.”" in inbox
    assert "“The price is 24, not 22.”" in inbox and "gleaner slice" in inbox
    assert "<td>contradiction</td>" in inbox and "factual_contradiction" not in inbox  # in words


def test_the_upload_page_offers_a_form_that_posts_the_file_to_the_ingest_api(deps):
    app = BackofficeApp(deps)
    _page(deps)
    shown = call(app, "GET", f"/ui/sites/{SITE}/upload")
    assert shown.status == 200
    body = shown.body.decode()
    assert 'enctype="multipart/form-data"' in body and 'name="file"' in body and "/v1/ingest" in body
    assert call(app, "GET", "/ui/sites/nowhere.test/upload").status == 404
    tree = call(app, "GET", f"/ui/sites/{SITE}").body.decode()
    assert f'href="/ui/sites/{SITE}/upload"' in tree


def test_feedback_sent_from_a_search_hit_is_about_that_passage(deps):
    app = BackofficeApp(deps)
    _page(deps)
    found = call(app, "GET", "/ui/search", query={"q": "Pro plan price euros", "site": SITE}).body.decode()
    assert 'name="text_hash"' in found and "Feedback on this passage" in found
    hit = search_hit(deps)
    sent = call(app, "POST", f"/ui/documents/{hit['document_id']}/feedback", form=urlencode(
        {"text": "Billed monthly it is 25 euros.", "text_hash": hit["text_hash"], "start": hit["start"],
         "end": hit["end"]}).encode())
    assert sent.status == 303
    feedback_id = sent.headers["Location"].split("/ui/documents/")[1].split("?")[0]
    with deps.engine.connect() as conn:
        kept = conn.execute(sa.text("SELECT s.extraction_metadata->'feedback'->'about' FROM knowledge.documents d"
                                    " JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
                                    " WHERE d.id = :d"), {"d": feedback_id}).scalar_one()
    assert kept == {"text_hash": hit["text_hash"], "start": hit["start"], "end": hit["end"]}


def search_hit(deps: Any) -> dict[str, Any]:
    from gleaner import tenancy
    from gleaner.retrieval import search

    with tenancy.scope(SITE):
        return search(deps, "Pro plan price euros", site_domain=SITE)["results"][0]
