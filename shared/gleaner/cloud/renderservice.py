"""The render service: one rendered page per authenticated ``POST`` (the Cloud Run service's handler).

Body: a document as :func:`gleaner.render.remote.document_to_dict` writes it (the page scrape already
fetched, and its run). The service renders it in its warm browser, every request of the page
answered by a Fetcher of that run (address policy, robots.txt, politeness, budget), and answers
``200`` with :func:`~gleaner.render.remote.rendering_to_dict`. 400 malformed, 401 bad token, 405
other methods, 413 a body over the document cap (plus base64). Entry points stay thin: this is
what a ``main.py`` of the service calls, as scrape's calls :mod:`gleaner.cloud.entry`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gleaner.errors import InvalidInput
from gleaner.render.remote import document_from_dict, rendering_to_dict
from gleaner.serving.web import BodyRefused, read_body

if TYPE_CHECKING:
    from gleaner.app import Deps

log = logging.getLogger(__name__)

HttpResponse = tuple[str, int, dict[str, str]]


def _answer(body: dict[str, Any], status: int) -> HttpResponse:
    return json.dumps(body), status, {"Content-Type": "application/json"}


def handle(request: Any, deps: Deps) -> HttpResponse:
    """Render the posted document; see the module docstring for the exchange."""
    from gleaner.cloud.callers import admitted

    if request.method != "POST":
        return _answer({"error": "use POST"}, 405)
    if admitted(request.headers, deps.settings) is None:
        return _answer({"error": "missing or wrong bearer token"}, 401)
    try:
        # A document at the fetcher's cap, base64-encoded, plus its headers.
        raw = read_body(request.environ, deps.settings.max_body_bytes * 4 // 3 + 64 * 1024, lambda: request.stream)
        document, run_id = document_from_dict(json.loads(raw or b"{}"))
    except BodyRefused as exc:
        return _answer({"error": exc.message}, exc.status)
    except (InvalidInput, ValueError) as exc:
        return _answer({"error": str(exc)[:300]}, 400)
    from gleaner.render.remote import RemoteRenderer

    if isinstance(deps.renderer, RemoteRenderer):  # GLEANER_RENDER_URL set here too: it would call itself
        log.error("the render service has GLEANER_RENDER_URL set; it must render with its own browser")
        return _answer({"error": "the render service is configured to call a render service"}, 500)
    try:
        with _acting_for_run(deps, run_id), deps.new_fetcher(run_id=run_id) as fetcher:
            rendering = deps.renderer.render(document, fetcher)
    except UnknownRun as exc:
        return _answer({"error": str(exc)}, 404)
    log.info("rendered %s: %s in %d ms, %d sub-requests", document.url, rendering.outcome, rendering.elapsed_ms,
             len(rendering.sub_requests))
    return _answer(rendering_to_dict(rendering), 200)


class UnknownRun(InvalidInput):
    """A render request names a run this database does not hold."""


@contextlib.contextmanager
def _acting_for_run(deps: Deps, run_id: str | None) -> Iterator[None]:
    """The run's tenant, as the stage that sent the page acts for it: the fetcher records the run's
    robots.txt answers and budget in its rows, which row-level security admits only for that tenant."""
    from gleaner import tenancy

    if run_id is None:
        yield
        return
    with tenancy.all_tenants():  # the caller was admitted above; the run id names its tenant
        found = deps.provenance.run_site(run_id)
    if found is None:
        raise UnknownRun(f"no run {run_id}")
    with tenancy.scope(found[0]):
        yield


@functools.cache
def _logging() -> None:
    """Log as the functions do (JSON lines when deployed), once per process, at the first request."""
    from gleaner.cloud import entry

    entry.setup_logging()


def on_http(request: Any) -> HttpResponse:
    """The service's entry point (functions-framework ``--target on_http``)."""
    from gleaner.app import process_deps

    _logging()
    return handle(request, process_deps())
