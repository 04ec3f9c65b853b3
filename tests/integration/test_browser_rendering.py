"""Rendering with a real Chromium, every request answered by the Fetcher, on loopback sites."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gleaner.demosite.testsite import TestSite
from gleaner.fetch import loop
from gleaner.fetch.fetcher import Fetcher
from gleaner.fetch.types import FetchRequest
from gleaner.render.gate import Limits
from gleaner.render.modes import RenderOutcome
from tests.conftest import test_settings
from tests.render_site import render_site

pytestmark = pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium is not installed")


@pytest.fixture(scope="module")
def trap() -> Iterator[TestSite]:
    with TestSite({}, host="127.0.0.2", max_seconds=120) as site:
        yield site


@pytest.fixture(scope="module")
def site(trap: TestSite) -> Iterator[TestSite]:
    with render_site(trap.url) as served:
        yield served


@pytest.fixture
def fetcher(tmp_path: Path) -> Iterator[Fetcher]:
    # Only 127.0.0.1 may be reached: the trap's 127.0.0.2 is as refused as any private address.
    with Fetcher(test_settings(tmp_path, allow_networks=_only_127_0_0_1())) as f:
        yield f


def _only_127_0_0_1() -> tuple[Any, ...]:
    from gleaner.settings.config import parse_networks

    return tuple(parse_networks("127.0.0.1/32"))


def _render(renderer: Any, fetcher: Fetcher, url: str, **limits: Any) -> Any:
    document = fetcher.fetch(FetchRequest(url))
    assert document.ok, document.reason
    return renderer.render(document, fetcher, Limits(**{"seconds": 4.0, **limits}))


def test_a_single_page_app_is_read_after_its_script_fetched_its_content(browser_renderer: Any, fetcher: Fetcher,
                                                                          site: TestSite) -> None:
    rendering = _render(browser_renderer, fetcher, site.url + "/app/one")
    html = (rendering.html or b"").decode()
    assert rendering.outcome is RenderOutcome.RENDERED
    assert "App page one" in html and "app one part 3." in html
    assert 'href="/app/one-child"' in html  # links written by the script are in the DOM
    assert [(s.kind, s.outcome) for s in rendering.sub_requests] == [("script", "fetched"), ("fetch", "fetched")]
    assert "/api/content?page=%2Fapp%2Fone" in site.paths()


def test_a_script_reaching_for_forbidden_places_reaches_none_and_each_try_is_recorded(
        browser_renderer: Any, fetcher: Fetcher, site: TestSite, trap: TestSite) -> None:
    rendering = _render(browser_renderer, fetcher, site.url + "/trap")
    outcomes = {s.url.replace(site.url, "").replace(trap.url, "TRAP"): s.outcome for s in rendering.sub_requests}
    assert outcomes == {"TRAP/steal": "unavailable", "http://169.254.169.254/computeMetadata/v1/": "unavailable",
                        "/private/secret": "robots-denied", "/api/content": "refused-method",
                        "ws://127.0.0.1:9/socket": "refused-socket"}
    assert "results: rejected,rejected,rejected" in (rendering.html or b"").decode()
    time.sleep(0.3)  # the pop-up (closed at once, not listed) would have arrived by now
    assert trap.paths() == []
    assert "/private/secret" not in site.paths()


def test_a_page_that_never_finishes_loading_is_read_at_its_budget(browser_renderer: Any, fetcher: Fetcher,
                                                                  site: TestSite) -> None:
    started = time.monotonic()
    rendering = _render(browser_renderer, fetcher, site.url + "/forever", seconds=1.5)
    assert time.monotonic() - started < 1.5 + 4
    assert rendering.outcome is RenderOutcome.BUDGET
    assert "written before load ended" in (rendering.html or b"").decode()
    # The next page renders normally: the stuck page was not given back.
    assert _render(browser_renderer, fetcher, site.url + "/app/two").outcome is RenderOutcome.RENDERED


def test_an_endless_scroll_stops_after_a_few_scrolls(browser_renderer: Any, fetcher: Fetcher,
                                                      site: TestSite) -> None:
    rendering = _render(browser_renderer, fetcher, site.url + "/scroll", scroll_steps=2)
    html = (rendering.html or b"").decode()
    assert rendering.outcome is RenderOutcome.RENDERED
    assert "Item 0-0" in html and "Item 2-19" in html and "Item 3-0" not in html
    assert len(rendering.sub_requests) == 3


def test_a_page_cap_on_sub_requests_refuses_the_rest(browser_renderer: Any, fetcher: Fetcher,
                                                     site: TestSite) -> None:
    rendering = _render(browser_renderer, fetcher, site.url + "/app/three", max_requests=1)
    assert [s.outcome for s in rendering.sub_requests] == ["fetched", "refused-requests"]  # app.js, its fetch()
    assert "App page three" not in (rendering.html or b"").decode()


def test_without_gleaners_interception_the_browser_reaches_nothing(browser_renderer: Any, site: TestSite) -> None:
    before = len(site.paths())

    async def visit() -> str:
        page = await browser_renderer.bare_page()
        try:
            await page.goto(site.url + "/docs/one", timeout=3000)
            return "reached"
        except Exception as exc:
            return str(exc).splitlines()[0]
        finally:
            await page.context.close()

    assert "ERR_" in loop.run(visit())
    assert len(site.paths()) == before


def test_one_sites_storage_and_cookies_are_not_seen_by_another_sites_pages(browser_renderer: Any, fetcher: Fetcher,
                                                                          site: TestSite) -> None:
    from gleaner import tenancy

    def storage_seen(url: str, tenant: str) -> str:
        with tenancy.scope(tenant):
            html = (_render(browser_renderer, fetcher, url).html or b"").decode()
        return html.split('<p id="out">', 1)[1].split("</p>", 1)[0]

    with render_site() as other:  # the same host on another port: cookies would be shared in one context
        first = storage_seen(site.url + "/storage", "a.test")
        assert first == "storage saw nothing cookie saw none"
        # Another tenant's render of the very same page starts from nothing.
        assert storage_seen(site.url + "/storage", "b.test") == "storage saw nothing cookie saw none"
        # Another site (another origin) of the same tenant: neither the storage nor the host's cookie.
        assert storage_seen(other.url + "/storage", "a.test") == "storage saw nothing cookie saw none"
        # The site's own next page sees what its last one left, as in one browser tab: the test can tell.
        port = site.url.rsplit(":", 1)[1]
        assert storage_seen(site.url + "/storage", "a.test") == f"storage saw port{port} cookie saw who=port{port}"
