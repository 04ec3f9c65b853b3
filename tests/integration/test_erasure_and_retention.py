"""Erasure removes a page's content and keeps it from coming back; retention keeps current and pinned versions."""

from __future__ import annotations

import json

import sqlalchemy as sa

from gleaner.provenance.verification import CitedSpan, VerifyState
from gleaner.runtime.runner import crawl, new_request
from gleaner.serving.webhook import WebhookRequest, handle
from gleaner.stages import dispatch, wire
from gleaner.store.documents.blocklist import erased_forms
from gleaner.store.documents.erasure import erase_document
from gleaner.store.documents.retention import prune

from .provenance_site import BODY, LEAD, article_html, news_site, publish

SITE = "news.test"


def _crawl(deps, site):
    return crawl(deps, new_request(site.url + "/", site_domain=SITE))


def _erase(deps, url, site=None):
    document = deps.provenance.document_at(url, site)
    return erase_document(deps.provenance, deps.blobs, deps.blocklist, document["id"], "request 42", "tester")


def _count(deps, sql, **params):
    with deps.engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar()


def test_erase_then_recrawl_and_the_same_content_at_another_url_stores_nothing(deps):
    html = article_html("Budget", [LEAD, *BODY])
    with news_site({"/news/budget": html, "/news/other": article_html("Other", BODY)}) as site:
        _crawl(deps, site)
        url = site.url + "/news/budget"
        document = deps.provenance.document_at(url)
        cited = deps.provenance.cite(document, "approved the new harbour budget")
        assert isinstance(cited, CitedSpan)
        assert deps.blobs.list(f"domains/{SITE}/document-snapshots/{document['id']}/")

        report = _erase(deps, url)
        assert report.versions_removed == 1 and report.texts_removed == 1 and report.citations_cleared == 1
        assert deps.blobs.list(f"domains/{SITE}/document-snapshots/{document['id']}/") == []
        assert not any(document["id"] in key or "budget" in key for key in deps.blobs.list("domains/"))
        assert deps.provenance.text_bytes(cited.text_hash) is None
        assert _count(deps, "SELECT count(*) FROM knowledge.text_spans WHERE text_hash = :h", h=cited.text_hash) == 0
        erased = deps.provenance.citation(cited.citation_id)
        assert erased.quote is None and deps.provenance.verify_citation(erased).state is VerifyState.UNVERIFIABLE
        assert deps.provenance.document_at(url) is None  # the URL is held nowhere: only its erased form
        ((erased_site, form),) = erased_forms(deps.blocklist, url, None)
        assert erased_site == SITE and form.startswith("erased:") and url not in form
        row = deps.provenance.document_at(form)
        assert row["id"] == document["id"] and row["is_deleted"] and row["current_snapshot_id"] is None
        assert _count(deps, "SELECT scrape_policy::text FROM knowledge.documents WHERE id = :d",
                      d=document["id"]) == "skip"
        assert _count(deps, "SELECT requested_by || ':' || reason FROM knowledge.erasures") == "tester:request 42"
        removed = [e for e in deps.metadata.list_events(site=SITE) if e.type == "document.removed"]
        assert [e.document_id for e in removed] == [document["id"]]

        texts = _count(deps, "SELECT count(*) FROM knowledge.canonical_texts")
        snapshots = _count(deps, "SELECT count(*) FROM knowledge.document_snapshots")
        publish(site, "/copy/budget", html)  # the same page, at a URL never erased
        second = _crawl(deps, site)

    # The erased URL is skipped (gate 1): never scraped again; its copy elsewhere is refused.
    assert _count(deps, "SELECT decision::text || ':' || coalesce(fetch_outcome::text, 'not fetched')"
                        " FROM knowledge.crawl_page_decisions WHERE run_id = :r AND document_id = :d",
                  r=second["run_id"], d=document["id"]) == "exclude:not fetched"
    assert _count(deps, "SELECT count(*) FROM knowledge.canonical_texts") == texts
    assert _count(deps, "SELECT count(*) FROM knowledge.document_snapshots") == snapshots
    assert _count(deps, "SELECT c.fetch_outcome::text FROM knowledge.crawl_page_decisions c"
                        " JOIN knowledge.documents d ON d.id = c.document_id WHERE d.canonical_url = :u",
                  u=site.url + "/copy/budget") == "refused-erased"
    copy = deps.provenance.document_at(site.url + "/copy/budget")
    assert deps.blobs.list(f"domains/{SITE}/document-snapshots/{copy['id']}/") == []


def test_an_erased_reference_is_refused_by_the_webhook_and_its_content_by_the_landing(make_deps):
    deps = make_deps(webhook_secret="s3cret")
    wire(deps.bus, deps)
    html = article_html("Budget", [LEAD, *BODY])

    def post(url):
        body = json.dumps({"articles": [{"url": url, "title": "Budget", "workspace_id": "w1", "published_at": None,
                                         "summary": None, "feed_source": None}]}).encode()
        answer = handle(WebhookRequest("POST", "/", headers={"authorization": "Bearer s3cret"}, body=body), deps)
        deps.bus.drain()
        return answer

    with news_site({"/news/budget": html}) as site:
        url = site.url + "/news/budget"
        assert post(url)[1]["accepted"] == 1
        assert deps.references.counts()["reference_items"] == 1
        report = _erase(deps, url, "_references")
        assert report.blobs_deleted >= 1
        assert deps.references.counts()["reference_items"] == 0

        status, answer = post(url)
        assert status == 202 and answer["accepted"] == 0 and answer["rejected"] == [{"index": 0, "reason": "erased"}]

        publish(site, "/copy/budget", html)
        assert post(site.url + "/copy/budget")[1]["accepted"] == 1
    assert deps.references.counts()["reference_items"] == 0
    (finding,) = deps.references.quality_log(site.url + "/copy/budget")
    assert finding["reason"] == "erased"
    assert _count(deps, "SELECT count(*) FROM knowledge.document_snapshots") == 0


def test_prune_keeps_the_newest_the_current_and_the_cited_versions_and_drops_the_rest_with_their_bodies(make_deps):
    deps = make_deps(keep_versions=1)
    path = "/news/budget"
    with news_site({path: article_html("Budget", [LEAD, *BODY])}) as site:
        _crawl(deps, site)
        document = deps.provenance.document_at(site.url + path)
        cited = deps.provenance.cite(document, "approved the new harbour budget")  # pins version 1
        for n in (2, 3, 4):
            publish(site, path, article_html("Budget", [LEAD, *BODY, f"Update number {n} from the newsroom."]))
            _crawl(deps, site)
    versions = {v["version"]: v for v in deps.metadata.snapshots_of(document["id"])}
    assert sorted(versions) == [1, 2, 3, 4]

    report = prune(deps.provenance, deps.blobs, SITE, deps.settings.keep_versions)

    assert report.versions_removed == 2 and report.blobs_deleted == 4 and report.texts_removed == 2
    assert _count(deps, "SELECT count(*) FROM knowledge.text_spans s WHERE NOT EXISTS"
                        " (SELECT 1 FROM knowledge.canonical_texts c WHERE c.text_hash = s.text_hash)") == 0
    kept = {v["version"]: v for v in deps.metadata.snapshots_of(document["id"])}
    assert sorted(kept) == [1, 4]
    for version in (2, 3):
        assert not deps.blobs.exists(versions[version]["content_ref"])
        assert not deps.blobs.exists(versions[version]["raw_ref"])
    assert deps.blobs.exists(versions[1]["content_ref"]) and deps.blobs.exists(versions[4]["content_ref"])
    assert deps.provenance.verify_citation(cited).state is VerifyState.VERIFIED
    assert prune(deps.provenance, deps.blobs, SITE, 1).versions_removed == 0  # nothing left to prune


def test_a_page_erased_between_its_fetch_and_its_snapshot_is_not_versioned_and_its_run_still_ends(deps):
    from gleaner.bus.local import LocalBus
    from gleaner.messages import PagesFetched
    from gleaner.stages import snapshot

    with news_site({"/news/budget": article_html("Budget", [LEAD, *BODY])}) as site:
        held: list[PagesFetched] = []
        bus = deps.bus
        assert isinstance(bus, LocalBus)
        wire(bus, deps)
        bus.handlers[PagesFetched.topic] = [held.append]  # scrape's hand-off waits here instead of snapshot
        # The stages as the cloud runs them (the local runner would settle a run left with work pending).
        request = new_request(site.url + "/", site_domain=SITE)
        dispatch(request, deps)
        bus.drain()
        summary = {"run_id": request.run_id}
        (message,) = held
        page = next(p for p in message.pages if p.document_id == deps.provenance.document_at(
            site.url + "/news/budget")["id"])
        _erase(deps, site.url + "/news/budget")
        snapshot.handle(message, deps)
    assert _count(deps, "SELECT count(*) FROM knowledge.document_snapshots WHERE document_id = :d",
                  d=page.document_id) == 0
    assert _count(deps, "SELECT fetch_outcome::text FROM knowledge.crawl_page_decisions"
                        " WHERE run_id = :r AND document_id = :d", r=summary["run_id"], d=page.document_id) \
        == "refused-erased"
    assert deps.metadata.run_summary(summary["run_id"])["status"] in ("finished", "partial")
