"""The back office's JSON API under /v1/, over `gleaner serve`, on a site crawled twice."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.changes import subscriptions
from gleaner.operator.sites import add_site
from tests.backoffice.conftest import CHANGED, SITE, Kept, call


def test_sites_lists_the_crawled_site_with_its_counts_and_latest_run(kept: Kept):
    answer = kept.get("/v1/sites")
    assert answer.status_code == 200
    (site,) = answer.json()["sites"]
    assert site["site_domain"] == SITE
    active = kept.get(f"/v1/sites/{SITE}/documents", status="active").json()["total"]
    assert site["active"] == active == kept.first["snapshots"]["new"]
    assert site["last_run"]["run_id"] == kept.second["run_id"]


def test_runs_are_newest_first_with_counters_and_each_run_lists_its_urls_with_reasons(kept: Kept):
    runs = kept.get("/v1/runs", site=SITE).json()
    assert [r["run_id"] for r in runs["runs"]] == [kept.second["run_id"], kept.first["run_id"]]
    assert runs["total"] == 2
    run = kept.get(f"/v1/runs/{kept.first['run_id']}").json()
    assert run["status"] == "finished" and run["fetched"] == kept.first["fetched"]
    assert run["outcomes"]["fetched"] == kept.first["fetched"]
    denied = kept.get(f"/v1/runs/{kept.first['run_id']}/urls", status="robots-denied").json()
    assert [u["url"] for u in denied["urls"]] == [kept.site.url + "/private/roadmap"]
    assert denied["urls"][0]["reason"]
    page = kept.get(f"/v1/runs/{kept.first['run_id']}/urls", limit=2, offset=1).json()
    assert len(page["urls"]) == 2 and page["total"] > 3


def test_the_tree_reads_one_level_at_a_time_with_folders_synthesised_from_paths(kept: Kept):
    root = kept.get(f"/v1/sites/{SITE}/tree").json()
    folders = {f["name"]: f for f in root["folders"]}
    assert {"docs/", "blog/"} <= set(folders)
    assert folders["docs/"]["documents"] == 5 and folders["docs/"]["statuses"] == {"active": 5}
    assert {d["path"] for d in root["documents"]} >= {"/", "/about", "/blog"}
    assert all(d["path"].count("/") == 1 for d in root["documents"])
    docs = kept.get(f"/v1/sites/{SITE}/tree", prefix="/docs/").json()
    assert docs["folders"] == []
    install = next(d for d in docs["documents"] if d["path"] == CHANGED)
    assert install["versions"] == 2 and install["status"] == "active" and install["scrape_policy"] == "scrape"
    blog = kept.get(f"/v1/sites/{SITE}/tree", prefix="/blog").json()
    assert [f["name"] for f in blog["folders"]] == ["2025/", "2026/"]


def test_documents_filter_by_status_and_paginate(kept: Kept):
    everything = kept.get(f"/v1/sites/{SITE}/documents", limit=1000).json()
    active = kept.get(f"/v1/sites/{SITE}/documents", status="active", limit=1000).json()
    assert 0 < active["total"] < everything["total"]
    assert {d["status"] for d in active["documents"]} == {"active"}
    page = kept.get(f"/v1/sites/{SITE}/documents", limit=3, offset=3).json()
    assert [d["path"] for d in page["documents"]] == [d["path"] for d in everything["documents"][3:6]]
    under = kept.get(f"/v1/sites/{SITE}/documents", prefix="/blog/2026/").json()
    assert under["total"] == 3


def test_a_document_shows_its_fetch_facts_and_versions_with_the_run_of_each(kept: Kept):
    doc_id = kept.document_id(CHANGED)
    answer = kept.get(f"/v1/documents/{doc_id}").json()
    doc = answer["document"]
    assert doc["url"] == kept.site.url + CHANGED and doc["http_status"] == 200 and doc["etag"]
    assert doc["byte_size"] > 0 and doc["version"] == 2
    assert [(v["version"], v["run_id"], v["current"]) for v in answer["versions"]] == [
        (2, kept.second["run_id"], True), (1, kept.first["run_id"], False)]


def test_versions_read_back_as_content_or_raw_markdown(kept: Kept):
    doc_id = kept.document_id(CHANGED)
    content = kept.get(f"/v1/documents/{doc_id}/versions/1").json()
    raw = kept.get(f"/v1/documents/{doc_id}/versions/1", raw=1).json()
    assert content["body"] and raw["body"] and raw["raw"] is True
    assert len(raw["body"]) > len(content["body"])  # raw.md keeps the navigation content.md drops


def test_the_diff_defaults_to_previous_against_current_and_aligns_changed_lines(kept: Kept):
    doc_id = kept.document_id(CHANGED)
    diff = kept.get(f"/v1/documents/{doc_id}/diff").json()
    assert (diff["from"], diff["to"]) == (1, 2) and diff["added"] > 0 and diff["removed"] > 0
    assert diff["diff"].startswith("---")
    changed = [r for r in diff["rows"] if r["kind"] != "same"]
    assert changed and all(r["old"] != r["new"] for r in changed)
    same = kept.get(f"/v1/documents/{doc_id}/diff", **{"from": 2, "to": 2}).json()
    assert same["added"] == same["removed"] == 0


def test_change_events_list_the_new_documents_then_the_one_change(kept: Kept):
    events = kept.get("/v1/changes", site=SITE, limit=1000).json()["events"]
    changed = [e for e in events if e["type"] == "document.changed"]
    assert [e["url"] for e in changed] == [kept.site.url + CHANGED]
    assert changed[0]["previous_version"] == 1 and changed[0]["version"] == 2
    assert sum(e["type"] == "document.new" for e in events) == kept.first["snapshots"]["new"]


def test_subscriptions_hide_their_secret_and_a_failed_delivery_can_be_retried(kept: Kept):
    sub = subscriptions.add(kept.deps.metadata, "http://127.0.0.1:9/hook", site=None, types=(),
                            allow=kept.deps.settings.allow_networks)
    listed = kept.get("/v1/notify/subscriptions").json()["subscriptions"]
    assert [s["id"] for s in listed] == [sub.id] and "secret" not in listed[0]
    kept.recrawl("/about")  # one document.changed event, delivered to a port nothing listens on
    (failed,) = kept.get("/v1/notify/deliveries", subscription=sub.id).json()["deliveries"]
    assert failed["state"] == "failed" and failed["type"] == "document.changed" and len(failed["log"]) == 1
    retried = httpx.post(f"{kept.url}/v1/notify/deliveries/{failed['id']}/retry", json={}, timeout=30)
    assert retried.status_code == 200 and retried.json()["result"] == "failed"
    (after,) = kept.get("/v1/notify/deliveries", subscription=sub.id).json()["deliveries"]
    assert after["attempts"] == 2 and len(after["log"]) == 2


@pytest.mark.parametrize(("path", "params"), [
    ("/v1/runs", {"limit": "0"}),
    ("/v1/runs", {"limit": "many"}),
    ("/v1/runs", {"offset": "-1"}),
    ("/v1/runs", {"site": "not a site"}),
    ("/v1/sites/demo.test/documents", {"status": "gone"}),
    ("/v1/sites/demo.test/documents", {"policy": "maybe"}),
    ("/v1/sites/demo.test/tree", {"prefix": "docs"}),
    ("/v1/changes", {"since": "yesterday"}),
])
def test_bad_query_values_are_a_400_that_says_what_is_wrong(kept: Kept, path: str, params: dict[str, str]):
    answer = kept.get(path, **params)
    assert answer.status_code == 400
    assert next(iter(params)) in answer.json()["error"]


def test_bad_document_inputs_are_400_and_unknown_objects_404(kept: Kept):
    doc_id = kept.document_id(CHANGED)
    assert kept.get(f"/v1/documents/{doc_id}/versions/x").status_code == 400
    assert kept.get(f"/v1/documents/{doc_id}/diff", **{"from": "0"}).status_code == 400
    assert kept.get(f"/v1/documents/{doc_id}/versions/1", raw="yes").status_code == 400
    assert kept.get(f"/v1/documents/{doc_id}/versions/9").status_code == 404
    assert kept.get("/v1/documents/00000000-0000-0000-0000-000000000000").status_code == 404
    assert kept.get("/v1/documents/not-a-uuid").status_code == 404
    assert kept.get("/v1/runs/00000000-0000-0000-0000-000000000000").status_code == 404
    assert kept.get("/v1/sites/other.test/tree").status_code == 404
    assert kept.get("/v1/nothing").status_code == 404
    assert httpx.delete(kept.url + "/v1/sites", timeout=10).status_code == 405


def test_commands_from_another_origin_or_not_json_are_refused(kept: Kept):
    target = f"{kept.url}/v1/notify/deliveries/00000000-0000-0000-0000-000000000000/retry"
    assert httpx.post(target, json={}, headers={"Origin": "http://evil.example"}).status_code == 403
    assert httpx.post(target, json={}, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert httpx.post(target, data={"a": "b"}).status_code == 403
    assert httpx.post(target, json={}).status_code == 404


def test_behind_a_bearer_every_api_route_needs_it(kept: Kept):
    app = BackofficeApp(kept.deps, bearer="cloud-token")
    for path in ("/v1/sites", f"/v1/runs/{kept.first['run_id']}", f"/v1/sites/{SITE}/tree"):
        assert call(app, "GET", path).status == 401
        assert call(app, "GET", path, token="wrong").status == 401
        assert call(app, "GET", path, authorization="Basic cloud-token").status == 401
        assert call(app, "GET", path, token="cloud-token").status == 200


def test_behind_a_bearer_pages_send_the_browser_to_log_in_and_then_carry_a_session_cookie(kept: Kept):
    app = BackofficeApp(kept.deps, bearer="cloud-token")
    sent = call(app, "GET", f"/ui/sites/{SITE}")
    assert (sent.status, sent.headers["Location"]) == (303, "/ui/login")
    assert call(app, "POST", "/ui/login", form=b"token=guess").status == 401
    logged_in = call(app, "POST", "/ui/login", form=b"token=cloud-token")
    assert logged_in.status == 303
    cookie = logged_in.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "cloud-token" not in cookie
    session = cookie.split(";", 1)[0]
    assert call(app, "GET", f"/ui/sites/{SITE}", cookie=session).status == 200
    assert call(app, "GET", "/v1/sites", cookie=session).status == 200
    assert call(app, "GET", f"/ui/sites/{SITE}", cookie=session.replace("=", "=0")).status == 303


def test_rules_are_added_listed_and_removed_and_apply_to_the_tree_at_once(kept: Kept):
    rules_url = f"{kept.url}/v1/sites/{SITE}/rules"
    added = httpx.post(rules_url, json={"glob": "/docs/*", "action": "block", "reason": "drafts"}, timeout=30)
    assert added.status_code == 200 and added.json()["applied"]["blocked"] == 5
    rule = added.json()["rule"]
    assert [r["id"] for r in kept.get(f"/v1/sites/{SITE}/rules").json()["rules"]] == [rule["id"]]
    docs = kept.get(f"/v1/sites/{SITE}/tree", prefix="/docs/").json()["documents"]
    assert {d["status"] for d in docs} == {"blocked"}
    removed = httpx.delete(f"{rules_url}/{rule['id']}", timeout=30)
    assert removed.status_code == 200 and removed.json()["applied"]["unblocked"] == 5
    assert kept.get(f"/v1/sites/{SITE}/rules").json()["rules"] == []
    assert httpx.delete(f"{rules_url}/{rule['id']}", timeout=30).status_code == 404


@pytest.mark.parametrize("body", [
    {"glob": "docs", "action": "skip"},
    {"glob": "/docs/*", "action": "hide"},
    {"action": "skip"},
    ["/docs/*"],
])
def test_a_malformed_rule_is_a_400(kept: Kept, body: Any):
    answer = httpx.post(f"{kept.url}/v1/sites/{SITE}/rules", json=body, timeout=30)
    assert answer.status_code == 400 and answer.json()["error"]


def test_the_review_queue_lists_and_takes_decisions(kept: Kept):
    queue = kept.get(f"/v1/sites/{SITE}/review").json()
    # Nothing needs review; the pages the run excluded are listed, each with its reason, to be kept.
    assert queue["site_domain"] == SITE and all(i["decision"] == "exclude" and i["reason"] for i in queue["items"])
    assert "/about" not in {i["path"] for i in queue["items"]}
    review_url = f"{kept.url}/v1/sites/{SITE}/review"
    decided = httpx.post(review_url, json={"url": kept.site.url + "/about", "decision": "exclude"}, timeout=30)
    assert decided.status_code == 200 and decided.json()["decided"]["decision"] == "exclude"
    root = kept.get(f"/v1/sites/{SITE}/tree").json()["documents"]
    about = next(d for d in root if d["path"] == "/about")
    assert about["scrape_policy"] == "skip"
    assert httpx.post(review_url, json={"url": kept.site.url + "/about", "decision": "maybe"}).status_code == 400
    assert httpx.post(review_url, json={"url": "http://elsewhere.test/x", "decision": "include"}).status_code == 400


def test_a_duplicate_opens_a_conflict_that_can_be_acknowledged_then_resolved(kept: Kept):
    kept.recrawl(copies={"/pricing": "/about"})
    (conflict,) = kept.get(f"/v1/sites/{SITE}/conflicts").json()["conflicts"]
    assert conflict["status"] == "open" and conflict["conflict_type"] == "duplicate"
    assert {conflict["a"]["url"], conflict["b"]["url"]} == {kept.site.url + "/about", kept.site.url + "/pricing"}
    target = f"{kept.url}/v1/sites/{SITE}/conflicts/{conflict['id']}"
    for status in ("acknowledged", "resolved"):
        assert httpx.post(target, json={"status": status}, timeout=30).json()["status"] == status
    assert kept.get(f"/v1/sites/{SITE}/conflicts", status="open").json()["conflicts"] == []
    assert kept.get(f"/v1/sites/{SITE}/conflicts", status="resolved").json()["conflicts"][0]["id"] == conflict["id"]
    assert httpx.post(target, json={"status": "open"}, timeout=30).status_code == 400
    assert httpx.post(target, json={"status": "fixed"}, timeout=30).status_code == 400
    assert kept.get(f"/v1/sites/{SITE}/conflicts", status="closed").status_code == 400
    unknown = f"{kept.url}/v1/sites/{SITE}/conflicts/00000000-0000-0000-0000-000000000000"
    assert httpx.post(unknown, json={"status": "resolved"}, timeout=30).status_code == 404


def test_a_site_registered_for_scheduled_crawls_is_listed_with_its_schedule_before_its_first_run(kept: Kept):
    add_site(kept.deps, "http://127.0.0.1:9/", site_domain="later.test", every="6h")
    sites = {s["site_domain"]: s for s in kept.get("/v1/sites").json()["sites"]}
    assert sites["later.test"]["schedule"]["every"] == "6h" and sites["later.test"]["documents"] == 0
    assert sites[SITE]["schedule"] is None
    assert kept.get("/v1/sites/later.test/tree").json()["total_documents"] == 0
    assert "every 6h" in kept.get("/ui/").text


def test_a_document_lists_the_citations_that_pin_it(kept: Kept):
    url = kept.site.url + CHANGED
    body = kept.get(f"/v1/documents/{kept.document_id(CHANGED)}/versions/2").json()["body"]
    quote = " ".join(body.split("\n\n")[1].split()[:6])
    cited = kept.deps.provenance.cite(kept.deps.provenance.document_at(url, SITE), quote)
    answer = kept.get(f"/v1/documents/{kept.document_id(CHANGED)}").json()
    assert [(c["citation_id"], c["version"], c["quote"]) for c in answer["citations"]] == [
        (cited.citation_id, 2, cited.quote)]
    assert cited.quote in kept.get(f"/ui/documents/{kept.document_id(CHANGED)}").text


def test_an_erased_document_reads_as_erased_in_the_api_and_the_pages_without_its_url(kept: Kept):
    from gleaner.store.documents.erasure import erase_document

    doc_id = kept.document_id(CHANGED)
    erase_document(kept.deps.provenance, kept.deps.blobs, kept.deps.blocklist, doc_id, "request", "tester")
    doc = kept.get(f"/v1/documents/{doc_id}").json()["document"]
    assert doc["status"] == "erased" and doc["url"].startswith("erased:") and CHANGED not in doc["url"]
    page = kept.get(f"/ui/documents/{doc_id}")
    assert page.status_code == 200 and "erased" in page.text and CHANGED not in page.text
    listing = kept.get(f"/v1/sites/{SITE}/documents", status="erased").json()
    assert [d["id"] for d in listing["documents"]] == [doc_id]
