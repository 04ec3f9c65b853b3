"""The API's runs: the index, one run and its URLs, cancel, resume and replay (routes in api.py's table).

Split from api.py by concern; it builds on api.py's helpers, and api.py re-exports these handlers so
``api.get_run`` and the like stay where the pages and the agents' tools call them.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from typing import Any

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.backoffice.api import (
    Answer,
    ApiRequest,
    HttpError,
    check_uuid,
    choice_arg,
    page_args,
    valid_site_domain,
)
from gleaner.runtime import runcontrol
from gleaner.store.ledger.llmanswers import model_usage
from gleaner.store.ledger.runstate import RunStatus

log = logging.getLogger(__name__)

# How long a replay's answer waits for its run to exist (reading the source run's pages comes first).
RUN_APPEARS_SECONDS = 20.0


def get_runs(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    site = req.query.get("site") or None
    if site is not None and not valid_site_domain(site):
        raise HttpError(400, "site must be a site domain")
    status = choice_arg(req.query, "status", tuple(RunStatus))
    limit, offset = page_args(req.query)
    ids, total = deps.browse.run_ids(site, limit, offset, status)
    runs = [s for s in (deps.metadata.run_summary(i) for i in ids) if s is not None]
    return {"runs": runs, "total": total, "limit": limit, "offset": offset}


def _run(deps: Deps, run_id: str) -> dict[str, Any]:
    summary = deps.metadata.run_summary(check_uuid(run_id, "run"))
    if summary is None:
        raise HttpError(404, f"no run {run_id}")
    return summary


def get_run(deps: Deps, req: ApiRequest, run_id: str) -> dict[str, Any]:
    summary = _run(deps, run_id)
    options = deps.metadata.run_options(summary["run_id"])
    # A replay (stages/replay.py) names the run it replayed and the pages it left out, with why.
    replayed = {"replay_of": options["replay_of"], "left_out": options.get("left_out", [])} \
        if "replay_of" in options else None
    return {**summary, "outcomes": deps.metadata.outcome_breakdown(summary["run_id"]), "replay": replayed,
            "language_model": model_usage(deps.engine, summary["run_id"])}


def get_run_urls(deps: Deps, req: ApiRequest, run_id: str) -> dict[str, Any]:
    summary = _run(deps, run_id)
    limit, offset = page_args(req.query)
    status = req.query.get("status") or None
    if status is not None and not re.fullmatch(r"[a-z_-]{1,40}", status):
        raise HttpError(400, "status must be a URL status such as fetched, not-modified or exclude")
    urls, total = deps.browse.run_urls_page(summary["run_id"], status, limit, offset)
    return {"run_id": summary["run_id"], "urls": urls, "total": total, "limit": limit, "offset": offset}


def post_cancel(deps: Deps, req: ApiRequest, run_id: str) -> dict[str, Any]:
    """Cancel a run; cancelling a cancelled run again is no error (the click may come twice)."""
    summary = _run(deps, run_id)
    moved, status = runcontrol.cancel(deps.metadata, summary["run_id"])
    if not moved and status != "cancelled":
        raise HttpError(409, f"run {summary['run_id']} already ended {status}; nothing to cancel")
    return {"run_id": summary["run_id"], "status": str(status), "cancelled": moved}


def post_resume(deps: Deps, req: ApiRequest, run_id: str) -> Answer:
    """Take the run over now (so a refusal is this answer's) and drive it to its end on a background
    thread: the request answers 202 at once and the run page follows the run."""
    from gleaner.runtime.runner import claim_resume, drive_resumed

    summary = _run(deps, run_id)
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


def post_replay(deps: Deps, req: ApiRequest, run_id: str) -> Answer:
    """A new run re-processing the run's pages from stored bodies (``gleaner.stages.replay``): 202 once the new
    run exists; locally it goes on on a background thread, on the cloud bus it is done before the answer."""
    from gleaner.stages import replay

    summary = _run(deps, run_id)
    try:
        replay.replayable(deps, summary["run_id"])
    except replay.RunNotReplayable as exc:
        raise HttpError(409, str(exc)) from None
    new_run = str(uuid.uuid4())
    if deps.local_bus is None:
        done = replay.replay(deps, summary["run_id"], "backoffice", new_run)
        return 202, {"run_id": new_run, "replay_of": summary["run_id"], "left_out": done["left_out"]}

    def drive() -> None:
        try:
            # A thread starts with no tenant (row-level security would hide the run): the run's own site.
            with tenancy.scope(summary["site_domain"]):
                replay.replay(deps, summary["run_id"], "backoffice", new_run)
        except Exception:  # the run records how far it got; the server must go on
            log.exception("replay of run %s failed", summary["run_id"])

    threading.Thread(target=drive, name=f"gleaner-replay-{new_run[:8]}", daemon=True).start()
    deadline = time.monotonic() + RUN_APPEARS_SECONDS
    while deps.metadata.run_summary(new_run) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return 202, {"run_id": new_run, "replay_of": summary["run_id"]}
