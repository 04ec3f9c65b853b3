"""The feed-poller webhook under functions-framework, landing articles from a loopback site into PostgreSQL.

Covers seed 000's landing-set contract (section 5): the evidence pair per URL, the backlinks, published_at
from the ledger, zero client-knowledge writes, the idempotency leg, the SSRF leg, the PDF leg, one item for
two workspaces, a failing fetch that lands on the next walk, and every malformed-request answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import functions_framework
import pytest
import sqlalchemy as sa

from gleaner import app as gleaner_app
from gleaner.demosite.testsite import Page, TestSite
from gleaner.references.identity import REFERENCES_SITE, reference_item_id, source_document_id
from gleaner.settings.config import Settings
from gleaner.store.backends.db import create_engine
from tests.feed_site import ARTICLES, Flaky, article_html, feed_site

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cret-token-for-tests-0123456789abcdef0123456789abcdef"
AUTH = {"Authorization": f"Bearer {SECRET}"}


@pytest.fixture
def site() -> Iterator[TestSite]:
    with feed_site() as test_site:
        yield test_site


@pytest.fixture
def engine(database_url: str) -> Iterator[sa.Engine]:
    eng = create_engine(Settings(database_url=database_url))
    yield eng
    eng.dispose()


@pytest.fixture
def make_client(monkeypatch: pytest.MonkeyPatch, database_url: str, tmp_path: Path) -> Iterator[Any]:
    """Factory: the ingest function's app under functions-framework, configured by its environment.

    Each call starts a new "process": the per-process Deps are rebuilt from the environment.
    """

    def factory(allow_networks: str | None = "127.0.0.0/8", **env: str) -> Any:
        monkeypatch.setenv("GLEANER_DATABASE_URL", database_url)
        monkeypatch.setenv("GLEANER_HOME", str(tmp_path / "gleaner"))
        monkeypatch.setenv("GLEANER_WEBHOOK_SECRET", SECRET)
        monkeypatch.setenv("GLEANER_HOST_DELAY", "0")
        monkeypatch.setenv("GLEANER_HOST_CONCURRENCY", "4")
        monkeypatch.setenv("GLEANER_FETCH_TIMEOUT", "5")
        monkeypatch.delenv("GLEANER_BUS", raising=False)
        if allow_networks is None:
            monkeypatch.delenv("GLEANER_ALLOW_NETWORKS", raising=False)
        else:
            monkeypatch.setenv("GLEANER_ALLOW_NETWORKS", allow_networks)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        gleaner_app.reset_process_deps()
        app = functions_framework.create_app(target="on_http", source=str(ROOT / "functions/ingest/main.py"))
        return app.test_client()

    yield factory
    gleaner_app.reset_process_deps()


def article(site: TestSite, path: str, workspace: str = "ws-1", **over: Any) -> dict[str, Any]:
    title = ARTICLES[path][0] if path in ARTICLES else "A report"
    return {"url": site.url + path, "title": title, "workspace_id": workspace,
            "published_at": "2026-06-01T08:00:00Z", "summary": f"Summary of {title}",
            "feed_source": site.url + "/feeds/rss2.xml", **over}


def post(client: Any, payload: Any, headers: dict[str, str] | None = None) -> Any:
    data = payload if isinstance(payload, bytes | str) else json.dumps(payload)
    return client.post("/", data=data, headers=AUTH if headers is None else headers,
                       content_type="application/json")


def counts(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as conn:
        row = conn.execute(sa.text(
            "SELECT (SELECT count(*) FROM knowledge.feed_articles),"
            " (SELECT count(*) FROM knowledge.reference_items),"
            " (SELECT count(*) FROM knowledge.ingestion_quality_log),"
            " (SELECT count(*) FROM knowledge.documents WHERE site_domain = :s),"
            " (SELECT count(*) FROM knowledge.document_snapshots s JOIN knowledge.documents d"
            "   ON d.id = s.document_id WHERE d.site_domain = :s)"), {"s": REFERENCES_SITE}).one()
    return dict(zip(("articles", "items", "quality", "documents", "snapshots"), row, strict=True))


def test_posted_articles_land_as_reference_items_with_intact_provenance(make_client, site, engine):
    client = make_client()
    response = post(client, {"articles": [article(site, "/articles/sea-ice"), article(site, "/articles/solar-cells")]})
    assert response.status_code == 202
    assert response.get_json() == {"accepted": 2, "duplicates": 0, "rejected": []}

    url = site.url + "/articles/sea-ice"
    ri = reference_item_id(url)
    with engine.connect() as conn:
        item = conn.execute(sa.text(
            "SELECT title, body, summary, source_url, published_at, source_document_id, ingestion_source,"
            " extraction_method, mime_type, source_snapshot_id FROM knowledge.reference_items WHERE id = :i"),
            {"i": ri}).one()
        doc = conn.execute(sa.text(
            "SELECT id, origin::text, source_url, canonical_url, current_snapshot_id, site_domain"
            " FROM knowledge.documents WHERE id = :d"), {"d": source_document_id(url)}).one()
        backlinks = conn.execute(sa.text(
            "SELECT reference_item_id FROM knowledge.feed_articles WHERE normalised_url = :u"), {"u": url}).all()
        snapshot = conn.execute(sa.text(
            "SELECT processed_markdown_ref, extraction_metadata FROM knowledge.document_snapshots WHERE id = :s"),
            {"s": item.source_snapshot_id}).one()
    assert item.title == "Arctic sea ice hits a record low"
    assert "lowest September value" in item.body
    assert item.summary == "Summary of Arctic sea ice hits a record low"
    assert item.source_url == url
    assert item.published_at.isoformat() == "2026-06-01T08:00:00+00:00"  # the ledger's, never the fetch time
    assert str(item.source_document_id) == str(doc.id)
    assert item.ingestion_source == "rss_feed"
    assert item.extraction_method.startswith("trafilatura-")
    assert item.mime_type == "text/html"
    assert (doc.origin, doc.source_url, doc.canonical_url, doc.site_domain) == ("scrape", url, url, REFERENCES_SITE)
    assert str(doc.current_snapshot_id) == str(item.source_snapshot_id)
    assert [str(b[0]) for b in backlinks] == [ri]
    assert snapshot.processed_markdown_ref.startswith(f"domains/{REFERENCES_SITE}/document-snapshots/{doc.id}/")
    assert counts(engine) == {"articles": 2, "items": 2, "quality": 0, "documents": 2, "snapshots": 2}
    with engine.connect() as conn:
        canonical = conn.execute(sa.text("SELECT count(*) FROM knowledge.snapshot_texts WHERE snapshot_id = :s"),
                                 {"s": item.source_snapshot_id}).scalar()
        client_knowledge = conn.execute(sa.text(
            "SELECT count(*) FROM knowledge.documents WHERE site_domain <> :s"), {"s": REFERENCES_SITE}).scalar()
    assert canonical == 1  # the ingest stage made its canonical text and span ledger
    assert client_knowledge == 0  # nothing landed in any tenant's documents


def test_a_permanent_refusal_is_logged_once_and_not_refetched_until_new_rows_arrive(make_client, site, engine):
    site.pages["/articles/members-only"] = Page("<html><body>Sign in</body></html>", status=403)
    site.pages["/media/chart"] = Page(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, content_type="image/png")
    client = make_client()
    response = post(client, {"articles": [article(site, "/articles/members-only", title="Paywalled"),
                                          article(site, "/media/chart", title="A chart"),
                                          article(site, "/articles/deleted", title="Gone")]})
    assert response.get_json()["accepted"] == 3
    with engine.connect() as conn:
        flags = conn.execute(sa.text(
            "SELECT flag_type, reason FROM knowledge.ingestion_quality_log ORDER BY source_url")).all()
    assert [f.flag_type for f in flags] == ["fetch_refused"] * 3
    assert ["HTTP 404" in flags[0].reason, "HTTP 403" in flags[1].reason,
            "refused-content" in flags[2].reason] == [True, True, True]
    requests = len(site.paths())

    assert post(client, {}).get_json() == {"walk": True, "scheduled": 0}
    assert len(site.paths()) == requests
    assert counts(engine)["quality"] == 3

    # Another workspace sends the same article: its row is new evidence, so the URL is tried again.
    post(client, {"articles": [article(site, "/articles/members-only", workspace="ws-2", title="Paywalled")]})
    assert site.requested("/articles/members-only") == 2
    assert counts(engine) == {"articles": 4, "items": 0, "quality": 4, "documents": 0, "snapshots": 0}


def test_resending_the_same_batch_and_walking_again_changes_nothing(make_client, site, engine):
    client = make_client()
    batch = {"articles": [article(site, "/articles/sea-ice"), article(site, "/articles/tidal-power")]}
    assert post(client, batch).get_json()["accepted"] == 2
    with engine.connect() as conn:
        before = conn.execute(sa.text("SELECT id, updated_at FROM knowledge.reference_items ORDER BY id")).all()
    first = counts(engine)
    fetches = len(site.paths())

    again = post(client, batch)
    assert again.status_code == 202
    assert again.get_json() == {"accepted": 0, "duplicates": 2, "rejected": []}
    walk = post(client, b"")
    assert walk.status_code == 202 and walk.get_json() == {"walk": True, "scheduled": 0}

    with engine.connect() as conn:
        after = conn.execute(sa.text("SELECT id, updated_at FROM knowledge.reference_items ORDER BY id")).all()
    assert counts(engine) == first
    assert after == before
    assert len(site.paths()) == fetches  # nothing pending: nothing fetched again


def test_one_url_sent_by_two_workspaces_lands_one_item_backlinked_from_both(make_client, site, engine):
    client = make_client()
    url = site.url + "/articles/solar-cells"
    response = post(client, {"articles": [
        article(site, "/articles/solar-cells", workspace="ws-a"),
        article(site, "/articles/solar-cells", workspace="ws-b", url=url + "/?utm_campaign=x#top"),
    ]})
    assert response.get_json() == {"accepted": 2, "duplicates": 0, "rejected": []}
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT workspace_id, external_url, normalised_url, reference_item_id FROM knowledge.feed_articles"
            " ORDER BY workspace_id")).all()
        columns = {r[0] for r in conn.execute(sa.text(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'knowledge'"
            " AND table_name = 'reference_items'")).all()}
    assert [r.external_url for r in rows] == [url, url + "/?utm_campaign=x#top"]  # kept as given
    assert {r.normalised_url for r in rows} == {url}
    assert {str(r.reference_item_id) for r in rows} == {reference_item_id(url)}
    assert counts(engine)["items"] == 1
    assert not any("workspace" in c for c in columns)  # references are workspace-less by construction


def test_an_article_is_fetched_as_the_poller_spelled_it_and_identified_by_its_normalised_url(
        make_client, site, engine):
    # This server answers only with the trailing slash, which normalisation strips.
    site.pages["/guides/ice-cores/"] = Page(article_html("Reading ice cores", ["Ice cores hold old air bubbles."]))
    client = make_client()
    post(client, {"articles": [article(site, "/x", url=site.url + "/guides/ice-cores/?utm_source=rss",
                                       title="Reading ice cores")]})
    with engine.connect() as conn:
        source_url = conn.execute(sa.text("SELECT source_url FROM knowledge.reference_items")).scalar_one()
    assert source_url == site.url + "/guides/ice-cores"
    assert site.requested("/guides/ice-cores/?utm_source=rss") == 1


def test_a_pdf_article_is_extracted_with_pypdf(make_client, site, engine):
    client = make_client()
    post(client, {"articles": [article(site, "/reports/permafrost.pdf", title="Permafrost thaw report"),
                               article(site, "/reports/octet.pdf", title="The same report, served as bytes")]})
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT r.source_url, r.body, r.extraction_method, r.mime_type, d.kind::text"
            " FROM knowledge.reference_items r JOIN knowledge.documents d ON d.id = r.source_document_id"
            " ORDER BY r.source_url")).all()
    assert len(rows) == 2
    for row in rows:
        assert "Borehole temperatures rose" in row.body
        assert row.extraction_method.startswith("pypdf-")
        assert row.mime_type == "application/pdf"
        assert row.kind == "file"


def test_a_loopback_article_is_refused_without_allowed_networks_and_siblings_are_unaffected(
        make_client, site, engine):
    client = make_client(allow_networks=None)
    response = post(client, {"articles": [article(site, "/articles/sea-ice"),
                                          article(site, "/articles/x", url="http://169.254.169.254/latest/meta-data")]})
    assert response.status_code == 202 and response.get_json()["accepted"] == 2
    assert counts(engine) == {"articles": 2, "items": 0, "quality": 2, "documents": 0, "snapshots": 0}
    assert site.paths() == []  # not even robots.txt was asked for
    with engine.connect() as conn:
        logged = conn.execute(sa.text(
            "SELECT q.flag_type, q.source_url, q.reason, q.feed_article_ids, f.id"
            " FROM knowledge.ingestion_quality_log q"
            " JOIN knowledge.feed_articles f ON f.normalised_url = q.source_url ORDER BY q.source_url")).all()
    assert {r.flag_type for r in logged} == {"ssrf_rejected"}
    assert all("non-public address" in r.reason for r in logged)
    assert all([str(i) for i in r.feed_article_ids] == [str(r.id)] for r in logged)

    # Walking again re-checks (the policy may have changed) but records the same finding once.
    post(client, {})
    assert counts(engine)["quality"] == 2

    # With loopback allowed, the article lands; the metadata address is still refused.
    client = make_client(allow_networks="127.0.0.0/8")
    walk = post(client, {})
    assert walk.get_json() == {"walk": True, "scheduled": 2}
    assert counts(engine)["items"] == 1


def test_an_article_redirecting_to_the_metadata_server_is_refused_as_ssrf(make_client, site, engine):
    def redirect(handler):
        handler.send_response(302)
        handler.send_header("Location", "http://169.254.169.254/computeMetadata/v1/")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    site.pages["/articles/sneaky"] = Page("", handler=redirect)
    client = make_client()
    post(client, {"articles": [article(site, "/articles/sneaky", title="Sneaky"),
                               article(site, "/articles/sea-ice")]})
    with engine.connect() as conn:
        sneaky = conn.execute(sa.text("SELECT reference_item_id FROM knowledge.feed_articles WHERE title = 'Sneaky'"
                                      )).scalar_one_or_none()
        logged = conn.execute(sa.text("SELECT flag_type, reason FROM knowledge.ingestion_quality_log")).all()
    assert sneaky is None  # the fetcher refused the redirect hop before any request to it
    assert [(r.flag_type, "169.254.169.254" in r.reason) for r in logged] == [("ssrf_rejected", True)]
    assert counts(engine)["items"] == 1  # the sibling landed


def test_a_failing_fetch_lands_nothing_for_its_item_and_lands_on_the_next_walk(make_client, site, engine):
    flaky = Flaky(Page(article_html("A flaky article about glaciers", ["Glaciers retreat every summer now."])),
                  failures=1)
    site.pages["/articles/flaky"] = Page("", handler=flaky)
    client = make_client()
    response = post(client, {"articles": [article(site, "/articles/flaky", title="Flaky"),
                                          article(site, "/articles/tidal-power")]})
    assert response.get_json()["accepted"] == 2
    assert counts(engine) == {"articles": 2, "items": 1, "quality": 0, "documents": 1, "snapshots": 1}

    walk = post(client, b"")
    assert walk.get_json() == {"walk": True, "scheduled": 1}
    assert counts(engine) == {"articles": 2, "items": 2, "quality": 0, "documents": 2, "snapshots": 2}
    with engine.connect() as conn:
        pending = conn.execute(sa.text(
            "SELECT count(*) FROM knowledge.feed_articles WHERE reference_item_id IS NULL")).scalar()
    assert pending == 0


def test_a_full_reprocess_refetches_and_versions_changed_content_under_the_same_id(make_client, site, engine):
    client = make_client()
    post(client, {"articles": [article(site, "/articles/tidal-power")]})
    site.pages["/articles/tidal-power"] = Page(article_html("Tidal turbines", ["Six turbines now run offshore."]))
    assert post(client, {"full_reprocess": True}).get_json() == {"walk": True, "scheduled": 1}
    url = site.url + "/articles/tidal-power"
    with engine.connect() as conn:
        body = conn.execute(sa.text("SELECT body FROM knowledge.reference_items WHERE id = :i"),
                            {"i": reference_item_id(url)}).scalar()
        versions = conn.execute(sa.text("SELECT version FROM knowledge.document_snapshots ORDER BY version")).all()
    assert "Six turbines" in body
    assert [v[0] for v in versions] == [1, 2]
    assert counts(engine)["items"] == 1


@pytest.mark.parametrize(("payload", "reason"), [
    (b"{not json", "body is not JSON"),
    (b"\xff\xfe{}", "body is not UTF-8"),
    (b"[]", "body must be a JSON object"),
    ({"articles": {}}, "'articles' must be a list"),
    ({"article": []}, "unknown field 'article'"),
    ({"full_reprocess": "yes"}, "'full_reprocess' must be true or false"),
    ({"articles": [{"title": "t", "workspace_id": "w"}]}, "missing field 'url'"),
    ({"articles": [{"url": "ftp://x.test/a", "title": "t", "workspace_id": "w"}]}, "only http(s)"),
    ({"articles": [{"url": "http://x.test/a", "title": "", "workspace_id": "w"}]}, "'title' must be a non-empty"),
    ({"articles": [{"url": "http://x.test/a", "title": "t", "workspace_id": "w", "published_at": "June 1st"}]},
     "RFC 3339"),
    ({"articles": [{"url": "http://x.test/a", "title": "t", "workspace_id": "w",
                    "published_at": "2026-06-01T08:00:00"}]}, "RFC 3339"),
    ({"articles": [{"url": "http://user:pw@x.test/a", "title": "t", "workspace_id": "w"}]}, "credentials"),
    ({"articles": ["http://x.test/a"]}, "an article must be an object"),
])
def test_a_malformed_request_is_answered_400_with_its_reasons_and_records_nothing(make_client, engine, payload,
                                                                                   reason):
    response = post(make_client(), payload)
    assert response.status_code == 400
    body = response.get_json()
    assert reason in json.dumps(body)
    assert counts(engine)["articles"] == 0


def test_valid_articles_are_kept_when_siblings_are_rejected(make_client, site, engine):
    response = post(make_client(), {"articles": [
        article(site, "/articles/sea-ice"),
        {"url": "not a url", "title": "t", "workspace_id": "w"},
        article(site, "/articles/solar-cells", published_at="yesterday"),
    ]})
    assert response.status_code == 202
    body = response.get_json()
    assert body["accepted"] == 1 and body["duplicates"] == 0
    assert [r["index"] for r in body["rejected"]] == [1, 2]
    assert "RFC 3339" in body["rejected"][1]["reason"]
    assert counts(engine)["articles"] == 1


def test_requests_without_the_right_bearer_are_refused_401(make_client, engine):
    client = make_client()
    assert post(client, {}, headers={}).status_code == 401
    assert post(client, {}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert post(client, {}, headers={"Authorization": SECRET}).status_code == 401  # no scheme
    assert client.get("/refs?q=ice").status_code == 401
    assert counts(engine)["articles"] == 0


def test_an_oversized_body_is_refused_413_and_other_methods_405(make_client, engine):
    client = make_client(GLEANER_WEBHOOK_MAX_BYTES="2048")
    big = json.dumps({"articles": [{"url": f"http://x.test/{i}", "title": "t" * 50, "workspace_id": "w"}
                                   for i in range(100)]})
    assert post(client, big).status_code == 413
    assert client.put("/", data="{}", headers=AUTH).status_code == 405
    assert client.get("/", headers=AUTH).status_code == 405
    assert client.delete("/refs/x", headers=AUTH).status_code == 405
    assert client.get("/nowhere", headers=AUTH).status_code == 404
    assert counts(engine)["articles"] == 0


def test_retrieval_ranks_references_and_returns_one_verbatim(make_client, site, engine):
    client = make_client()
    post(client, {"articles": [article(site, p) for p in ARTICLES] + [
        article(site, "/reports/permafrost.pdf", title="Permafrost thaw report")]})
    response = client.get("/refs?q=sea ice glaciologists", headers=AUTH)
    assert response.status_code == 200
    results = response.get_json()["results"]
    assert results[0]["source_url"] == site.url + "/articles/sea-ice"
    top = results[0]
    # Items the landing just wrote have no vector yet (embedding runs after a crawl or on `gleaner index`).
    assert 0 < top["fulltext_score"] < 1 and top["embedding_score"] in (None, 0.0)
    assert top["published_at"] == "2026-06-01T08:00:00+00:00"
    assert top["source_document_id"] == source_document_id(top["source_url"])
    assert "**" in top["body_preview"]  # matched words are marked

    pdf = client.get("/refs?q=methane", headers=AUTH).get_json()["results"]
    assert [r["source_url"] for r in pdf] == [site.url + "/reports/permafrost.pdf"]

    item = client.get(f"/refs/{top['reference_id']}", headers=AUTH)
    assert item.status_code == 200
    full = item.get_json()
    assert "Glaciologists attribute the loss" in full["body"]
    assert [a["workspace_id"] for a in full["articles"]] == ["ws-1"]
    assert client.get("/refs/" + reference_item_id("http://nowhere.test/"), headers=AUTH).status_code == 404
    assert client.get("/refs/not-a-uuid", headers=AUTH).status_code == 400
    assert client.get("/refs", headers=AUTH).status_code == 400


def test_the_articles_accepted_event_target_lands_rows_once_however_often_delivered(make_client, site, engine):
    """Deployed, the webhook publishes to Pub/Sub; ingest's on_event (articles-accepted push) lands the rows."""
    import base64

    from gleaner.messages import ArticlesAccepted, encode
    from gleaner.serving.webhook import parse_article
    from gleaner.store.feeds.references import ReferenceStore

    make_client()  # sets the function's environment
    row = parse_article(article(site, "/articles/solar-cells"))
    (row_id,) = ReferenceStore(engine).record_articles([row])
    events = functions_framework.create_app(target="on_event",
                                            source=str(ROOT / "functions/ingest/main.py")).test_client()
    push = {"subscription": "projects/p/subscriptions/articles",
            "message": {"data": base64.b64encode(encode(ArticlesAccepted(article_ids=(row_id,)))).decode(),
                        "messageId": "1", "attributes": {}}}
    assert events.post("/", json=push).status_code == 200
    assert events.post("/", json=push).status_code == 200  # at-least-once: a second delivery
    assert counts(engine) == {"articles": 1, "items": 1, "quality": 0, "documents": 1, "snapshots": 1}
    assert site.requested("/articles/solar-cells") == 1
