"""Running Gleaner from the back office in a real headless Chromium: add a site, crawl it, follow its runs.

Screenshots go into each test's pytest temp dir (looked at by hand: no raw Python value, no bare error
page, no unexplained empty section).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.backoffice.conftest import SITE, Kept
from tests.backoffice.test_browser import browser as browser  # the fixture
from tests.backoffice.test_browser import click_and_wait, click_to_new_page, shot, wait_for, wait_for_run_status

# What a Python value looks like when it leaks onto a page.
REPR = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\{'|\(\)|\d{2}:\d{2}:\d{2}\.\d{6}")


def visible_text(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.TAG_NAME, "body").text)


def fill(driver: Any, **values: str) -> None:
    from selenium.webdriver.common.by import By

    for name, value in values.items():
        field = driver.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)


def test_an_operator_adds_a_site_and_crawls_it_from_the_back_office(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(kept.url + "/ui/")
    browser.find_element(By.LINK_TEXT, "Add a site").click()
    wait_for(browser, "form.site")
    assert browser.find_element(By.CSS_SELECTOR, 'meta[name="viewport"]')
    shot(browser, tmp_path, "add-site-empty")
    fill(browser, url=kept.site.url + "/", site_domain="ui.test", every="1d", exclude="/private/*", delay="0")
    click_to_new_page(browser, browser.find_element(By.CSS_SELECTOR, "form.site button"))
    notice = wait_for(browser, "p.notice")
    assert "Site added" in notice.text and browser.current_url.endswith("/ui/sites/ui.test?done=site-added")
    assert "every 1d" in visible_text(browser)
    shot(browser, tmp_path, "site-added")

    browser.find_element(By.CSS_SELECTOR, "button.crawl-now").click()
    WebDriverWait(browser, 30).until(lambda b: "/ui/runs/" in b.current_url)
    assert "Crawl started" in wait_for(browser, "p.notice").text
    try:
        wait_for_run_status(browser, "finished", timeout=120)
    finally:
        shot(browser, tmp_path, "crawled-from-the-ui")
    text = visible_text(browser)
    assert "ui.test" in text and "just now" in text and not REPR.search(text), REPR.search(text)
    started = browser.find_element(By.CSS_SELECTOR, "p.muted time")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", started.get_attribute("title") or "")
    shot(browser, tmp_path, "crawled-from-the-ui")
    run = kept.deps.metadata.recent_runs(1)[0]
    assert (run["site_domain"], run["status"]) == ("ui.test", "finished") and run["fetched"] > 5

    browser.get(kept.url + "/ui/sites/ui.test/edit")
    assert browser.find_element(By.NAME, "exclude").get_attribute("value") == "/private/*"
    fill(browser, every="6h")
    click_to_new_page(browser, browser.find_element(By.CSS_SELECTOR, "form.site button"))
    assert "Site saved" in wait_for(browser, "p.notice").text and "every 6h" in visible_text(browser)


def test_a_bad_glob_stays_in_the_form_with_its_error_beside_it(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    browser.get(kept.url + "/ui/add-site")
    fill(browser, url=kept.site.url + "/", include="blog/*", limit="ten", every="5")
    click_to_new_page(browser, browser.find_element(By.CSS_SELECTOR, "form.site button"))
    wait_for(browser, "p.refused")
    shot(browser, tmp_path, "bad-glob")
    assert "Nothing was saved: 3 fields to correct" in visible_text(browser)
    assert browser.find_element(By.NAME, "include").get_attribute("value") == "blog/*"
    assert browser.find_element(By.NAME, "limit").get_attribute("value") == "ten"
    assert browser.find_element(By.NAME, "url").get_attribute("value") == kept.site.url + "/"
    assert "must start with '/'" in browser.find_element(By.ID, "e-include").text
    assert "whole number" in browser.find_element(By.ID, "e-limit").text
    assert "has no unit" in browser.find_element(By.ID, "e-every").text
    assert browser.find_element(By.NAME, "include").get_attribute("aria-invalid") == "true"
    assert kept.deps.metadata.find_site("demo.test") is None  # nothing saved


def test_the_runs_index_lists_runs_newest_first_and_filters_them(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(kept.url + "/ui/runs")
    rows = browser.find_elements(By.CSS_SELECTOR, "table.runs tr")[1:]
    assert [r.find_element(By.CSS_SELECTOR, "td").text for r in rows] == [
        kept.second["run_id"][:8], kept.first["run_id"][:8]]
    text = visible_text(browser)
    assert "2 runs, newest first" in text and "just now" in text and not REPR.search(text)
    shot(browser, tmp_path, "runs-index")
    Select(browser.find_element(By.NAME, "site")).select_by_visible_text(SITE)
    Select(browser.find_element(By.NAME, "status")).select_by_visible_text("failed")
    click_and_wait(browser, "form.filters button", "status=failed")
    assert "No run matches these filters" in wait_for(browser, "table.runs").text
    shot(browser, tmp_path, "runs-index-filtered-empty")
    browser.get(kept.url + "/ui/search?q=install")
    assert wait_for(browser, "h1").text == "Search the copy"
    shot(browser, tmp_path, "search")
