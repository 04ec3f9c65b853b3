"""What only the CLI did, now from the back office in a real headless Chromium (issue 44): add, test
and delete a subscription (the address policy's answer shown); a composite from ticked pages; erase a
page after a confirmation; create and revoke a token (shown once). Screenshots print their paths.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.backoffice.conftest import CHANGED, SITE, Kept
from tests.backoffice.test_browser import browser as browser  # the fixture
from tests.backoffice.test_browser import click_and_wait, click_to_new_page, shot, wait_for
from tests.backoffice.test_browser_operating import REPR, visible_text


def test_a_subscription_is_added_refused_tested_and_deleted(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    browser.get(kept.url + "/ui/changes")
    browser.find_element(By.NAME, "url").send_keys("http://169.254.169.254/hook")
    click_to_new_page(browser, browser.find_element(By.CSS_SELECTOR, "button.subscribe"))
    refused = wait_for(browser, "p.refused").text
    assert refused.startswith("Not added: refused webhook target") and "169.254.169.254" in refused
    assert browser.find_element(By.NAME, "url").get_attribute("value") == "http://169.254.169.254/hook"
    shot(browser, tmp_path, "subscription-refused")
    url = browser.find_element(By.NAME, "url")
    url.clear()
    url.send_keys("http://127.0.0.1:9/hook")
    browser.find_element(By.NAME, "site").send_keys(SITE)
    click_to_new_page(browser, browser.find_element(By.CSS_SELECTOR, "button.subscribe"))
    assert wait_for(browser, "code.secret").text.startswith("whsec_")
    shot(browser, tmp_path, "subscription-added")
    sub = kept.deps.metadata.listed_subscriptions()[0]
    assert (sub.url, sub.site_domain) == ("http://127.0.0.1:9/hook", SITE)
    click_to_new_page(browser, browser.find_element(By.CSS_SELECTOR, f"tr[data-id='{sub.id}'] button.test"))
    said = wait_for(browser, "p.refused").text
    assert said.startswith("Test message not delivered: the host refused the connection"), said
    shot(browser, tmp_path, "subscription-tested")
    browser.find_element(By.CSS_SELECTOR, f"tr[data-id='{sub.id}'] button.delete").click()
    browser.switch_to.alert.accept()
    assert "Subscription deleted" in wait_for(browser, "p.notice").text
    assert kept.deps.metadata.listed_subscriptions() == []
    assert not REPR.search(visible_text(browser)), REPR.search(visible_text(browser))


def test_a_composite_is_made_of_ticked_pages_and_a_page_is_erased_after_confirming(kept: Kept, browser: Any,
                                                                                    tmp_path: Path):
    from selenium.webdriver.common.by import By

    browser.get(f"{kept.url}/ui/sites/{SITE}/documents")
    for path in (CHANGED, "/docs/api"):
        browser.find_element(By.CSS_SELECTOR, f"input.pick[data-url='{kept.site.url + path}']").click()
    browser.find_element(By.NAME, "title").send_keys("Getting started")
    shot(browser, tmp_path, "composite-picked")
    click_and_wait(browser, "button.compose", "done=composite-created")
    section = wait_for(browser, "section.composite").text
    assert "Getting started" in section and kept.site.url + CHANGED in section and "generated" in section
    shot(browser, tmp_path, "composite-created")

    about = kept.document_id("/about")
    browser.get(f"{kept.url}/ui/documents/{about}")
    click_and_wait(browser, "a.erase", "/erase")
    what = wait_for(browser, "ul.erase-what").text
    assert kept.site.url + "/about" in what and "1 stored version" in what
    shot(browser, tmp_path, "erase-confirm")
    browser.find_element(By.NAME, "reason").send_keys("takedown request")
    click_to_new_page(browser, browser.find_element(By.CSS_SELECTOR, "button.erase-confirm"))
    assert "Type the page's address exactly" in wait_for(browser, "p.refused").text  # not confirmed: kept
    browser.find_element(By.NAME, "confirm").send_keys(kept.site.url + "/about")
    click_and_wait(browser, "button.erase-confirm", "done=erased")
    erased = wait_for(browser, "p.erased").text
    assert erased.startswith("Erased on") and "takedown request" in erased
    assert "by operator in the back office" in erased
    text = visible_text(browser)
    assert not re.search(r"erased:[0-9a-f]", text) and "bytes" not in text and not REPR.search(text)
    shot(browser, tmp_path, "erased")


def test_a_site_token_is_shown_once_and_revoked(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    browser.get(kept.url + "/ui/")
    click_and_wait(browser, "header a[href='/ui/tokens']", "/ui/tokens")
    browser.find_element(By.NAME, "name").send_keys(SITE)
    browser.find_element(By.NAME, "label").send_keys("docs team")
    click_to_new_page(browser, browser.find_element(By.CSS_SELECTOR, "button.create-token"))
    token = wait_for(browser, "code.token").text
    assert len(token) > 20 and "docs team" in browser.find_element(By.CSS_SELECTOR, "table.tokens").text
    shot(browser, tmp_path, "token-created")
    browser.get(kept.url + "/ui/tokens")
    assert token not in browser.page_source  # shown once
    browser.find_element(By.CSS_SELECTOR, "button.revoke").click()
    browser.switch_to.alert.accept()
    assert "Token revoked" in wait_for(browser, "p.notice").text
    assert "revoked" in browser.find_element(By.CSS_SELECTOR, "table.tokens").text
    shot(browser, tmp_path, "token-revoked")


def test_the_watch_view_says_what_changed_since_the_last_visit_word_by_word(kept: Kept, browser: Any,
                                                                            tmp_path: Path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(kept.url + "/ui/")
    click_and_wait(browser, "header a[href='/ui/watch']", "/ui/watch")
    assert "first visit" in wait_for(browser, "#since-visit").text
    sites = browser.find_element(By.CSS_SELECTOR, "table.watch-sites").text
    assert SITE in sites and "just now" in sites
    kept.recrawl("/about")
    browser.get(kept.url + "/ui/watch")
    assert wait_for(browser, "#since-visit").text.startswith("2 changes since your last visit")
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr.since-visit")) == 2
    shot(browser, tmp_path, "watch")
    Select(browser.find_element(By.NAME, "type")).select_by_visible_text("changed")
    # The filtered page replaces this one, which holds the same table: wait for it, not the old one.
    click_and_wait(browser, "form.watch-filters button", "type=")
    rows = wait_for(browser, "table.watch-events").find_elements(By.CSS_SELECTOR, "tr.event")
    assert {r.find_element(By.CSS_SELECTOR, "span.badge").text for r in rows} == {"changed"}
    assert any(kept.site.url + "/about" in r.text for r in rows)
    shot(browser, tmp_path, "watch-filtered")
    browser.find_element(By.PARTIAL_LINK_TEXT, "what changed").click()
    changed = wait_for(browser, "table.diff tr.changed")
    assert changed.find_elements(By.CSS_SELECTOR, "td.old del") and changed.find_elements(By.CSS_SELECTOR, "td.new ins")
    shot(browser, tmp_path, "diff-word-level")
    assert not REPR.search(visible_text(browser))
