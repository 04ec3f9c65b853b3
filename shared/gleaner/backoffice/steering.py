"""Steering a site over ``/v1/``: its rules, its review queue, its conflicts, and its runs (cancel, resume).

Every handler reads and writes in the caller's tenant scope (``wsgi.py``), so a site token steers its
own site only; another site's objects answer 404. The quality log is the operator's alone.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from gleaner import runcontrol
from gleaner.app import Deps
from gleaner.backoffice.api import find_run
from gleaner.backoffice.request import (
    Answer,
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
from gleaner.store.references import QUALITY_FLAGS

log = logging.getLogger(__name__)


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


def post_cancel(deps: Deps, req: ApiRequest, run_id: str) -> dict[str, Any]:
    """Cancel a run; cancelling a cancelled run again is no error (the click may come twice)."""
    summary = find_run(deps, run_id)
    moved, status = runcontrol.cancel(deps.metadata, summary["run_id"])
    if not moved and status != "cancelled":
        raise HttpError(409, f"run {summary['run_id']} already ended {status}; nothing to cancel")
    return {"run_id": summary["run_id"], "status": str(status), "cancelled": moved}


def post_resume(deps: Deps, req: ApiRequest, run_id: str) -> Answer:
    """Take the run over now (so a refusal is this answer's) and drive it to its end on a background
    thread: the request answers 202 at once and the run page follows the run."""
    from gleaner.runner import claim_resume, drive_resumed

    summary = find_run(deps, run_id)
    if deps.local_bus is None:
        raise HttpError(409, "resuming drives the run on this machine's in-process bus; here the stages run "
                             "on the cloud bus: use `gleaner runs resume RUN_ID` where GLEANER_BUS is unset")
    try:
        run = claim_resume(deps, summary["run_id"])
    except runcontrol.RunNotResumable as exc:
        raise HttpError(409, str(exc)) from None
    except runcontrol.RunNotFound:
        raise HttpError(404, f"no run {run_id}") from None

    def drive() -> None:
        try:
            drive_resumed(deps, run)
        except Exception:  # the run itself records how it ended; the server must go on
            log.exception("resuming run %s failed", run.run_id)

    threading.Thread(target=drive, name=f"gleaner-resume-{run.run_id[:8]}", daemon=True).start()
    return 202, {"run_id": run.run_id, "status": str(run.status), "resumed": True}


def get_quality(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    """Feed URLs the landing refused or could not use (``references/landing.py``): the operator's, not a site's."""
    operator_only(req)
    kind = choice_arg(req.query, "kind", QUALITY_FLAGS)
    since = time_arg(req.query, "since")
    limit, offset = page_args(req.query)
    rows, total = deps.browse.quality_log(kind, since, limit, offset)
    return {"entries": rows, "total": total, "limit": limit, "offset": offset}
