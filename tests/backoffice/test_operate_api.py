"""Operating over HTTP: POST /v1/sites creates or replaces a site, POST /v1/sites/{site}/runs crawls it now,
GET /v1/runs filters by status; pages say what an action did, and what could not be done and why."""

from __future__ import annotations

import time

import pytest

from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.runtime.runner import CrawlFailed, crawl, new_request
from tests.backoffice.conftest import SITE, Kept, call


def test_a_site_is_created_then_replaced_and_its_crawl_starts_now(kept: Kept):
    app = BackofficeApp(kept.deps)
    body = {"url": kept.site.url + "/", "site_domain": "api.test", "every": "1d", "exclude": ["/private/*"],
            "delay": 0, "concurrency": 2}
    created = call(app, "POST", "/v1/sites", json_body=body)
    assert created.status == 201, created.body
    assert (created.json()["every"], created.json()["exclude"], created.json()["delay"]) == ("1d", ["/private/*"], 0)
    assert created.json()["render"] == "never"
    replaced = call(app, "POST", "/v1/sites", json_body={**body, "every": "6h", "delay": None, "render": "auto"})
    assert replaced.status == 200 and replaced.json()["every"] == "6h" and replaced.json()["delay"] is None
    assert replaced.json()["render"] == "auto"

    started = call(app, "POST", "/v1/sites/api.test/runs")
    assert started.status == 202
    run_id = started.json()["run_id"]
    deadline = time.monotonic() + 60
    while call(app, "GET", f"/v1/runs/{run_id}").json()["status"] not in ("finished", "partial", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    run = call(app, "GET", f"/v1/runs/{run_id}").json()
    assert (run["site_domain"], run["status"]) == ("api.test", "finished")
    finished = call(app, "GET", "/v1/runs", query={"status": "finished", "site": "api.test"}).json()
    assert [r["run_id"] for r in finished["runs"]] == [run_id]
    assert call(app, "GET", "/v1/runs", query={"status": "exploded"}).status == 400


def test_wrong_site_fields_are_each_named_and_nothing_is_saved(kept: Kept):
    app = BackofficeApp(kept.deps)
    answer = call(app, "POST", "/v1/sites", json_body={"url": "", "include": ["blog/*"], "every": "5",
                                                       "limit": "ten", "render": "sometimes"})
    assert answer.status == 400
    error = answer.json()["error"]
    for field in ("url:", "include:", "every:", "limit:", "render:"):
        assert field in error
    assert call(app, "POST", "/v1/sites/nosuch.test/runs").status == 404
    assert [s for s in call(app, "GET", "/v1/sites").json()["sites"] if s["schedule"]] == []


def test_a_crawl_of_a_mistyped_host_leaves_no_site_behind(kept: Kept):
    app = BackofficeApp(kept.deps)
    with pytest.raises(CrawlFailed, match="cannot resolve"):
        crawl(kept.deps, new_request("http://nosuch-host.invalid/", site_domain="typo.test"))
    assert [s["site_domain"] for s in call(app, "GET", "/v1/sites").json()["sites"]] == [SITE]
    failed = call(app, "GET", "/v1/runs", query={"status": "failed"}).json()["runs"]
    assert [r["site_domain"] for r in failed] == ["typo.test"]  # the run itself is kept in the runs index


def test_pages_say_what_an_action_did_and_why_one_was_refused(kept: Kept):
    app = BackofficeApp(kept.deps)
    resumed = call(app, "POST", f"/ui/runs/{kept.first['run_id']}/resume", form=b"")
    assert resumed.status == 409
    page = resumed.body.decode()
    assert "Not resumed:" in page and f"Run {kept.first['run_id'][:8]}" in page
    cancelled = call(app, "POST", f"/ui/runs/{kept.second['run_id']}/cancel", form=b"")
    assert cancelled.status == 409 and "Not cancelled:" in cancelled.body.decode()
    notice = call(app, "GET", f"/ui/runs/{kept.first['run_id']}", query={"done": "resumed"}).body.decode()
    assert "Run resumed" in notice
    forged = call(app, "GET", "/ui/runs", query={"done": "<script>alert(1)</script>"}).body.decode()
    assert "alert(1)" not in forged  # only fixed messages are shown


def test_the_search_box_shows_the_best_passages_of_the_copy(kept: Kept):
    from gleaner.retrieval.index import embed_pending

    embed_pending(kept.deps.search_index, kept.deps.embedder)
    app = BackofficeApp(kept.deps)
    page = call(app, "GET", "/ui/search", query={"q": "how do I install gleaner"}).body.decode()
    assert "not available" not in page and 'class="hit"' in page and "/ui/documents/" in page
    empty = call(app, "GET", "/ui/search", query={"q": "install", "site": "nosuch.test"}).body.decode()
    assert "no site nosuch.test" in empty and 'class="hit"' not in empty  # said on the page, not a bare 404
