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
    /v1/documents/{doc}                            the document, its fetch facts, versions, citations, current text
    /v1/documents/{doc}/versions/{n}?raw=1         one version's content.md (raw.md with raw=1)
    /v1/documents/{doc}/diff?from&to               unified diff and side-by-side rows of two versions
    /v1/changes?site&since&limit                   change events, oldest first
    /v1/notify/subscriptions                       subscriptions (never their secrets)
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
    /v1/quality?kind&since&limit&offset            the ingestion quality log, newest first (operator only)
    /v1/openapi.json                               this API as OpenAPI 3.1, from the route table below
    /v1/search?q&site&limit                        ranked citable chunks (backoffice/searchapi.py)

``/v1/texts/{text_hash}`` (slices of canonical text) is the ingest webhook's
route (``gleaner.textsapi``), not this module's.

Errors are ``{"error": ...}``: 400 bad input (every query value is checked),
403 an operator-only route asked with a site token, 404 unknown path or object
(or another tenant's: the same answer, so a site token learns nothing of the
others), 405 wrong method, 409 a run that cannot be cancelled or resumed now.
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
from gleaner.changes import delivery
from gleaner.changes.diff import diff_versions, previous_version
from gleaner.errors import InvalidInput
from gleaner.operator import sites as operator_sites
from gleaner.runstate import RunStatus
from gleaner.store import browse
from gleaner.store.deliveries import Requeue

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


def get_runs(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    site = req.query.get("site") or None
    if site is not None and not valid_site_domain(site):
        raise HttpError(400, "site must be a site domain")
    status = choice_arg(req.query, "status", tuple(RunStatus))
    limit, offset = page_args(req.query)
    ids, total = deps.browse.run_ids(site, limit, offset, status)
    runs = [s for s in (deps.metadata.run_summary(i) for i in ids) if s is not None]
    return {"runs": runs, "total": total, "limit": limit, "offset": offset}


def find_run(deps: Deps, run_id: str) -> dict[str, Any]:
    summary = deps.metadata.run_summary(check_uuid(run_id, "run"))
    if summary is None:
        raise HttpError(404, f"no run {run_id}")
    return summary


def get_run(deps: Deps, req: ApiRequest, run_id: str) -> dict[str, Any]:
    summary = find_run(deps, run_id)
    return {**summary, "outcomes": deps.metadata.outcome_breakdown(summary["run_id"])}


def get_run_urls(deps: Deps, req: ApiRequest, run_id: str) -> dict[str, Any]:
    summary = find_run(deps, run_id)
    limit, offset = page_args(req.query)
    status = req.query.get("status") or None
    if status is not None and not re.fullmatch(r"[a-z_-]{1,40}", status):
        raise HttpError(400, "status must be a URL status such as fetched, not-modified or exclude")
    urls, total = deps.browse.run_urls_page(summary["run_id"], status, limit, offset)
    return {"run_id": summary["run_id"], "urls": urls, "total": total, "limit": limit, "offset": offset}


def _document(deps: Deps, document_id: str) -> dict[str, Any]:
    doc = deps.browse.document(check_uuid(document_id, "document"))
    if doc is None:
        raise HttpError(404, f"no document {document_id}")
    return doc


def get_document(deps: Deps, req: ApiRequest, document_id: str) -> dict[str, Any]:
    doc = _document(deps, document_id)
    versions = deps.metadata.snapshots_of(doc["id"])
    for v in versions:
        v["current"] = v["id"] == doc["current_snapshot_id"]
    text = deps.provenance.current_text(doc["id"])  # the citable bytes: what /v1/texts/{text_hash} slices
    current_text = {"text_hash": text.text_hash, "version": text.version, "length": len(text.body)} if text else None
    return {"document": doc, "versions": versions, "citations": deps.browse.citations_of(doc["id"]),
            "current_text": current_text}


def _version(deps: Deps, doc: dict[str, Any], number: int) -> dict[str, Any]:
    for v in deps.metadata.snapshots_of(doc["id"]):
        if v["version"] == number:
            return v
    raise HttpError(404, f"{doc['url']} has no version {number}")


def read_body(deps: Deps, ref: str | None) -> str:
    if not ref:
        return ""
    try:
        return deps.blobs.get(ref).decode("utf-8", errors="replace")
    except KeyError:  # the blob port's "absent": pruned or erased
        raise HttpError(404, f"the body {ref} is no longer in the blob store") from None


def get_version(deps: Deps, req: ApiRequest, document_id: str, number: str) -> dict[str, Any]:
    doc = _document(deps, document_id)
    if not re.fullmatch(r"[0-9]{1,9}", number):
        raise HttpError(400, "the version must be a positive integer")
    raw = req.query.get("raw", "0")
    if raw not in ("0", "1"):
        raise HttpError(400, "raw must be 0 or 1")
    version = _version(deps, doc, int(number))
    ref = version["raw_ref"] if raw == "1" else version["content_ref"]
    return {"document_id": doc["id"], "url": doc["url"], "version": version["version"], "raw": raw == "1",
            "body": read_body(deps, ref)}


def document_diff(deps: Deps, doc: dict[str, Any], from_version: int | None, to_version: int | None
                  ) -> dict[str, Any]:
    """``diff --json``'s shape plus side-by-side rows; defaults as ``gleaner diff``: previous -> current."""
    from gleaner.backoffice.sidebyside import side_by_side

    versions = deps.metadata.snapshots_of(doc["id"])
    if to_version is None:
        current = next((v for v in versions if v["id"] == doc["current_snapshot_id"]), None)
        if current is None:
            raise HttpError(404, f"{doc['url']} has no version yet")
        to_version = int(current["version"])
        if from_version is None:
            from_version = previous_version(versions, doc["current_snapshot_id"])
    new = _version(deps, doc, to_version)
    old = _version(deps, doc, from_version) if from_version is not None else None
    old_body = read_body(deps, old["content_ref"]) if old else ""
    new_body = read_body(deps, new["content_ref"])
    result = diff_versions(doc["url"], old_body, new_body, from_version, to_version).to_dict()
    result["rows"] = [r.to_dict() for r in side_by_side(old_body, new_body)]
    return result


def get_diff(deps: Deps, req: ApiRequest, document_id: str) -> dict[str, Any]:
    doc = _document(deps, document_id)
    from_version = int_arg(req.query, "from", None, 1)
    to_version = int_arg(req.query, "to", None, 1)
    return {"document_id": doc["id"], "url": doc["url"], **document_diff(deps, doc, from_version, to_version)}


def get_changes(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    site = req.query.get("site") or None
    if site is not None and not valid_site_domain(site):
        raise HttpError(400, "site must be a site domain")
    since = time_arg(req.query, "since")
    limit = int_arg(req.query, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    assert limit is not None
    events = deps.metadata.list_events(site=site, since=since, limit=limit)
    return {"events": [e.to_dict() for e in events]}


def get_subscriptions(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    return {"subscriptions": [s.public() for s in deps.metadata.active_subscriptions()]}


def get_deliveries(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    sub = req.query.get("subscription") or None
    if sub is not None:
        sub = check_uuid(sub, "subscription")
    limit = int_arg(req.query, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    assert limit is not None
    if req.access.is_operator:
        return {"deliveries": deps.metadata.delivery_log(sub, limit)}
    # Deliveries carry no site: a site sees those of its own subscriptions (row-level security on those).
    own = {s.id for s in deps.metadata.active_subscriptions()}
    if sub is not None and sub not in own:
        raise HttpError(404, f"no subscription {sub}")
    found = [d for s in ([sub] if sub else sorted(own)) for d in deps.metadata.delivery_log(s, limit)]
    found.sort(key=lambda d: (d["created_at"], d["id"]), reverse=True)
    return {"deliveries": found[:limit]}


def post_retry(deps: Deps, req: ApiRequest, delivery_id: str) -> dict[str, Any]:
    delivery_id = check_uuid(delivery_id, "delivery")
    visible = deps.browse.delivery_subscription(delivery_id) is not None
    requeued = deps.metadata.requeue_delivery(delivery_id) if visible else Requeue.NOT_FOUND
    if requeued is Requeue.SUBSCRIPTION_REMOVED:
        raise HttpError(409, "its subscription was removed: nothing is sent to it any more")
    if requeued is not Requeue.REQUEUED:
        raise HttpError(404, f"no pending or failed delivery {delivery_id}")
    result = delivery.attempt(deps, delivery_id, due_only=False)
    return {"delivery_id": delivery_id, "result": result.value}




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


# Operating and steering handlers live in their own modules, which build on this one (imported here, last).
from gleaner.backoffice import operate  # noqa: E402
from gleaner.backoffice.exportapi import get_export  # noqa: E402
from gleaner.backoffice.steering import (  # noqa: E402  (re-exported: the pages and tests call them as api.X)
    delete_rule,
    get_conflicts,
    get_quality,
    get_review,
    get_rules,
    post_cancel,
    post_conflict,
    post_resume,
    post_review,
    post_rule,
)

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
    "/v1/documents/{document}": {"GET": get_document},
    "/v1/documents/{document}/versions/{version}": {"GET": get_version},
    "/v1/documents/{document}/diff": {"GET": get_diff},
    "/v1/changes/?": {"GET": get_changes},
    "/v1/notify/subscriptions/?": {"GET": get_subscriptions},
    "/v1/notify/deliveries/?": {"GET": get_deliveries},
    "/v1/notify/deliveries/{delivery}/retry": {"POST": post_retry},
    "/v1/sites/{site}/rules/?": {"GET": get_rules, "POST": post_rule},
    "/v1/sites/{site}/rules/{rule}": {"DELETE": delete_rule},
    "/v1/sites/{site}/review/?": {"GET": get_review, "POST": post_review},
    "/v1/sites/{site}/conflicts/?": {"GET": get_conflicts},
    "/v1/sites/{site}/conflicts/{conflict}": {"POST": post_conflict},
    "/v1/quality/?": {"GET": get_quality},
    "/v1/openapi.json": {"GET": get_openapi},
    "/v1/search/?": {"GET": lambda deps, req: _search(deps, req)},
}
ROUTES = compile_routes(_API)


def dispatch(req: ApiRequest, deps: Deps) -> tuple[int, dict[str, Any] | Stream]:
    """The route's answer: a JSON object, or a :class:`Stream` whose first chunk is already made (so its
    errors are still answers: a stream that fails later is cut)."""
    found = find_route(ROUTES, req.path)
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
