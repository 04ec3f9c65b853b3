"""Rescrape one page, move a composite through its lifecycle, disable and enable a subscription: from
the back office in a real headless Chromium.

Screenshots go into each test's pytest temp dir (looked at by hand: no raw Python value, no bare error
page, no unexplained empty section). Every click that navigates is followed by a wait for the page it
leads to, never assumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from gleaner.changes import subscriptions
from gleaner.cli.operating import drain_local
from gleaner.demosite.demo import article
from gleaner.demosite.testsite import Page
from gleaner.operator.routing import create_composite
from gleaner.operator.rules import add_rule
from tests.backoffice.conftest import CHANGED, SITE, Kept
from tests.backoffice.test_browser import browser as browser  # the fixture
from tests.backoffice.test_browser import click_and_wait, shot, wait_for, wait_for_run_status
from tests.backoffice.test_browser_operating import REPR, visible_text


def test_a_page_is_rescraped_from_its_page_as_a_run_of_that_one_url(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    doc_id = kept.document_id(CHANGED)
    # The page changes on the site: the rescrape keeps a third version, and asks for nothing else.
    kept.site.pages[CHANGED] = Page(article("Install", "install:third"))
    browser.get(f"{kept.url}/ui/documents/{doc_id}")
    wait_for(browser, "button.rescrape")
    shot(browser, tmp_path, "document-with-rescrape")
    click_and_wait(browser, "button.rescrape", "done=rescrape-started")
    assert "Rescrape started" in wait_for(browser, "p.notice").text
    try:
        wait_for_run_status(browser, "finished", timeout=120)
    finally:
        shot(browser, tmp_path, "rescraped")
    run_id = browser.current_url.split("/ui/runs/")[1].split("?")[0]
    urls = kept.deps.browse.run_urls_page(run_id, None, 10, 0)[0]
    assert [(u["url"], u["status"]) for u in urls] == [(kept.site.url + CHANGED, "fetched")]
    run = kept.deps.metadata.run_summary(run_id)
    assert run is not None and (run["discovered"], run["snapshots"]["changed"]) == (1, 1)
    assert sorted(v["version"] for v in kept.deps.metadata.snapshots_of(doc_id)) == [1, 2, 3]
    text = visible_text(browser)
    assert kept.site.url + CHANGED in text and not REPR.search(text), REPR.search(text)

    # A skipped page offers no rescrape (gate 1: never fetched), and the API refuses it with the reason.
    add_rule(kept.deps, SITE, "/docs/api", "skip", "noise")
    skipped = kept.document_id("/docs/api")
    browser.get(f"{kept.url}/ui/documents/{skipped}")
    wait_for(browser, "h1")
    assert not browser.find_elements(By.CSS_SELECTOR, "button.rescrape")
    answer = httpx.post(f"{kept.url}/v1/documents/{skipped}/rescrape", json={}, timeout=30)
    assert answer.status_code == 409 and "skipped" in answer.json()["error"]


def test_a_composite_is_validated_and_promoted_and_a_subscription_disabled_from_the_back_office(
        kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    browser.get(f"{kept.url}/ui/sites/{SITE}/composites")
    assert "No composites in demo.test" in wait_for(browser, "p.empty").text
    shot(browser, tmp_path, "composites-empty")
    made = create_composite(kept.deps, SITE, "Getting started", [kept.site.url + CHANGED, kept.site.url + "/docs/api"],
                            kind="feature_map", actor="cli:tester")
    drain_local(kept.deps)

    browser.get(f"{kept.url}/ui/sites/{SITE}")
    click_and_wait(browser, "a[href$='/composites']", "/composites")
    wait_for(browser, "section.composite")
    shot(browser, tmp_path, "composite-generated")
    click_and_wait(browser, "button.move-in_validation", "done=composite-moved")
    assert "Composite moved" in wait_for(browser, "p.notice").text
    browser.find_element(By.NAME, "note").send_keys("steps checked against the site")
    click_and_wait(browser, "button.move-validated", "done=composite-moved")
    wait_for(browser, "button.move-staged")
    text = visible_text(browser)
    assert "by operator" in text and "steps checked against the site" in text
    click_and_wait(browser, "button.move-staged", "done=composite-moved")
    wait_for(browser, "button.move-prod")
    click_and_wait(browser, "button.move-prod", "done=composite-moved")
    wait_for(browser, "button.move-stale")
    shot(browser, tmp_path, "composite-in-production")
    text = visible_text(browser)
    assert "in production" in text and not REPR.search(text), REPR.search(text)
    history = [(t.from_status, t.to_status, t.actor) for t in kept.deps.metadata.composite_history(made.id)]
    assert history == [(None, "generated", "cli:tester"), ("generated", "in_validation", "operator"),
                       ("in_validation", "validated", "operator"), ("validated", "staged", "operator"),
                       ("staged", "prod", "operator")]

    sub = subscriptions.add(kept.deps.metadata, kept.site.url + "/hook", site=SITE, types=(),
                            allow=kept.deps.settings.allow_networks)
    browser.get(f"{kept.url}/ui/changes")
    wait_for(browser, f"tr[data-id='{sub.id}'] button.disable")
    click_and_wait(browser, f"tr[data-id='{sub.id}'] button.disable", "done=subscription-disabled")
    assert "Subscription disabled" in wait_for(browser, "p.notice").text
    assert wait_for(browser, f"tr[data-id='{sub.id}'] .st-disabled").text == "disabled"
    shot(browser, tmp_path, "subscription-disabled")
    assert [s.status for s in kept.deps.metadata.listed_subscriptions() if s.id == sub.id] == ["disabled"]
    click_and_wait(browser, f"tr[data-id='{sub.id}'] button.enable", "done=subscription-enabled")
    assert wait_for(browser, f"tr[data-id='{sub.id}'] .st-active").text == "active"
    assert not REPR.search(visible_text(browser)), REPR.search(visible_text(browser))


def test_a_run_is_replayed_from_stored_snapshots_from_its_page(kept: Kept, browser: Any, tmp_path: Path):
    asked = len(kept.site.log)
    browser.get(f"{kept.url}/ui/runs/{kept.second['run_id']}")
    wait_for(browser, "button.replay")
    click_and_wait(browser, "button.replay", "done=replay-started")
    assert "Replay started" in wait_for(browser, "p.notice").text
    try:
        wait_for_run_status(browser, "finished", timeout=120)
    finally:
        shot(browser, tmp_path, "replayed")
    text = visible_text(browser)
    assert "A replay of run " + kept.second["run_id"][:8] in text and "Every page it fetched was replayed" in text
    assert not REPR.search(text), REPR.search(text)
    assert len(kept.site.log) == asked  # nothing was fetched
    run_id = browser.current_url.split("/ui/runs/")[1].split("?")[0]
    run = kept.deps.metadata.run_summary(run_id)
    assert run is not None and run["snapshots"]["new"] + run["snapshots"]["changed"] == 0
    assert run["fetched"] == kept.second["fetched"] + kept.second["not_modified"]
