"""The back office's pages in a real headless Chromium (Debian's chromium and chromedriver, driven by Selenium).

Each test saves screenshots of the pages it opens into its pytest temp dir
(artefacts, not committed). Without Chromium the tests skip, except under
CI=true, where .ci/run installs it and they must run.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.changes import subscriptions
from gleaner.operator.sites import add_site
from gleaner.serving.serve import WebhookServer
from gleaner.store.access.tokens import TokenStore
from tests.backoffice.conftest import CHANGED, SITE, Kept, held_page

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the browser tests: install chromium and chromium-driver")
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(arg)
    # Naming the driver keeps Selenium Manager from trying to download one (FACTS.md).
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: Any, tmp_path: Path, name: str) -> None:
    """A screenshot beside the test's other files; its path printed (pytest -s or a failure shows it)."""
    path = tmp_path / f"{name}.png"
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")


def wait_for(driver: Any, css: str, timeout: float = 10) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(
        expected_conditions.visibility_of_element_located((By.CSS_SELECTOR, css)))


def click_to_new_page(driver: Any, element: Any, timeout: float = 30) -> None:
    """Click a link or a form's button that loads another page, then wait until the page it was on is
    gone and the new one loaded (both pages may hold the element a test reads next).

    The old page is marked in its window object rather than watched for staleness: while a page
    unloads, chromedriver may answer a question about one of its elements with an inspector error
    ("Node with given id does not belong to the document") instead of "stale"; a script's question
    is asked again until the new page answers it."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_script("window.gleanerLeftPage = true")
    element.click()
    WebDriverWait(driver, timeout, ignored_exceptions=(WebDriverException,)).until(lambda d: d.execute_script(
        "return window.gleanerLeftPage === undefined && document.readyState === 'complete'"))


def click_and_wait(driver: Any, css: str, url_part: str, timeout: float = 30) -> None:
    """Click the element ``css`` names, then wait until the browser is on the page the click leads to."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    click_to_new_page(driver, driver.find_element(By.CSS_SELECTOR, css), timeout)
    WebDriverWait(driver, timeout).until(lambda b: url_part in b.current_url)


def wait_for_run_status(driver: Any, status: str, timeout: float) -> None:
    """Until the live run page shows ``status``. The page swaps its counters out while it updates, so an
    element found a moment ago may be gone when read: that read is retried, not a failure."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def shows(b: Any) -> bool:
        try:
            return bool(b.find_element(By.ID, "run-status").text == status)
        except WebDriverException:
            return False

    WebDriverWait(driver, timeout).until(shows)


def test_the_home_page_leads_to_the_tree_whose_folders_open_lazily(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    browser.get(kept.url + "/ui/")
    assert kept.second["run_id"][:8] in browser.find_element(By.CSS_SELECTOR, "table.runs").text
    shot(browser, tmp_path, "home")
    browser.find_element(By.LINK_TEXT, SITE).click()
    wait_for(browser, "#tree")
    assert browser.find_elements(By.CSS_SELECTOR, f'li.document[data-path="{CHANGED}"]') == []  # not loaded yet
    browser.find_element(By.CSS_SELECTOR, 'li.folder[data-prefix="/docs/"] button.toggle').click()
    install = wait_for(browser, f'li.document[data-path="{CHANGED}"]')
    assert "current" in install.text and "fetched" in install.text and "2 versions" in install.text
    shot(browser, tmp_path, "tree")


def test_a_changed_document_shows_its_versions_and_highlights_the_changed_lines(kept: Kept, browser: Any,
                                                                                tmp_path: Path):
    from selenium.webdriver.common.by import By

    browser.get(f"{kept.url}/ui/documents/{kept.document_id(CHANGED)}")
    versions = browser.find_element(By.CSS_SELECTOR, "table.versions").text
    assert "v2" in versions and "current" in versions and kept.second["run_id"][:8] in versions
    facts = browser.find_element(By.CSS_SELECTOR, "dl.facts").text
    assert "200" in facts and "bytes" in facts
    changed = browser.find_elements(By.CSS_SELECTOR, "table.diff tr.changed")
    assert changed, "the diff of v1 -> v2 shows changed lines"
    new_cell = changed[0].find_element(By.CSS_SELECTOR, "td.new")
    old_cell = changed[0].find_element(By.CSS_SELECTOR, "td.old")
    assert new_cell.text != old_cell.text
    assert new_cell.value_of_css_property("background-color") == "rgba(220, 247, 224, 1)"
    assert old_cell.value_of_css_property("background-color") == "rgba(255, 229, 229, 1)"
    same = browser.find_elements(By.CSS_SELECTOR, "table.diff tr.same td.new")
    assert same and same[0].value_of_css_property("background-color") == "rgba(0, 0, 0, 0)"
    shot(browser, tmp_path, "document-diff")
    # Comparing a version with itself highlights nothing.
    browser.find_element(By.CSS_SELECTOR, 'input[name="from"][value="1"]').click()
    browser.find_element(By.CSS_SELECTOR, 'input[name="to"][value="1"]').click()
    browser.find_element(By.CSS_SELECTOR, "#compare button").click()
    wait_for(browser, "table.diff")
    assert browser.find_elements(By.CSS_SELECTOR, "table.diff tr.changed") == []
    assert "the same content" in browser.page_source
    browser.find_element(By.LINK_TEXT, "raw.md").click()
    assert "raw.md" in wait_for(browser, "h1").text
    assert browser.find_element(By.CSS_SELECTOR, "pre.body").text


def test_the_run_page_lists_each_url_with_its_status_and_filters_by_outcome(kept: Kept, browser: Any,
                                                                            tmp_path: Path):
    from selenium.webdriver.common.by import By

    browser.get(f"{kept.url}/ui/runs/{kept.first['run_id']}")
    assert "finished" in browser.find_element(By.ID, "run-status").text
    assert kept.site.url + "/private/roadmap" in browser.find_element(By.CSS_SELECTOR, "table.urls").text
    shot(browser, tmp_path, "run")
    click_to_new_page(browser, browser.find_element(By.PARTIAL_LINK_TEXT, "refused by robots.txt"))
    rows = wait_for(browser, "table.urls").find_elements(By.CSS_SELECTOR, "tr")[1:]
    assert [r.find_element(By.CSS_SELECTOR, "td").text for r in rows] == [kept.site.url + "/private/roadmap"]


def test_a_failed_delivery_is_retried_from_the_changes_page(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    subscriptions.add(kept.deps.metadata, "http://127.0.0.1:9/hook", site=None, types=(),
                      allow=kept.deps.settings.allow_networks)
    kept.recrawl("/about")
    browser.get(kept.url + "/ui/changes")
    events = browser.find_element(By.CSS_SELECTOR, "table.events").text
    assert "changed" in events and kept.site.url + "/about" in events and "document.changed" not in events
    row = browser.find_element(By.CSS_SELECTOR, "table.deliveries tr:nth-child(2)")
    assert "failed" in row.text
    shot(browser, tmp_path, "changes")
    row.find_element(By.CSS_SELECTOR, "button").click()
    # The retry answers with the page anew: wait for the old row to go, or it is read as it is replaced.
    WebDriverWait(browser, 10).until(expected_conditions.staleness_of(row))
    row = wait_for(browser, "table.deliveries tr:nth-child(2)")
    assert row.find_elements(By.CSS_SELECTOR, "td")[5].text == "2"  # attempts (after the subscription)


def test_the_run_page_follows_a_running_crawl_until_it_finishes(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    release = threading.Event()
    kept.site.pages["/about"] = held_page(release, "About us")
    crawler, run_id = kept.crawl_in_background()
    try:
        browser.get(f"{kept.url}/ui/runs/{run_id}")
        assert browser.find_element(By.ID, "run-status").text not in ("finished", "partial", "failed")
        shot(browser, tmp_path, "run-going")
        release.set()
        wait_for_run_status(browser, "finished", 60)
        shot(browser, tmp_path, "run-finished")
    finally:
        release.set()
        crawler.join(timeout=60)


def test_a_going_run_is_cancelled_and_then_resumed_from_its_page(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    release = threading.Event()
    kept.site.pages["/about"] = held_page(release, "About us", seconds=20)
    crawler, run_id = kept.crawl_in_background()
    try:
        browser.get(f"{kept.url}/ui/runs/{run_id}")
        assert browser.find_elements(By.CSS_SELECTOR, "button.resume") == []
        shot(browser, tmp_path, "run-cancellable")
        browser.find_element(By.CSS_SELECTOR, "button.cancel").click()
        wait_for_run_status(browser, "cancelled", 30)
    finally:
        release.set()
        crawler.join(timeout=60)
    browser.get(f"{kept.url}/ui/runs/{run_id}")
    assert "cancelled by the operator" in browser.find_element(By.CSS_SELECTOR, "p.error").text
    assert browser.find_elements(By.CSS_SELECTOR, "button.cancel") == []
    shot(browser, tmp_path, "run-cancelled")
    browser.find_element(By.CSS_SELECTOR, "button.resume").click()
    # The click answers at once; the page follows the resumed run until it ends.
    wait_for_run_status(browser, "finished", 60)
    assert browser.find_elements(By.CSS_SELECTOR, "p.error") == []
    assert browser.find_elements(By.CSS_SELECTOR, "button.resume") == []
    shot(browser, tmp_path, "run-resumed")


def test_a_skip_toggled_in_the_tree_is_respected_by_the_next_crawl(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    posts = ("/blog/2026/why-snapshots", "/blog/2026/polite-crawling", "/blog/2026/provenance")
    browser.get(f"{kept.url}/ui/sites/{SITE}")
    browser.find_element(By.CSS_SELECTOR, 'li.folder[data-prefix="/blog/"] button.toggle').click()
    folder = wait_for(browser, 'li.folder[data-prefix="/blog/2026/"]')
    folder.find_element(By.CSS_SELECTOR, "span.toggles button.skip").click()
    rule = wait_for(browser, 'table.rules tr[data-glob="/blog/2026/*"]')
    assert "skip" in rule.text
    fetched_before = {p: kept.site.requested(p) for p in posts}
    third = kept.recrawl()
    assert {p: kept.site.requested(p) for p in posts} == fetched_before, "no skipped page was requested again"
    assert kept.site.requested("/blog/2025/launch") > 0
    browser.get(f"{kept.url}/ui/sites/{SITE}")
    browser.find_element(By.CSS_SELECTOR, 'li.folder[data-prefix="/blog/"] button.toggle').click()
    wait_for(browser, 'li.folder[data-prefix="/blog/2026/"] button.toggle').click()
    for path in posts:
        node = wait_for(browser, f'li.document[data-path="{path}"]')
        assert "skip" in node.find_element(By.CSS_SELECTOR, "span.badge.st-skip").text
    shot(browser, tmp_path, "tree-skipped")
    browser.get(f"{kept.url}/ui/runs/{third['run_id']}")
    urls = browser.find_element(By.CSS_SELECTOR, "table.urls").text
    assert all(kept.site.url + p in urls for p in posts)


def test_a_conflict_is_resolved_from_its_inbox(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    kept.recrawl(copies={"/pricing": "/about"})
    browser.get(f"{kept.url}/ui/sites/{SITE}")
    browser.find_element(By.LINK_TEXT, "conflicts").click()
    row = wait_for(browser, "table.conflicts tr[data-id]")
    assert "open" in row.text and kept.site.url + "/pricing" in row.text and kept.site.url + "/about" in row.text
    shot(browser, tmp_path, "conflicts-open")
    click_to_new_page(browser, row.find_element(By.CSS_SELECTOR, "button.resolved"))
    row = wait_for(browser, "table.conflicts tr[data-id]")
    assert row.find_element(By.CSS_SELECTOR, "span.badge").text == "resolved"
    assert row.find_elements(By.CSS_SELECTOR, "button.resolved") == []
    shot(browser, tmp_path, "conflicts-resolved")
    click_to_new_page(browser, browser.find_element(By.LINK_TEXT, "open"))
    assert "No conflicts" in wait_for(browser, "table.conflicts").text


def test_the_quality_log_filters_by_kind(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    refs = kept.deps.references
    refs.log_quality("ssrf_rejected", "http://10.0.0.5/internal", "resolves to a private address", [])
    refs.log_quality("fetch_refused", "https://feed.example/gone", "HTTP 410", [])
    browser.get(kept.url + "/ui/")
    browser.find_element(By.LINK_TEXT, "Quality log").click()
    rows = wait_for(browser, "table.quality").find_elements(By.CSS_SELECTOR, "tr[data-id]")
    assert len(rows) == 2
    shot(browser, tmp_path, "quality")
    Select(browser.find_element(By.NAME, "kind")).select_by_value("ssrf_rejected")
    click_and_wait(browser, "form.filters button", "kind=ssrf_rejected")
    rows = wait_for(browser, "table.quality").find_elements(By.CSS_SELECTOR, "tr[data-id]")
    assert [r.find_elements(By.CSS_SELECTOR, "td")[3].text for r in rows] == ["http://10.0.0.5/internal"]
    shot(browser, tmp_path, "quality-ssrf")


def test_every_other_page_renders_and_is_kept_as_a_screenshot(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    doc_id = kept.document_id(CHANGED)
    pages = {
        "documents": (f"/ui/sites/{SITE}/documents?status=active", "table"),
        "version-content": (f"/ui/documents/{doc_id}/versions/2", "pre.body"),
        "version-raw": (f"/ui/documents/{doc_id}/versions/1?raw=1", "pre.body"),
        "review": (f"/ui/sites/{SITE}/review", "h1"),
        "not-found": ("/ui/runs/00000000-0000-0000-0000-000000000000", "h1"),
    }
    for name, (path, css) in pages.items():
        browser.get(kept.url + path)
        assert wait_for(browser, css).text, name
        shot(browser, tmp_path, name)
    assert "404" in browser.find_element(By.TAG_NAME, "h1").text
    assert sorted(p.stem for p in tmp_path.glob("*.png")) == sorted(pages)


def test_behind_a_bearer_a_site_token_logs_in_and_sees_its_own_site_only(kept: Kept, browser: Any, tmp_path: Path):
    from selenium.webdriver.common.by import By

    token = TokenStore(kept.deps.engine).add_site(SITE)["token"]
    add_site(kept.deps, "http://127.0.0.1:9/", site_domain="later.test", every="6h")  # another tenant
    guarded = BackofficeApp(kept.deps, bearer="operator-secret")  # as when bound beyond loopback
    with WebhookServer(kept.deps, port=0, routes=[("/v1/", guarded), ("/ui/", guarded)]) as server:
        browser.get(server.url + "/ui/")
        wait_for(browser, 'input[name="token"]').send_keys("glt_wrong")
        shot(browser, tmp_path, "login")
        browser.find_element(By.CSS_SELECTOR, "form button").click()
        assert "not the right one" in wait_for(browser, "p.error").text
        wait_for(browser, 'input[name="token"]').send_keys(token)
        browser.find_element(By.CSS_SELECTOR, "form button").click()
        sites = wait_for(browser, "table").text
        assert SITE in sites and "later.test" not in browser.page_source
        shot(browser, tmp_path, "home-as-site")
        browser.get(server.url + "/ui/sites/later.test")
        assert "404" in wait_for(browser, "h1").text
