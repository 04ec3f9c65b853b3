"""The back office's JSON API under ``/v1/``: framework-free, a request in and ``(status, json)`` out.

Routes (GET unless marked)::

    /v1/sites                                      sites with document counts, latest run and schedule
    /v1/sites/{site}/tree?prefix=/a/&limit&offset  one level: folders (counts by status) and documents
    /v1/sites/{site}/documents?status&policy&origin&tag&prefix&limit&offset
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

``/v1/texts/{text_hash}`` (slices of canonical text) is the ingest webhook's
route (``gleaner.textsapi``), not this module's.

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

import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from gleaner.app import Deps
from gleaner.errors import InvalidInput
from gleaner.operator import review, rules
from gleaner.operator import sites as operator_sites
from gleaner.provenance.conflicts import ConflictStatus
from gleaner.store import browse
from gleaner.store.references import QUALITY_FLAGS
from gleaner.textcheck import text_problem

log = logging.getLogger(__name__)

Answer = tuple[int, dict[str, Any]]

MAX_PAGE = 1000
DEFAULT_PAGE = 100
# Past any table this holds and inside PostgreSQL's integer: a larger offset or version is bad input.
MAX_INT_ARG = 2**31 - 1


def valid_site_domain(value: str) -> bool:
    """DESIGN.md's tenant key, exactly as written (no case folding: a URL names one site)."""
    try:
        return operator_sites.site_key(value) == value
    except InvalidInput:
        return False


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Access:
    """Who a request acts for: the operator (every tenant) or one site (a site-bound token)."""

    site_domain: str | None = None
    session: bool = False  # acting through a browser login session (the pages offer a logout)

    @property
    def is_operator(self) -> bool:
        return self.site_domain is None

    @property
    def actor(self) -> str:
        """Who did it, as a history records it: the credential (Gleaner's callers are not users)."""
        return "operator" if self.site_domain is None else f"site token for {self.site_domain}"


OPERATOR = Access()


@dataclass(frozen=True, slots=True)
class ApiRequest:
    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    access: Access = OPERATOR


def operator_only(req: ApiRequest) -> None:
    if not req.access.is_operator:
        raise HttpError(403, "only the operator may read this; a site token sees its own site")


# -- query values -------------------------------------------------------------------------------

def int_arg(query: Mapping[str, str], name: str, default: int | None, low: int = 0, high: int | None = None
            ) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    # int() also takes other scripts' digits and "1_000"; a query value is plain ASCII decimal digits.
    if not re.fullmatch(r"-?[0-9]{1,10}", raw):
        raise HttpError(400, f"{name} must be an integer, not {raw[:40]!r}")
    value = int(raw)
    top = MAX_INT_ARG if high is None else high
    if value < low or value > top:
        raise HttpError(400, f"{name} must be between {low} and {top}")
    return value


def page_args(query: Mapping[str, str]) -> tuple[int, int]:
    limit = int_arg(query, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    offset = int_arg(query, "offset", 0, 0)
    assert limit is not None and offset is not None
    return limit, offset


def choice_arg(query: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    value = query.get(name) or None
    if value is not None and value not in allowed:
        raise HttpError(400, f"{name} must be one of {', '.join(allowed)}")
    return value


def time_arg(query: Mapping[str, str], name: str) -> datetime | None:
    if not query.get(name):
        return None
    try:
        value = datetime.fromisoformat(query[name])
        # Near the ends of the calendar an offset moves the instant out of it (year 0 or 10000): the
        # database cannot hold that, so it is refused here. A time without an offset is UTC.
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        raise HttpError(400, f"{name} must be an ISO 8601 time between the years 1 and 9999") from None


def prefix_arg(query: Mapping[str, str]) -> str:
    prefix = query.get("prefix") or "/"
    if not prefix.startswith("/") or len(prefix) > 2048:
        raise HttpError(400, "prefix must be a path starting with '/'")
    return prefix if prefix.endswith("/") else prefix + "/"


def check_uuid(value: str, what: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise HttpError(404, f"no {what} {value[:60]}") from None


def check_site(deps: Deps, site: str) -> str:
    if not valid_site_domain(site) or not (deps.browse.site_exists(site)
                                           or operator_sites.find_site(deps, site) is not None):
        raise HttpError(404, f"no site {site[:80]}")
    return site


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


def json_body(req: ApiRequest) -> dict[str, Any]:
    try:
        body = json.loads(req.body or b"{}")
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise HttpError(400, "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise HttpError(400, "the body must be a JSON object")
    problem = text_problem(body)
    if problem:
        raise HttpError(400, f"the body {problem}")
    return body


def text_field(body: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 2048:
        raise HttpError(400, f"{name} must be a non-empty string")
    return value


def choice_field(body: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    value = body.get(name)
    if value not in allowed:
        raise HttpError(400, f"{name} must be one of {', '.join(allowed)}")
    return str(value)


def get_rules(deps: Deps, req: ApiRequest, site: str) -> dict[str, Any]:
    site = check_site(deps, site)
    return {"site_domain": site, "rules": [r.to_dict() for r in rules.list_rules(deps, site)]}


def post_rule(deps: Deps, req: ApiRequest, site: str) -> dict[str, Any]:
    site = check_site(deps, site)
    body = json_body(req)
    rule, applied = rules.add_rule(deps, site, str(text_field(body, "glob")),
                                   choice_field(body, "action", ("skip", "block", "ignore_text")),
                                   text_field(body, "reason", False), text_field(body, "pattern", False))
    return {"rule": rule.to_dict(), "applied": applied.to_dict()}


def delete_rule(deps: Deps, req: ApiRequest, site: str, rule_id: str) -> dict[str, Any]:
    site = check_site(deps, site)
    rule_id = check_uuid(rule_id, "rule")
    if rule_id not in {r.id for r in rules.list_rules(deps, site)}:
        raise HttpError(404, f"no rule {rule_id} on {site}")
    rule, applied = rules.remove_rule(deps, rule_id)
    return {"rule": rule.to_dict(), "applied": applied.to_dict()}


def get_review(deps: Deps, req: ApiRequest, site: str) -> dict[str, Any]:
    site = check_site(deps, site)
    return {"site_domain": site, "items": [i.to_dict() for i in review.review_list(deps, site)]}


def post_review(deps: Deps, req: ApiRequest, site: str) -> dict[str, Any]:
    site = check_site(deps, site)
    body = json_body(req)
    decided = review.decide(deps, str(text_field(body, "url")), choice_field(body, "decision", ("include", "exclude")),
                            site_domain=site, reason=text_field(body, "reason", False))
    return {"decided": decided.to_dict()}


def get_conflicts(deps: Deps, req: ApiRequest, site: str) -> dict[str, Any]:
    site = check_site(deps, site)
    status = choice_arg(req.query, "status", tuple(s.value for s in ConflictStatus))
    conflicts = deps.provenance.list_conflicts(site, ConflictStatus(status) if status else None)
    return {"site_domain": site, "conflicts": conflicts}


def post_conflict(deps: Deps, req: ApiRequest, site: str, conflict_id: str) -> dict[str, Any]:
    site = check_site(deps, site)
    conflict_id = check_uuid(conflict_id, "conflict")
    settled = tuple(s.value for s in ConflictStatus if s is not ConflictStatus.OPEN)
    status = choice_field(json_body(req), "status", settled)
    if conflict_id not in {c["id"] for c in deps.provenance.list_conflicts(site)}:
        raise HttpError(404, f"no conflict {conflict_id} on {site}")
    deps.provenance.set_conflict_status(conflict_id, ConflictStatus(status))
    return {"conflict_id": conflict_id, "status": status}


def get_quality(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    """Feed URLs the landing refused or could not use (``references/landing.py``): the operator's, not a site's."""
    operator_only(req)
    kind = choice_arg(req.query, "kind", QUALITY_FLAGS)
    since = time_arg(req.query, "since")
    limit, offset = page_args(req.query)
    rows, total = deps.browse.quality_log(kind, since, limit, offset)
    return {"entries": rows, "total": total, "limit": limit, "offset": offset}


def get_openapi(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    """This API described as OpenAPI 3.1, generated from the route table below (``openapi.py``)."""
    from gleaner.backoffice.openapi import document

    return document()


def _search(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    from gleaner.backoffice.searchapi import get_search  # retrieval's own module (it imports this one)

    return get_search(deps, req)


H = TypeVar("H")
Handler = Callable[..., dict[str, Any] | Answer]


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
# last); the ones pages and tools call as ``api.X`` are re-exported.
from gleaner.backoffice import compositesapi, operate  # noqa: E402
from gleaner.backoffice.documentsapi import (  # noqa: E402
    document_diff,
    get_diff,
    get_document,
    get_version,
    read_body,
)
from gleaner.backoffice.notifyapi import (  # noqa: E402
    get_deliveries,
    get_subscriptions,
    post_retry,
    post_subscription,
)
from gleaner.backoffice.runsapi import (  # noqa: E402
    get_run,
    get_run_urls,
    get_runs,
    post_cancel,
    post_replay,
    post_resume,
)

__all__ = ["document_diff", "get_deliveries", "get_diff", "get_document", "get_run", "get_run_urls", "get_runs",
           "get_subscriptions", "get_version", "post_cancel", "post_replay", "post_resume", "post_retry", "read_body"]

_API: dict[str, dict[str, Handler]] = {
    "/v1/sites/?": {"GET": get_sites, "POST": operate.post_site},
    "/v1/sites/{site}/runs": {"POST": operate.post_site_run},
    "/v1/sites/{site}/tree": {"GET": get_tree},
    "/v1/sites/{site}/documents": {"GET": get_documents},
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
}
ROUTES = compile_routes(_API)


def handle(req: ApiRequest, deps: Deps) -> Answer:
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
        return answer if isinstance(answer, tuple) else (200, answer)
    except HttpError as exc:
        return exc.status, {"error": exc.message}
    except InvalidInput as exc:  # the operator functions' own checks (a glob, a URL not in the site)
        return 400, {"error": str(exc)}
