"""Run events: a run's end (finished, partial, failed) on the change feed and to the subscribers who ask.

A real crawl of the loopback demo site and a signed-webhook receiver on 127.0.0.1 (the one the
notification tests use); the feed is read back through the real ``gleaner changes`` command.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from gleaner.demosite.demo import demo_pages
from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request
from tests.integration.test_notifications import env, gleaner, receiver, subscribe  # noqa: F401  (fixtures)

SITE = "runs.test"


def run_events(deps: Any) -> list[tuple[str, str]]:
    with deps.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT type::text, run_id::text FROM knowledge.document_events"
                                    " WHERE type::text LIKE 'run.%' ORDER BY seq")).all()
    return [(r[0], r[1]) for r in rows]


def test_a_finished_run_is_one_event_with_its_summary_sent_only_to_those_who_name_it(
        make_deps, env, receiver):  # noqa: F811  (pytest fixtures imported above)
    deps = make_deps(notify_retry_seconds=0.1, notify_run_wait=10.0)
    subscribe(env, receiver.url, "--types", "run.finished,run.failed")
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        # A subscription names a site Gleaner knows: registered here before its first crawl.
        assert gleaner(env, "sites", "add", site.url + "/", "--site-domain", SITE).exit_code == 0
        everything, _ = subscribe(env, receiver.url, "--site", SITE)  # no types: document events only
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    assert summary["status"] == "finished"

    runs = [r["body"] for r in receiver.received if r["body"]["type"].startswith("run.")]
    assert len(runs) == 1, "the run event goes to the subscription that names it, once"
    event = runs[0]["data"]
    assert event["type"] == "run.finished" and event["status"] == "finished"
    assert (event["run_id"], event["site_domain"]) == (summary["run_id"], SITE)
    for key in ("discovered", "included", "fetched", "failed", "refused"):
        assert event["summary"][key] == summary[key], key
    assert event["summary"]["snapshots"] == summary["snapshots"]

    listed = json.loads(gleaner(env, "changes", SITE, "--json").stdout)
    assert [e["run_id"] for e in listed if e["type"] == "run.finished"] == [summary["run_id"]]
    text = gleaner(env, "changes", SITE).stdout
    assert f"run {summary['run_id']} of {SITE}" in text

    # The subscription without types got the run's document events but not the run event (runs == 1 above).
    assert any(r["body"]["type"] == "document.new" for r in receiver.received)
    assert everything


def test_settling_a_run_again_records_no_second_event(make_deps):
    deps = make_deps()
    pages: dict[str, Page] = {}
    with TestSite(pages, max_seconds=120) as site:
        pages.update(demo_pages(site.url))
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    run_id = summary["run_id"]
    assert run_events(deps) == [("run.finished", run_id)]
    # A redelivered last batch settles the same run again: same (run, status), nothing new.
    with deps.engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge.crawl_runs SET status = 'scraping', finished_at = NULL"
                             " WHERE id = :r"), {"r": run_id})
    assert deps.metadata.try_finish_run(run_id) == "finished"
    assert run_events(deps) == [("run.finished", run_id)]


def test_a_run_that_fails_is_a_run_failed_event(make_deps):
    deps = make_deps()
    try:
        summary = crawl(deps, new_request("http://127.0.0.1:9/", site_domain=SITE))
        run_id = summary["run_id"]
    except Exception:  # the runner may raise for a start page that cannot be reached; the run still settles
        with deps.engine.connect() as conn:
            run_id = conn.execute(sa.text("SELECT id::text FROM knowledge.crawl_runs")).scalar()
    with deps.engine.connect() as conn:
        status = conn.execute(sa.text("SELECT status::text FROM knowledge.crawl_runs WHERE id = :r"),
                              {"r": run_id}).scalar()
    assert status == "failed"
    assert run_events(deps) == [("run.failed", run_id)]
