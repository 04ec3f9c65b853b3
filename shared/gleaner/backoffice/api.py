"""The back office's JSON API under ``/v1/``: framework-free, a request in and ``(status, json)`` out.

Routes (GET unless marked)::

    /v1/sites                                      sites with document counts, latest run and schedule
    /v1/sites/{site}/tree?prefix=/a/&limit&offset  one level: folders (counts by status) and documents
    /v1/sites/{site}/documents?status&policy&origin&tag&prefix&limit&offset
    /v1/sites/{site}/export?format&spans&raw       the current documents as JSON Lines, streamed (exportapi.py)
    /v1/runs?site&status&limit&offset              newest first, with counters
    POST /v1/sites                                 create or replace a site (backoffice/operate.py)
    POST /v1/sites/{site}/runs                     202: crawl the registered site now
    /v1/runs/{run}                                 counters and the per-outcome breakdown (live while running)
    /v1/runs/{run}/urls?status&limit&offset        each URL with its status and reason
    POST /v1/runs/{run}/cancel                     cancel an active or interrupted run
    POST /v1/runs/{run}/resume                     202: take a stopped run over and finish it in the background
    POST /v1/runs/{run}/replay                     202: a new run re-processing its pages from stored bodies
    /v1/documents/{doc}                            the document, its fetch facts, versions, citations, current text
    POST /v1/documents/{doc}/rescrape              202: a run of this one URL now (robots.txt, politeness apply)
    /v1/documents/{doc}/versions/{n}?raw=1         one version's content.md (raw.md with raw=1)
    /v1/documents/{doc}/diff?from&to               unified diff and side-by-side rows of two versions
    /v1/changes?site&since&limit                   change events, oldest first
    /v1/notify/subscriptions                       subscriptions (never their secrets), disabled ones too
    POST /v1/notify/subscriptions/{id}             {"status": "active"|"disabled"}: disabling cancels what is pending
    /v1/notify/deliveries?subscription&limit       the delivery log with every attempt
    POST /v1/notify/deliveries/{id}/retry          attempt a pending or failed delivery now
    /v1/sites/{site}/rules                         the site's skip and block rules
    POST /v1/sites/{site}/rules                    {"glob", "action": "skip"|"block"|"ignore_text", "pattern"?,
                                                   "reason"?}: add and apply
    DELETE /v1/sites/{site}/rules/{id}             remove a rule and lift what it did
    /v1/sites/{site}/review                        pages of the latest run that need review
    POST /v1/sites/{site}/review                   {"url", "decision": "include"|"exclude", "reason"?}
    /v1/sites/{site}/conflicts?status              the site's conflicts, oldest first
    POST /v1/sites/{site}/conflicts/{id}           {"status": "acknowledged"|"resolved"|"false_positive"}
    /v1/sites/{site}/composites                    the site's composites with their lifecycle status
    /v1/composites/{id}                            one composite, its sources and the history of its moves
    POST /v1/composites/{id}                       {"status", "note"?}: one legal lifecycle move, as the caller
    /v1/quality?kind&since&limit&offset            the ingestion quality log, newest first (operator only)
    /v1/openapi.json                               this API as OpenAPI 3.1, from the route table below
    /v1/search?q&site&limit                        ranked citable chunks (backoffice/searchapi.py)
    POST /v1/ingest                                202: an upload (multipart file, {"url"} or {"text", "format"})
    /v1/ingest/{job}                               the upload's job: status, document, version, error, conflicts
    POST /v1/feedback                              201: {"site", "text", "about"?} kept as a feedback document
    /v1/documents/{doc}/remarks                    the document's comments and flags, with who and when
    POST /v1/documents/{doc}/remarks               201: {"kind": "comment"|"flag", "text"}, kept as the caller's
    POST /v1/composites/{id}/edit                  201: {"markdown", "note"?}: the caller's edit, a new version

``/v1/texts/{text_hash}`` (slices of canonical text) is the ingest webhook's
route (``gleaner.serving.textsapi``), not this module's.

Errors are ``{"error": ...}``: 400 bad input (every query value is checked),
403 an operator-only route asked with a site token, 404 unknown path or object
(or another tenant's: the same answer, so a site token learns nothing of the
others), 405 wrong method, 409 a run that cannot be cancelled or resumed now, a composite move
that is not legal from its status, a retry to a removed or disabled subscription.
Authentication is the WSGI layer's (``wsgi.py``): it runs each request under
the caller's tenant scope, so row-level security hides other tenants' rows
from every read here; ``ApiRequest.access`` names the caller for the few
checks that are not about rows.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from gleaner.app import Deps
from gleaner.backoffice.request import (  # noqa: F401  (re-exported: handlers elsewhere and tests take them from here)
    DEFAULT_PAGE,
    MAX_INT_ARG,
    MAX_PAGE,
    OPERATOR,
    Access,
    Answer,
    ApiRequest,
    HttpError,
    Stream,
    check_site,
    check_uuid,
    choice_arg,
    choice_field,
    int_arg,
    json_body,
    operator_only,
    page_args,
    prefix_arg,
    text_field,
    time_arg,
    valid_site_domain,
)
from gleaner.errors import InvalidInput
from gleaner.operator import sites as operator_sites
from gleaner.store import browse

log = logging.getLogger(__name__)


# -- handlers -----------------------------------------------------------------------------------

def get_sites(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    """Sites with documents or runs, and sites registered for scheduled crawls (``schedule``)."""
    registered = {s.site_domain: s for s in operator_sites.list_sites(deps)}
    out = deps.browse.sites()
    known = {s["site_domain"] for s in out}
    out += [{"site_domain": name, "documents": 0, "active": 0, "last_run": None}
            for name in registered if name not in known]
    for site in out:
        found = registered.get(site["site_domain"])
        site["schedule"] = {"every": found.every, "next_run_at": found.next_run_at,
                            "target_url": found.target_url} if found else None
    return {"sites": sorted(out, key=lambda s: s["site_domain"])}


def get_tree(deps: Deps, req: ApiRequest, site: str) -> dict[str, Any]:
    site = check_site(deps, site)
    prefix = prefix_arg(req.query)
    limit, offset = page_args(req.query)
    docs, total = deps.browse.documents(site, prefix=prefix, direct_only=True, limit=limit, offset=offset)
    return {"site_domain": site, "prefix": prefix, "folders": deps.browse.tree_folders(site, prefix),
            "documents": docs, "total_documents": total, "limit": limit, "offset": offset}


def get_documents(deps: Deps, req: ApiRequest, site: str) -> dict[str, Any]:
    site = check_site(deps, site)
    q = req.query
    limit, offset = page_args(q)
    status = choice_arg(q, "status", browse.DOCUMENT_STATUSES)
    policy = choice_arg(q, "policy", browse.SCRAPE_POLICIES)
    origin = choice_arg(q, "origin", browse.DOCUMENT_ORIGINS)
    prefix = prefix_arg(q) if q.get("prefix") else None
    docs, total = deps.browse.documents(site, status=status, policy=policy, origin=origin,
                                   tag=q.get("tag") or None, prefix=prefix, limit=limit, offset=offset)
    return {"site_domain": site, "documents": docs, "total": total, "limit": limit, "offset": offset}


def get_changes(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    site = req.query.get("site") or None
    if site is not None and not valid_site_domain(site):
        raise HttpError(400, "site must be a site domain")
    since = time_arg(req.query, "since")
    limit = int_arg(req.query, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    assert limit is not None
    events = deps.metadata.list_events(site=site, since=since, limit=limit)
    return {"events": [e.to_dict() for e in events]}


def get_openapi(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    """This API described as OpenAPI 3.1, generated from the route table below (``openapi.py``)."""
    from gleaner.backoffice.openapi import document

    return document()


def _search(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    from gleaner.backoffice.searchapi import get_search  # retrieval's own module (it imports this one)

    return get_search(deps, req)


H = TypeVar("H")
Handler = Callable[..., dict[str, Any] | Answer | Stream]


def compile_routes(table: Mapping[str, dict[str, H]]) -> list[tuple[re.Pattern[str], dict[str, H]]]:
    """``{"/v1/runs/{run}": {"GET": fn}}`` as patterns: each ``{name}`` is one path segment (pages use it too)."""
    return [(re.compile(re.sub(r"\{[a-z_]+\}", "([^/]+)", path)), methods) for path, methods in table.items()]


def find_route(routes: list[tuple[re.Pattern[str], dict[str, H]]], path: str
               ) -> tuple[dict[str, H], tuple[str, ...]] | None:
    """The methods of the first route matching the whole path, and the path's segments it names."""
    for pattern, methods in routes:
        match = pattern.fullmatch(path)
        if match:
            return methods, match.groups()
    return None


# Handlers of other concerns live in their own modules, which build on this one's helpers (imported here,
# last); the ones pages, tools and tests call as ``api.X`` are re-exported.
from gleaner.backoffice import compositesapi, operate  # noqa: E402
from gleaner.backoffice.documentsapi import (  # noqa: E402
    document_diff,
    get_diff,
    get_document,
    get_version,
    read_body,
)
from gleaner.backoffice.exportapi import get_export  # noqa: E402
from gleaner.backoffice.notifyapi import (  # noqa: E402
    get_deliveries,
    get_subscriptions,
    post_retry,
    post_subscription,
)
from gleaner.backoffice.originsapi import (  # noqa: E402
    get_ingest,
    get_remarks,
    post_feedback,
    post_ingest,
    post_remark,
)
from gleaner.backoffice.runsapi import (  # noqa: E402
    get_run,
    get_run_urls,
    get_runs,
    post_cancel,
    post_replay,
    post_resume,
)
from gleaner.backoffice.steering import (  # noqa: E402
    delete_rule,
    get_conflicts,
    get_quality,
    get_review,
    get_rules,
    post_conflict,
    post_review,
    post_rule,
)

__all__ = ["delete_rule", "document_diff", "get_conflicts", "get_deliveries", "get_diff", "get_document",
           "get_quality", "get_review", "get_rules", "get_run", "get_run_urls", "get_runs", "get_subscriptions",
           "get_version", "post_cancel", "post_conflict", "post_replay", "post_resume", "post_retry",
           "post_review", "post_rule", "read_body"]

_API: dict[str, dict[str, Handler]] = {
    "/v1/sites/?": {"GET": get_sites, "POST": operate.post_site},
    "/v1/sites/{site}/runs": {"POST": operate.post_site_run},
    "/v1/sites/{site}/tree": {"GET": get_tree},
    "/v1/sites/{site}/documents": {"GET": get_documents},
    "/v1/sites/{site}/export": {"GET": get_export},
    "/v1/runs/?": {"GET": get_runs},
    "/v1/runs/{run}": {"GET": get_run},
    "/v1/runs/{run}/urls": {"GET": get_run_urls},
    "/v1/runs/{run}/cancel": {"POST": post_cancel},
    "/v1/runs/{run}/resume": {"POST": post_resume},
    "/v1/runs/{run}/replay": {"POST": post_replay},
    "/v1/documents/{document}": {"GET": get_document},
    "/v1/documents/{document}/rescrape": {"POST": operate.post_rescrape},
    "/v1/documents/{document}/versions/{version}": {"GET": get_version},
    "/v1/documents/{document}/diff": {"GET": get_diff},
    "/v1/changes/?": {"GET": get_changes},
    "/v1/notify/subscriptions/?": {"GET": get_subscriptions},
    "/v1/notify/subscriptions/{subscription}": {"POST": post_subscription},
    "/v1/notify/deliveries/?": {"GET": get_deliveries},
    "/v1/notify/deliveries/{delivery}/retry": {"POST": post_retry},
    "/v1/sites/{site}/rules/?": {"GET": get_rules, "POST": post_rule},
    "/v1/sites/{site}/rules/{rule}": {"DELETE": delete_rule},
    "/v1/sites/{site}/review/?": {"GET": get_review, "POST": post_review},
    "/v1/sites/{site}/conflicts/?": {"GET": get_conflicts},
    "/v1/sites/{site}/conflicts/{conflict}": {"POST": post_conflict},
    "/v1/sites/{site}/composites/?": {"GET": compositesapi.get_composites},
    "/v1/composites/{composite}": {"GET": compositesapi.get_composite,
                                      "POST": compositesapi.post_composite},
    "/v1/quality/?": {"GET": get_quality},
    "/v1/openapi.json": {"GET": get_openapi},
    "/v1/search/?": {"GET": lambda deps, req: _search(deps, req)},
    "/v1/ingest/?": {"POST": post_ingest},
    "/v1/ingest/{job}": {"GET": get_ingest},
    "/v1/feedback/?": {"POST": post_feedback},
    "/v1/documents/{document}/remarks/?": {"GET": get_remarks, "POST": post_remark},
    "/v1/composites/{composite}/edit": {"POST": compositesapi.post_edit},
}
ROUTES = compile_routes(_API)


def dispatch(req: ApiRequest, deps: Deps) -> tuple[int, dict[str, Any] | Stream]:
    """The route's answer: a JSON object, or a :class:`Stream` whose first chunk is already made (so its
    errors are still answers: a stream that fails later is cut)."""
    from gleaner.backoffice import shortids

    try:
        path = shortids.expand(deps, req.path)
    except HttpError as exc:
        return exc.status, {"error": exc.message}
    found = find_route(ROUTES, path)
    if found is None:
        return 404, {"error": f"no such endpoint {req.path[:200]}"}
    methods, args = found
    method = "GET" if req.method == "HEAD" else req.method
    fn = methods.get(method)
    if fn is None:
        return 405, {"error": f"use {' or '.join(methods)}"}
    try:
        answer = fn(deps, req, *args)
        if isinstance(answer, Stream):
            return 200, Stream(_primed(answer.chunks), answer.content_type)
        return answer if isinstance(answer, tuple) else (200, answer)
    except HttpError as exc:
        return exc.status, {"error": exc.message}
    except InvalidInput as exc:  # the operator functions' own checks (a glob, a URL not in the site)
        return 400, {"error": str(exc)}


def _primed(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks`` with its first chunk made now (raising here, inside dispatch's error mapping)."""
    first = next(chunks, None)

    def rest() -> Iterator[bytes]:
        try:
            if first is not None:
                yield first
            yield from chunks
        finally:
            getattr(chunks, "close", lambda: None)()

    return rest()


def handle(req: ApiRequest, deps: Deps) -> Answer:
    """A JSON answer, for callers in this process (the pages, the MCP tools): a streamed route is not theirs."""
    status, answer = dispatch(req, deps)
    if isinstance(answer, Stream):
        answer.close()
        return 406, {"error": "this route streams its answer: ask it over HTTP"}
    return status, answer
