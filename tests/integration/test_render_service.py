"""The render service over HTTP: scrape's client sends the fetched document, the service renders it
with its own Fetcher and answers the DOM and the page's sub-requests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import flask
import pytest
from werkzeug.serving import make_server

from gleaner.cloud import renderservice as service
from gleaner.fetch.fetcher import Fetcher
from gleaner.fetch.types import FetchRequest
from gleaner.render.modes import RenderOutcome
from gleaner.render.remote import RemoteRenderer
from tests.conftest import test_settings
from tests.render_site import render_site

pytestmark = pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium is not installed")

SECRET = "render-secret"


@pytest.fixture
def render_service(make_deps: Any, browser_renderer: Any) -> Iterator[str]:
    deps = make_deps(webhook_secret=SECRET)
    deps.renderer_override = browser_renderer
    app = flask.Flask("render")
    app.add_url_rule("/", "render", lambda: service.handle(flask.request, deps), methods=["GET", "POST"])
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()


def test_the_service_renders_a_posted_document_with_its_own_fetcher(render_service: str, tmp_path: Path) -> None:
    with render_site() as site, Fetcher(test_settings(tmp_path)) as fetcher:
        document = fetcher.fetch(FetchRequest(site.url + "/app/two"))
        rendering = RemoteRenderer(render_service, auth=lambda: {"Authorization": f"Bearer {SECRET}"}).render(
            document, fetcher)
        wrong = RemoteRenderer(render_service, auth=lambda: {"Authorization": "Bearer nope"}).render(document, fetcher)
        asked = site.paths()
    assert rendering.outcome is RenderOutcome.RENDERED
    assert "app two part 3." in (rendering.html or b"").decode()
    assert [(s.kind, s.outcome) for s in rendering.sub_requests] == [("script", "fetched"), ("fetch", "fetched")]
    assert asked.count("/app/two") == 1  # the document travelled with the request: not fetched again
    assert wrong.outcome is RenderOutcome.FAILED and "HTTP 401" in wrong.reason and wrong.html is None
