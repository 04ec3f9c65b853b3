"""The back office tests' kept site: the demo site crawled twice (one page changed), served by `gleaner serve`."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from gleaner.app import Deps
from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.demosite.demo import article, demo_pages
from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request
from gleaner.serving.serve import WebhookServer

SITE = "demo.test"
CHANGED = "/docs/install"


@dataclass
class Kept:
    deps: Deps
    site: TestSite
    server: WebhookServer
    first: dict[str, Any]
    second: dict[str, Any]

    @property
    def url(self) -> str:
        return self.server.url

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(self.url + path, params=params, timeout=10)

    def document_id(self, path: str) -> str:
        doc = self.deps.metadata.document_by_url(self.site.url + path)
        assert doc is not None
        return str(doc["id"])

    def recrawl(self, *changed: str, copies: dict[str, str] | None = None) -> dict[str, Any]:
        """Crawl again, after giving ``changed`` paths new text (CHANGED keeps its second version) and
        making each key of ``copies`` serve the same page as its value (a duplicate)."""
        pages = demo_pages(self.site.url, changed=(CHANGED, *changed))
        for path, source in (copies or {}).items():
            pages[path] = replace(pages[source])
        for path, page in pages.items():
            page.modified += 120
            self.site.pages[path] = page
        return crawl(self.deps, new_request(self.site.url + "/", site_domain=SITE))


    def crawl_in_background(self) -> tuple[threading.Thread, str]:
        """Start another crawl on a thread; (the thread, the new run's id) once the run exists."""
        before = {r["run_id"] for r in self.deps.metadata.recent_runs(50)}
        crawler = threading.Thread(target=lambda: crawl(self.deps, new_request(self.site.url + "/", site_domain=SITE)))
        crawler.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            run_id = next((r["run_id"] for r in self.deps.metadata.recent_runs(50) if r["run_id"] not in before), None)
            if run_id:
                return crawler, run_id
            time.sleep(0.1)
        raise AssertionError("the crawl did not start")


def held_page(release: threading.Event, title: str, seconds: float = 4) -> Page:
    """A page that answers only once ``release`` is set (or after ``seconds``, under the tests' fetch
    timeout): a run that reaches it stays going while the test looks."""

    def handler(h: Any) -> None:
        release.wait(seconds)
        data = article(title, title + ":held").encode()
        h.send_response(200)
        h.send_header("Content-Type", "text/html; charset=utf-8")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    return Page("", handler=handler)


@pytest.fixture
def kept(make_deps: Any) -> Iterator[Kept]:
    # A run sends its deliveries before it returns (for at most 2 s); one to a dead target fails at once.
    deps = make_deps(webhook_secret="admin-secret", notify_run_wait=2.0, notify_max_attempts=1, notify_timeout=2.0)
    pages: dict[str, Any] = {}
    with TestSite(pages, max_seconds=300) as site:
        pages.update(demo_pages(site.url))
        first = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        for path, page in demo_pages(site.url, changed=(CHANGED,)).items():
            page.modified += 60
            pages[path] = page
        second = crawl(deps, new_request(site.url + "/", site_domain=SITE))
        with WebhookServer(deps, port=0) as server:
            yield Kept(deps, site, server, first, second)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def call(app: BackofficeApp, method: str, path: str, *, token: str | None = None, authorization: str | None = None,
         query: Mapping[str, Any] | None = None, json_body: Any = None, form: bytes | None = None,
         cookie: str | None = None) -> Answer:
    """One request straight into the WSGI app, as a same-origin client sends it (JSON commands).

    A form POST carries the CSRF token a page of the back office would have put in it (for the seed
    cookie this client holds), as a browser's does; the token's own tests are in test_sessions.py."""
    if form is not None and path not in ("/ui/login", "/ui/logout") and b"csrf=" not in form:
        from gleaner.backoffice.login import CSRF_COOKIE, CSRF_FIELD, Csrf

        seed = f"{CSRF_COOKIE}=test-client-seed"
        cookie = f"{cookie}; {seed}" if cookie else seed
        csrf = Csrf.of(app._csrf_key, {"HTTP_COOKIE": cookie}).token
        form = form + (b"&" if form else b"") + f"{CSRF_FIELD}={csrf}".encode()
    body = form if form is not None else (json.dumps(json_body).encode() if json_body is not None else b"")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": urlencode(query or {}),
        "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body)), "HTTP_HOST": "backoffice.example",
        "CONTENT_TYPE": "application/x-www-form-urlencoded" if form is not None else "application/json"}
    if token is not None:
        authorization = f"Bearer {token}"
    if authorization is not None:
        environ["HTTP_AUTHORIZATION"] = authorization
    if cookie is not None:
        environ["HTTP_COOKIE"] = cookie
    seen: list[Any] = []
    out = b"".join(app(environ, lambda status, headers, exc_info=None: seen.extend((status, headers))))
    return Answer(int(seen[0].split()[0]), dict(seen[1]), out)
