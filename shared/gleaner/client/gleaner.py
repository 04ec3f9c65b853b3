"""``Gleaner``: one method per ``/v1/`` route of a Gleaner server, over one ``httpx.Client``.

Each method is bound to its route with :func:`gleaner.client.routes.endpoint`; routes a program does
not call through this client are in :data:`NOT_COVERED` with the reason. Query values left ``None``
are not sent, so the server's defaults apply. Lists that page (``documents``, ``runs``) also have an
``each_*`` iterator that walks every page.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import httpx

from gleaner.client.errors import ApiError, ExportCut, ServerUnreachable
from gleaner.client.records import ChangeEvent, ExportRecord, RunSummary, SearchHit, TextSlice
from gleaner.client.routes import Route, endpoint, routes_of

URL_VARIABLE = "GLEANER_URL"
TOKEN_VARIABLE = "GLEANER_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8080"  # where `gleaner serve` listens unless told otherwise
DEFAULT_TIMEOUT = 30.0  # seconds per request; a streamed export waits this long between lines at most
PAGE = 500  # rows per request when an each_* iterator walks a list (the server allows up to 1000)

# Routes of the server's OpenAPI document that have no method here, and why.
NOT_COVERED: dict[tuple[str, str], str] = {}

JSON = dict[str, Any]


def _query(**values: Any) -> dict[str, str]:
    """The query values to send: None is left out (the server's default), booleans are 0/1."""
    out: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        out[name] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    return out


def _error(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return ApiError(response.status_code, body["error"], body)
    return ApiError(response.status_code, response.text[:300] or response.reason_phrase)


class Gleaner:
    """A Gleaner server's ``/v1/`` API: ``Gleaner("http://127.0.0.1:8080", token="glt_...")``.

    ``base_url`` None reads ``GLEANER_URL`` (else ``http://127.0.0.1:8080``); ``token`` None reads
    ``GLEANER_TOKEN`` (else no credential, which `gleaner serve` accepts from this machine only).
    The token is a site token (that site's data only) or the operator's secret. ``transport`` replaces
    the network (``httpx.MockTransport``, a WSGI app through ``httpx.WSGITransport``)."""

    def __init__(self, base_url: str | None = None, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 transport: httpx.BaseTransport | None = None, env: Mapping[str, str] | None = None) -> None:
        environ = os.environ if env is None else env
        self.base_url = (base_url or environ.get(URL_VARIABLE, "").strip() or DEFAULT_URL).rstrip("/")
        token = token if token is not None else (environ.get(TOKEN_VARIABLE, "").strip() or None)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # trust_env=False: a proxy from the environment would see the bearer token.
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport,
                                  trust_env=False)

    ROUTES: dict[str, Route]  # set below the class: {method name: route}

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Gleaner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Gleaner({self.base_url!r})"

    # -- the one HTTP boundary --------------------------------------------------------------------

    def _send(self, route: Route, path: str, query: Mapping[str, str] | None = None,
              body: Mapping[str, Any] | None = None) -> Any:
        try:
            response = self._http.request(route.method, path, params=query or None,
                                          json=dict(body) if body is not None else None)
        except httpx.TransportError as exc:
            raise ServerUnreachable(f"{route.method} {self.base_url}{path}: {exc}") from exc
        if response.status_code >= 400:
            raise _error(response)
        return response.json()

    # -- sites ------------------------------------------------------------------------------------

    @endpoint("GET", "/v1/sites")
    def sites(self, at: Route) -> list[JSON]:
        """Every site the caller may see, with document counts, its latest run and its schedule."""
        return list(self._send(at, at.path())["sites"])

    @endpoint("POST", "/v1/sites")
    def add_site(self, at: Route, url: str, *, site_domain: str | None = None, every: str | None = None,
                 include: Sequence[str] = (), exclude: Sequence[str] = (), limit: int | None = None,
                 max_depth: int | None = None, delay: float | None = None, concurrency: int | None = None,
                 render: str | None = None) -> JSON:
        """Register (or replace) a site to crawl, as ``gleaner sites add`` does (the operator's)."""
        body = {"url": url, "site_domain": site_domain, "every": every, "include": list(include) or None,
                "exclude": list(exclude) or None, "limit": limit, "max_depth": max_depth, "delay": delay,
                "concurrency": concurrency, "render": render}
        return dict(self._send(at, at.path(), body={k: v for k, v in body.items() if v is not None}))

    @endpoint("POST", "/v1/sites/{site}/runs")
    def crawl(self, at: Route, site: str) -> JSON:
        """Start a crawl of a registered site now: ``{"run_id", "site_domain"}`` (follow it with ``run``)."""
        return dict(self._send(at, at.path(site=site), body={}))

    @endpoint("GET", "/v1/sites/{site}/tree")
    def tree(self, at: Route, site: str, prefix: str = "/", *, limit: int | None = None,
             offset: int | None = None) -> JSON:
        """One level of the site's path tree: folders with counts by status, and documents."""
        return dict(self._send(at, at.path(site=site), _query(prefix=prefix, limit=limit, offset=offset)))

    @endpoint("GET", "/v1/sites/{site}/documents")
    def documents(self, at: Route, site: str, *, status: str | None = None, policy: str | None = None,
                  origin: str | None = None, tag: str | None = None, prefix: str | None = None,
                  limit: int | None = None, offset: int | None = None) -> JSON:
        """One page of the site's documents: ``{"documents", "total", "limit", "offset"}``."""
        return dict(self._send(at, at.path(site=site), _query(status=status, policy=policy, origin=origin, tag=tag,
                                                              prefix=prefix, limit=limit, offset=offset)))

    def each_document(self, site: str, **filters: str | None) -> Iterator[JSON]:
        """Every document of the site that ``filters`` (as ``documents``) select, page by page."""
        offset = 0
        while True:
            page = self.documents(site, limit=PAGE, offset=offset, **filters)
            yield from page["documents"]
            offset += len(page["documents"])
            if not page["documents"] or offset >= page["total"]:
                return

    @endpoint("GET", "/v1/sites/{site}/export")
    def export(self, at: Route, site: str, *, spans: bool = False, raw: bool = False) -> Iterator[ExportRecord]:
        """The site's current documents, one record each in URL order, read while the server sends them
        (``gleaner export SITE DIR --format jsonl`` writes the same records). ``spans``: each text's span
        ledger; ``raw``: the whole page's markdown instead of the content. Raises :class:`ExportCut` if
        the stream stops early. Close the iterator (or read it to the end) to free the connection."""
        query = _query(format="jsonl", spans=spans or None, raw=raw or None)
        try:
            with self._http.stream(at.method, at.path(site=site), params=query) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _error(response)
                try:
                    for line in response.iter_lines():
                        if line:
                            yield cast(ExportRecord, json.loads(line))
                except httpx.TransportError as exc:
                    raise ExportCut(f"the export of {site} stopped before its end: {exc}") from exc
        except httpx.TransportError as exc:
            raise ServerUnreachable(f"GET {self.base_url}{at.path(site=site)}: {exc}") from exc

    # -- rules, review, conflicts -------------------------------------------------------------------

    @endpoint("GET", "/v1/sites/{site}/rules")
    def rules(self, at: Route, site: str) -> list[JSON]:
        """The site's skip, block and ignore-text rules."""
        return list(self._send(at, at.path(site=site))["rules"])

    @endpoint("POST", "/v1/sites/{site}/rules")
    def add_rule(self, at: Route, site: str, glob: str, action: str, *, pattern: str | None = None,
                 reason: str | None = None) -> JSON:
        """Add a rule and apply it (``action``: skip, block, or ignore_text with a ``pattern``)."""
        body = {"glob": glob, "action": action, "pattern": pattern, "reason": reason}
        return dict(self._send(at, at.path(site=site), body={k: v for k, v in body.items() if v is not None}))

    @endpoint("DELETE", "/v1/sites/{site}/rules/{rule}")
    def remove_rule(self, at: Route, site: str, rule_id: str) -> JSON:
        """Remove a rule and lift what it did."""
        return dict(self._send(at, at.path(site=site, rule=rule_id)))

    @endpoint("GET", "/v1/sites/{site}/review")
    def review(self, at: Route, site: str) -> list[JSON]:
        """Pages of the site's latest run that need a decision."""
        return list(self._send(at, at.path(site=site))["items"])

    @endpoint("POST", "/v1/sites/{site}/review")
    def decide(self, at: Route, site: str, url: str, decision: str, *, reason: str | None = None) -> JSON:
        """Settle a page under review: ``decision`` is include or exclude."""
        body = {"url": url, "decision": decision, "reason": reason}
        return dict(self._send(at, at.path(site=site), body={k: v for k, v in body.items() if v is not None}))

    @endpoint("GET", "/v1/sites/{site}/conflicts")
    def conflicts(self, at: Route, site: str, *, status: str | None = None) -> list[JSON]:
        """The site's conflicts (pages whose texts disagree), oldest first."""
        return list(self._send(at, at.path(site=site), _query(status=status))["conflicts"])

    @endpoint("POST", "/v1/sites/{site}/conflicts/{conflict}")
    def settle_conflict(self, at: Route, site: str, conflict_id: str, status: str) -> JSON:
        """Mark a conflict acknowledged, resolved or false_positive."""
        return dict(self._send(at, at.path(site=site, conflict=conflict_id), body={"status": status}))

    # -- runs -------------------------------------------------------------------------------------

    @endpoint("GET", "/v1/runs")
    def runs(self, at: Route, *, site: str | None = None, status: str | None = None, limit: int | None = None,
             offset: int | None = None) -> JSON:
        """One page of runs, newest first: ``{"runs": [RunSummary], "total", "limit", "offset"}``."""
        return dict(self._send(at, at.path(), _query(site=site, status=status, limit=limit, offset=offset)))

    @endpoint("GET", "/v1/runs/{run}")
    def run(self, at: Route, run_id: str) -> RunSummary:
        """A run's counters and per-outcome breakdown (live while it runs)."""
        return cast(RunSummary, self._send(at, at.path(run=run_id)))

    @endpoint("GET", "/v1/runs/{run}/urls")
    def run_urls(self, at: Route, run_id: str, *, status: str | None = None, limit: int | None = None,
                 offset: int | None = None) -> JSON:
        """One page of the run's URLs with their status and reason."""
        return dict(self._send(at, at.path(run=run_id), _query(status=status, limit=limit, offset=offset)))

    @endpoint("POST", "/v1/runs/{run}/cancel")
    def cancel_run(self, at: Route, run_id: str) -> JSON:
        """Cancel an active or interrupted run: ``{"run_id", "status", "cancelled"}``."""
        return dict(self._send(at, at.path(run=run_id), body={}))

    @endpoint("POST", "/v1/runs/{run}/resume")
    def resume_run(self, at: Route, run_id: str) -> JSON:
        """Finish a stopped run on the server (it answers at once; follow it with ``run``)."""
        return dict(self._send(at, at.path(run=run_id), body={}))

    @endpoint("POST", "/v1/runs/{run}/replay")
    def replay_run(self, at: Route, run_id: str) -> JSON:
        """A new run re-processing the run's pages from what is stored, fetching nothing:
        ``{"run_id", "replay_of"}`` (follow the new run with ``run``)."""
        return dict(self._send(at, at.path(run=run_id), body={}))

    # -- documents and versions -------------------------------------------------------------------

    @endpoint("GET", "/v1/documents/{document}")
    def document(self, at: Route, document_id: str) -> JSON:
        """A document: ``{"document", "versions", "citations", "current_text"}``."""
        return dict(self._send(at, at.path(document=document_id)))

    @endpoint("POST", "/v1/documents/{document}/rescrape")
    def rescrape(self, at: Route, document_id: str) -> JSON:
        """A run of just this page now (robots.txt, politeness apply): ``{"run_id", "site_domain", "url"}``."""
        return dict(self._send(at, at.path(document=document_id), body={}))

    @endpoint("GET", "/v1/documents/{document}/versions/{version}")
    def version(self, at: Route, document_id: str, number: int, *, raw: bool = False) -> JSON:
        """One version's markdown (``raw``: the whole page's): ``{"url", "version", "body", ...}``."""
        return dict(self._send(at, at.path(document=document_id, version=number), _query(raw=raw or None)))

    @endpoint("GET", "/v1/documents/{document}/diff")
    def diff(self, at: Route, document_id: str, *, from_version: int | None = None,
             to_version: int | None = None) -> JSON:
        """A unified diff of two versions (default: the one before the current, and the current)."""
        return dict(self._send(at, at.path(document=document_id),
                               _query(**{"from": from_version, "to": to_version})))

    @endpoint("GET", "/v1/changes")
    def changes(self, at: Route, *, site: str | None = None, since: str | None = None,
                limit: int | None = None) -> list[ChangeEvent]:
        """Change and run events, oldest first; ``since`` is an ISO 8601 time."""
        return cast(list[ChangeEvent], self._send(at, at.path(), _query(site=site, since=since, limit=limit))["events"])

    # -- notifications ----------------------------------------------------------------------------

    @endpoint("GET", "/v1/notify/subscriptions")
    def subscriptions(self, at: Route) -> list[JSON]:
        """Active subscriptions (never their secrets)."""
        return list(self._send(at, at.path())["subscriptions"])

    @endpoint("POST", "/v1/notify/subscriptions/{subscription}")
    def set_subscription_status(self, at: Route, subscription_id: str, status: str) -> JSON:
        """``status`` active or disabled (disabling cancels what is pending): the subscription as listed."""
        return dict(self._send(at, at.path(subscription=subscription_id), body={"status": status})["subscription"])

    @endpoint("GET", "/v1/notify/deliveries")
    def deliveries(self, at: Route, *, subscription: str | None = None, limit: int | None = None) -> list[JSON]:
        """The delivery log with every attempt, newest first."""
        return list(self._send(at, at.path(), _query(subscription=subscription, limit=limit))["deliveries"])

    @endpoint("POST", "/v1/notify/deliveries/{delivery}/retry")
    def retry_delivery(self, at: Route, delivery_id: str) -> JSON:
        """Attempt a pending or failed delivery now: ``{"delivery_id", "result"}``."""
        return dict(self._send(at, at.path(delivery=delivery_id), body={}))

    # -- composites -------------------------------------------------------------------------------

    @endpoint("GET", "/v1/sites/{site}/composites")
    def composites(self, at: Route, site: str) -> list[JSON]:
        """The site's composites with their lifecycle status and the legal next steps."""
        return list(self._send(at, at.path(site=site))["composites"])

    @endpoint("GET", "/v1/composites/{composite}")
    def composite(self, at: Route, composite_id: str) -> JSON:
        """One composite, its sources and the history of its moves."""
        return dict(self._send(at, at.path(composite=composite_id)))

    @endpoint("POST", "/v1/composites/{composite}")
    def move_composite(self, at: Route, composite_id: str, status: str, *, note: str | None = None) -> JSON:
        """One legal lifecycle step, recorded as the caller (an illegal one raises ApiError 409)."""
        body = {"status": status, **({"note": note} if note else {})}
        return dict(self._send(at, at.path(composite=composite_id), body=body))

    @endpoint("POST", "/v1/composites/{composite}/edit")
    def edit_composite(self, at: Route, composite_id: str, markdown: str, *, note: str | None = None) -> JSON:
        """The caller's edit as the composite's next version, ``edited`` until validated:
        ``{"composite", "history", "versions"}``."""
        body = {"markdown": markdown, **({"note": note} if note else {})}
        return dict(self._send(at, at.path(composite=composite_id), body=body))

    # -- reading the kept text --------------------------------------------------------------------

    @endpoint("GET", "/v1/search")
    def search(self, at: Route, query: str, *, site: str | None = None, limit: int | None = None) -> list[SearchHit]:
        """Ranked citable chunks, best first; each names the bytes ``text()`` returns verbatim."""
        return cast(list[SearchHit], self._send(at, at.path(), _query(q=query, site=site, limit=limit))["results"])

    # -- uploads and feedback (docs/uploads.md) -----------------------------------------------------

    @endpoint("POST", "/v1/ingest")
    def ingest(self, at: Route, site: str, *, text: str | None = None, format: str | None = None,
               url: str | None = None, path: str | None = None) -> JSON:
        """Upload inline ``text`` (with its ``format``: markdown, html, text) or the document at ``url`` into
        ``site``: ``{"job_id", …}`` (202); ``ingest_job`` says when it is searchable."""
        body = {"site": site, "text": text, "format": format, "url": url, "path": path}
        return dict(self._send(at, at.path(), body={k: v for k, v in body.items() if v is not None}))

    @endpoint("GET", "/v1/ingest/{job}")
    def ingest_job(self, at: Route, job_id: str) -> JSON:
        """An upload's job: ``{"status", "document_id", "version", "error", "conflicts", …}``."""
        return dict(self._send(at, at.path(job=job_id)))

    @endpoint("POST", "/v1/feedback")
    def feedback(self, at: Route, site: str, text: str, *, about: str | Mapping[str, Any] | None = None) -> JSON:
        """Keep ``text`` as a dated feedback document of ``site`` (``about``: a document id, or a search hit's
        ``{"text_hash", "start", "end"}``): ``{"document_id", "version", "conflicts"}`` (201)."""
        body: dict[str, Any] = {"site": site, "text": text, **({"about": about} if about is not None else {})}
        return dict(self._send(at, at.path(), body=body))

    @endpoint("GET", "/v1/documents/{document}/remarks")
    def remarks(self, at: Route, document_id: str) -> list[JSON]:
        """The document's comments and flags, oldest first, each with ``by``, ``at`` and ``version``."""
        return list(self._send(at, at.path(document=document_id))["remarks"])

    @endpoint("POST", "/v1/documents/{document}/remarks")
    def remark(self, at: Route, document_id: str, text: str, *, kind: str = "comment") -> JSON:
        """Keep a ``comment`` or a ``flag`` on the document as the caller's (201): the remark."""
        return dict(self._send(at, at.path(document=document_id), body={"kind": kind, "text": text})["remark"])

    @endpoint("GET", "/v1/texts/{text_hash}")
    def text(self, at: Route, text_hash: str, start: int | None = None, end: int | None = None) -> TextSlice:
        """Bytes [start, end) of a stored canonical text, verbatim (the whole text by default)."""
        return cast(TextSlice, self._send(at, at.path(text_hash=text_hash), _query(start=start, end=end)))

    @endpoint("GET", "/v1/quality")
    def quality(self, at: Route, *, kind: str | None = None, since: str | None = None, limit: int | None = None,
                offset: int | None = None) -> JSON:
        """The ingestion quality log, newest first (the operator's only)."""
        return dict(self._send(at, at.path(), _query(kind=kind, since=since, limit=limit, offset=offset)))

    @endpoint("GET", "/v1/openapi.json")
    def openapi(self, at: Route) -> JSON:
        """The server's OpenAPI 3.1 document (what this client is checked against)."""
        return dict(self._send(at, at.path()))

    def each_run(self, **filters: str | None) -> Iterator[RunSummary]:
        """Every run that ``filters`` (as ``runs``) select, newest first, page by page."""
        offset = 0
        while True:
            page = self.runs(limit=PAGE, offset=offset, **filters)
            yield from page["runs"]
            offset += len(page["runs"])
            if not page["runs"] or offset >= page["total"]:
                return


Gleaner.ROUTES = routes_of(Gleaner)
