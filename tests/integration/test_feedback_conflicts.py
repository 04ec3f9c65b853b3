"""Feedback and the contradiction detector: a client's correction is kept, searchable and citable, and
contradicting the copy opens one conflict with both passages, within the tenant only."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import replace
from typing import Any

import sqlalchemy as sa

from gleaner import tenancy
from gleaner.demosite.testsite import Page, TestSite
from gleaner.origins.contradictions import EXACT_BELOW
from gleaner.origins.feedback import About, give_feedback
from gleaner.origins.landing import land
from gleaner.origins.store import DocumentIdentity
from gleaner.retrieval import search
from gleaner.runtime.runner import crawl, new_request

SITE = "acme.test"
OTHER = "rival.test"
PRICING = ("# Pricing\n\nThe Pro plan price is 22 euros per month, billed yearly.\n\n"
           "Support is included in every plan.\n")


def _page(deps: Any, site: str, path: str, markdown: str) -> str:
    """A page of the copy (kept as an upload: the same snapshot and ingest steps as a crawl's page)."""
    ident = DocumentIdentity(site, f"upload://{site}{path}", path, "upload", title=path)
    return land(deps, ident, markdown, extractor="test").document_id


def _rows(deps: Any, sql: str, **params: Any) -> list[Any]:
    with deps.engine.connect() as conn:
        return list(conn.execute(sa.text(sql), params).all())


def _text(deps: Any, text_hash: str) -> bytes:
    return _rows(deps, "SELECT body FROM knowledge.canonical_texts WHERE text_hash = :h", h=text_hash)[0][0].encode()


def test_a_feedback_correcting_a_price_opens_exactly_one_conflict_with_both_passages(deps):
    page = _page(deps, SITE, "/pricing", PRICING)
    _page(deps, OTHER, "/pricing", PRICING.replace("22", "23"))  # another tenant: never compared
    landed = give_feedback(deps, SITE, "The price is 24, not 22.", "site token for acme.test",
                           About(document_id=page))
    assert landed.version == 1 and len(landed.conflicts) == 1
    (conflict,) = landed.conflicts
    assert conflict["conflict_type"] == "factual_contradiction" and conflict["detected_by"] == "rules"
    assert conflict["status"] == "open" and "22" in conflict["reason"]
    sides = {side["document_id"]: side for side in (conflict["a"], conflict["b"])}
    assert set(sides) == {page, landed.document_id}
    assert _text(deps, sides[page]["text_hash"])[sides[page]["start"]:sides[page]["end"]] == \
        b"The Pro plan price is 22 euros per month, billed yearly."
    mine = sides[landed.document_id]
    assert _text(deps, mine["text_hash"])[mine["start"]:mine["end"]] == b"The price is 24, not 22."
    rows = _rows(deps, "SELECT site_domain, status::text, a_start, b_end FROM knowledge.document_conflicts"
                       " WHERE conflict_type = 'factual_contradiction'")
    assert len(rows) == 1 and rows[0][0] == SITE
    events = _rows(deps, "SELECT type::text, site_domain FROM knowledge.document_events WHERE type = 'conflict.opened'")
    assert events == [("conflict.opened", SITE)]


def test_a_feedback_that_agrees_in_other_words_opens_none_and_is_kept_searchable_and_attributed(deps):
    _page(deps, SITE, "/pricing", PRICING)
    landed = give_feedback(deps, SITE, "Confirmed: the Pro plan costs 22 euros a month when billed yearly.",
                           "cli:alice")
    assert landed.conflicts == []
    (doc,) = _rows(deps, "SELECT origin::text, knowledge_type::text, tags, created_by, path, created_at"
                         " FROM knowledge.documents WHERE id = :d", d=landed.document_id)
    assert doc[:4] == ("feedback", "faq", ["feedback"], "cli:alice") and doc[4].startswith("/feedback/")
    with tenancy.scope(SITE):
        hits = search(deps, "Pro plan costs 22 euros confirmed", site_domain=SITE)["results"]
        assert hits[0]["document_id"] == landed.document_id
        cited = deps.provenance.cite(deps.provenance.document_at(
            _rows(deps, "SELECT canonical_url FROM knowledge.documents WHERE id = :d", d=landed.document_id)[0][0],
            SITE), "the Pro plan costs 22 euros")
    assert getattr(cited, "start", None) is not None
    assert _rows(deps, "SELECT count(*) FROM knowledge.document_conflicts")[0][0] == 0


def test_a_page_changed_to_contradict_an_upload_opens_a_conflict_when_it_is_ingested(deps):
    _page(deps, SITE, "/handbook.md", "# Handbook\n\nThe office opens on 2026-03-01 in the harbour building.\n")
    other = _page(deps, SITE, "/news.md", "# News\n\nThe office opens in the harbour building soon.\n")
    assert _rows(deps, "SELECT count(*) FROM knowledge.document_conflicts")[0][0] == 0
    ident = DocumentIdentity(SITE, f"upload://{SITE}/news.md", "/news.md", "upload")
    changed = land(deps, ident, "# News\n\nThe office opens on 2026-04-15 in the harbour building.\n",
                   extractor="test")
    assert changed.document_id == other and changed.version == 2 and len(changed.conflicts) == 1
    assert "dates" in changed.conflicts[0]["reason"] and changed.conflicts[0]["severity"] == "error"


def test_a_contradiction_is_found_among_more_fresh_vectors_than_the_detector_compares_each(deps):
    # A first crawl leaves every vector fresh; past EXACT_BELOW the detector compares only those the
    # sign-bit scan picks, and still finds the page that says otherwise.
    rng = random.Random(5)
    words = ["harbour", "lantern", "meadow", "quartz", "orbit", "saddle", "timber", "velvet", "walnut", "zephyr",
             "copper", "dune", "ember", "fjord", "glacier", "hazel", "island", "jasper", "kernel", "lagoon"]
    filler = "".join(f"# Part {i}\n\n{' '.join(rng.choice(words) for _ in range(14))}.\n\n"
                     for i in range(EXACT_BELOW + 40))
    _page(deps, SITE, "/almanac.md", filler)
    fresh = _rows(deps, "SELECT count(*) FROM knowledge.text_chunks WHERE fresh_embedding IS NOT NULL")[0][0]
    assert fresh > EXACT_BELOW
    page = _page(deps, SITE, "/pricing", PRICING)
    landed = land(deps, DocumentIdentity(SITE, f"upload://{SITE}/plans", "/plans", "upload", title="/plans"),
                  PRICING.replace("22", "24"), extractor="test")
    assert len(landed.conflicts) == 1
    (conflict,) = landed.conflicts
    assert {conflict["a"]["document_id"], conflict["b"]["document_id"]} == {page, landed.document_id}


def gleaner(deps: Any, database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it, on this test's database and data directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env.update(GLEANER_DATABASE_URL=database_url, GLEANER_HOME=str(deps.settings.data_dir),
               GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_EXTRACT_WORKERS="1")
    return subprocess.run([sys.executable, "-m", "gleaner.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_gleaner_feedback_prints_the_conflicts_it_opened_and_a_site_in_another_tenant_is_never_compared(
        deps, database_url):
    page = _page(deps, SITE, "/pricing", PRICING)
    answer = gleaner(deps, database_url, "feedback", SITE, "The price is 24, not 22.", "--about", page, "--json")
    assert answer.returncode == 0, answer.stderr
    printed = json.loads(answer.stdout)
    assert printed["version"] == 1 and len(printed["conflicts"]) == 1
    elsewhere = gleaner(deps, database_url, "feedback", OTHER, "The price is 24, not 22.", "--json")
    assert elsewhere.returncode == 0 and json.loads(elsewhere.stdout)["conflicts"] == []
    human = gleaner(deps, database_url, "feedback", SITE, "Support is not included in every plan.")
    assert human.returncode == 0 and "conflicts: 1" in human.stderr
    unknown = gleaner(deps, database_url, "feedback", OTHER, "Hello.", "--about", page)
    assert unknown.returncode != 0 and "no document" in unknown.stderr


PLANS = ("# Plans\n\n## Price\n\nThe Pro plan price is 22 euros per month, billed yearly.\n\n"
         "## Support\n\nSupport is included in every plan.\n")
HANDBOOK = ("# Handbook\n\n## Price\n\nThe Pro plan price is 24 euros per month, billed yearly.\n\n"
            "## Support\n\nSupport is not included in every plan.\n")


def test_two_contradictions_between_the_same_two_documents_are_two_conflicts_and_a_reingest_adds_none(deps):
    plans = _page(deps, SITE, "/plans.md", PLANS)
    first = land(deps, DocumentIdentity(SITE, f"upload://{SITE}/handbook.md", "/handbook.md", "upload"), HANDBOOK,
                 extractor="test")
    assert len(first.conflicts) == 2
    quotes = sorted((c["a"]["quote"], c["b"]["quote"]) if c["a"]["document_id"] == plans
                    else (c["b"]["quote"], c["a"]["quote"]) for c in first.conflicts)
    assert quotes == [("Support is included in every plan.", "Support is not included in every plan."),
                      ("The Pro plan price is 22 euros per month, billed yearly.",
                       "The Pro plan price is 24 euros per month, billed yearly.")]
    # A new version of the handbook that still says both: the same two pairs of passages, nothing new.
    changed = land(deps, DocumentIdentity(SITE, f"upload://{SITE}/handbook.md", "/handbook.md", "upload"),
                   HANDBOOK + "\n## Office\n\nThe office is in the harbour building.\n", extractor="test")
    assert changed.version == 2 and changed.conflicts == []
    assert _rows(deps, "SELECT count(*) FROM knowledge.document_conflicts")[0][0] == 2
    assert _rows(deps, "SELECT count(*) FROM knowledge.document_events WHERE type = 'conflict.opened'")[0][0] == 2


def _html(title: str, *paragraphs: str, links: str = "") -> Page:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return Page(f"<!doctype html><html><head><title>{title}</title></head><body><nav>{links}</nav><main>"
                f"<article><h1>{title}</h1>{body}</article></main></body></html>")


def test_a_crawled_page_is_compared_with_the_site_s_uploads_and_feedback_never_with_other_pages(deps):
    links = '<a href="/plans.html">Plans</a> <a href="/handbook.html">Handbook</a>'
    about = ("Every plan comes with the same dashboard, the same exports and the same single sign-on; the plans "
             "differ in how many projects they hold and how long their history is kept.")
    pages = {"/": _html("Home", "Welcome to the product's pages. " + about, links=links),
             "/plans.html": _html("Plans", "The Pro plan price is 22 euros per month, billed yearly.", about),
             "/handbook.html": _html("Handbook", "The Pro plan price is 24 euros per month, billed yearly.", about)}
    with TestSite(pages, max_seconds=300) as site:
        first = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        assert first["status"] == "finished"
        # Two crawled pages that disagree are not compared with each other: a crawl never waits on that.
        assert _rows(deps, "SELECT count(*) FROM knowledge.document_conflicts")[0][0] == 0
        upload = land(deps, DocumentIdentity(SITE, f"upload://{SITE}/price.md", "/price.md", "upload"),
                      "# Price\n\nThe Pro plan price is 22 euros per month, billed yearly.\n", extractor="test")
        assert len(upload.conflicts) == 1  # an upload is compared with every page: the handbook's 24
        pages["/plans.html"] = replace(_html("Plans", "The Pro plan price is 30 euros per month, billed yearly.",
                                             about), modified=1_800_000_000.0)
        crawl(deps, new_request(site.url + "/", site_domain=SITE))
    plans = deps.metadata.document_by_url(site.url + "/plans.html")["id"]
    opened = _rows(deps, "SELECT entity_a_id, entity_b_id FROM knowledge.document_conflicts ORDER BY created_at")
    assert len(opened) == 2, opened  # the changed page against the upload, not against the handbook
    assert {str(opened[1][0]), str(opened[1][1])} == {str(plans), upload.document_id}
