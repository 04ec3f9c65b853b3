"""Steering a site over ``/v1/``: its rules, its review queue and its conflicts (runs: ``runsapi.py``).

Every handler reads and writes in the caller's tenant scope (``wsgi.py``), so a site token steers its
own site only; another site's objects answer 404. The quality log is the operator's alone.
"""

from __future__ import annotations

import logging
from typing import Any

from gleaner.app import Deps
from gleaner.backoffice.request import (
    ApiRequest,
    HttpError,
    check_site,
    check_uuid,
    choice_arg,
    choice_field,
    json_body,
    operator_only,
    page_args,
    text_field,
    time_arg,
)
from gleaner.operator import review, rules
from gleaner.provenance.conflicts import ConflictStatus
from gleaner.store.feeds.references import QUALITY_FLAGS

log = logging.getLogger(__name__)


def get_rules(deps: Deps, req: ApiRequest, site: str) -> dict[str, Any]:
    site = check_site(deps, site)
    return {"site_domain": site, "rules": [r.to_dict() for r in rules.list_rules(deps, site)]}


def post_rule(deps: Deps, req: ApiRequest, site: str) -> dict[str, Any]:
    site = check_site(deps, site)
    body = json_body(req)
    rule, applied = rules.add_rule(deps, site, str(text_field(body, "glob")),
                                   choice_field(body, "action", ("skip", "block", "include", "ignore_text")),
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
