"""Rendering as a service: the wire format, and scrape's client of the render service.

In the cloud the five functions hold no browser; a Cloud Run service holding Chromium renders for
them (:mod:`gleaner.cloud.renderservice`). Scrape sends it the document it already fetched (so the page
is not asked for twice) and the run it belongs to (so the service's Fetcher shares the run's
robots.txt decisions and budget); the service answers with the rendered DOM and the page's
sub-requests. Authenticated like every other HTTP trigger: the shared bearer locally and on the
emulator path, a Google identity token for the service's URL in the cloud.

A service that cannot be reached or answers badly is a ``failed`` rendering (the plain fetch
stands, the reason recorded), never an exception in scrape.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx

from gleaner.errors import InvalidInput
from gleaner.fetch.types import FetchOutcome, FetchResult
from gleaner.render.browser import Rendering, SubFetcher
from gleaner.render.gate import Limits, SubRequest
from gleaner.render.modes import RenderOutcome

if TYPE_CHECKING:
    from gleaner.settings.config import Settings

log = logging.getLogger(__name__)

# Above the page's own budget: the service's launch on a cold instance comes first.
REQUEST_MARGIN_SECONDS = 30.0


def document_to_dict(document: FetchResult, run_id: str | None) -> dict[str, Any]:
    return {"run_id": run_id, "url": document.url, "final_url": document.final_url, "status": document.status,
            "content_type": document.content_type, "charset": document.charset, "headers": document.headers,
            "body": base64.b64encode(document.body or b"").decode("ascii")}


def document_from_dict(data: Any) -> tuple[FetchResult, str | None]:
    """The document and run id of a render request; InvalidInput when it is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("url"), str) or not isinstance(data.get("body"), str):
        raise InvalidInput("a render request needs url and body (base64)")
    headers = data.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise InvalidInput("headers must be an object of strings")
    try:
        body = base64.b64decode(data["body"], validate=True)
    except ValueError as exc:
        raise InvalidInput(f"body is not base64: {exc}") from exc
    from gleaner.fetch.types import ContentKind

    document = FetchResult(data["url"], FetchOutcome.FETCHED, final_url=data.get("final_url") or data["url"],
                           status=int(data.get("status") or 200), content_type=data.get("content_type"),
                           charset=data.get("charset"), kind=ContentKind.HTML, body=body, headers=headers)
    run_id = data.get("run_id")
    return document, run_id if isinstance(run_id, str) else None


def rendering_to_dict(rendering: Rendering) -> dict[str, Any]:
    return {"outcome": str(rendering.outcome), "reason": rendering.reason, "elapsed_ms": rendering.elapsed_ms,
            "html": base64.b64encode(rendering.html).decode("ascii") if rendering.html is not None else None,
            "sub_requests": [s.to_dict() for s in rendering.sub_requests]}


def rendering_from_dict(data: dict[str, Any]) -> Rendering:
    html = data.get("html")
    return Rendering(RenderOutcome(data["outcome"]), base64.b64decode(html) if html else None,
                     tuple(SubRequest(s["url"], s["kind"], s["outcome"], s.get("status"), int(s.get("bytes") or 0),
                                      s.get("reason") or "") for s in data.get("sub_requests", ())),
                     int(data.get("elapsed_ms") or 0), str(data.get("reason") or ""))


class RemoteRenderer:
    """The render port over HTTP. ``auth`` gives each request's auth headers (bearer, or a fresh identity token)."""

    def __init__(self, url: str, *, auth: Callable[[], dict[str, str]], limits: Limits | None = None) -> None:
        self.url = url
        self._auth = auth
        self.limits = limits or Limits()
        self._client: httpx.Client | None = None

    def render(self, document: FetchResult, fetcher: SubFetcher, limits: Limits | None = None, *,
               run_id: str | None = None) -> Rendering:
        del fetcher  # the service's own Fetcher answers the page's requests, under the same policy
        started = time.monotonic()
        timeout = (limits or self.limits).seconds + REQUEST_MARGIN_SECONDS
        if self._client is None:
            # Gleaner's own service, named by its operator: not a site, so not the fetcher's address policy.
            self._client = httpx.Client(trust_env=False, follow_redirects=False)
        try:
            response = self._client.post(self.url, content=json.dumps(document_to_dict(document, run_id)),
                                         headers={**self._auth(), "Content-Type": "application/json"},
                                         timeout=timeout)
            if response.status_code != 200:
                raise ValueError(f"HTTP {response.status_code}: {response.text[:200]}")
            return rendering_from_dict(response.json())
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            log.warning("render service %s failed for %s: %s", self.url, document.url, exc)
            return Rendering(RenderOutcome.FAILED, None, (), int((time.monotonic() - started) * 1000),
                             f"render service: {exc}"[:300])

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def service_auth(settings: Settings) -> Callable[[], dict[str, str]]:
    """How scrape authenticates to the render service: the shared bearer when one is set (locally, the
    emulator path), else a Google identity token for the service's URL (minted per call; google-auth caches
    the metadata server's answer)."""
    secret, audience = settings.webhook_secret, settings.render_url or ""

    def headers() -> dict[str, str]:
        if secret:
            return {"Authorization": f"Bearer {secret}"}
        import google.auth.transport.requests
        import google.oauth2.id_token

        token = google.oauth2.id_token.fetch_id_token(google.auth.transport.requests.Request(), audience)
        return {"Authorization": f"Bearer {token}"}

    return headers
