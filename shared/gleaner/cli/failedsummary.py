"""The summary ``gleaner crawl --json`` prints when the run did not get to make its own.

``--json`` promises one JSON object on stdout whatever happens, so a script can always read the run's
id and status: when the crawl raises (the database gone, the blob store read-only, Ctrl-C), the run's
recorded row is used if the database still answers, else what is known without it.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

_COUNTS = ("discovered", "included", "excluded", "fetched", "not_modified", "refused", "failed", "limited")


def failed_summary(deps: Any | None, run_id: str | None, site_domain: str | None, exc: BaseException
                   ) -> dict[str, Any]:
    """The run's summary after ``exc`` ended the command: the recorded row when readable, with the error."""
    interrupted = isinstance(exc, KeyboardInterrupt) or (isinstance(exc, SystemExit) and exc.code == 130)
    recorded: dict[str, Any] | None = None
    if deps is not None and run_id is not None:
        try:
            recorded = deps.metadata.run_summary(run_id)
        except Exception:  # the database may be what failed: the summary below says what is known
            log.debug("reading the failed run's summary failed", exc_info=True)
    summary: dict[str, Any] = recorded or {
        "run_id": run_id, "site_domain": site_domain, **dict.fromkeys(_COUNTS, 0),
        "snapshots": {"new": 0, "changed": 0, "unchanged": 0}}
    if interrupted:
        summary["status"] = "interrupted"
    elif recorded is None or summary.get("status") in ("queued", "mapping", "sampling", "scraping", None):
        summary["status"] = "failed"
    summary["error"] = summary.get("error") or _reason(exc)
    return summary


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt) or (isinstance(exc, SystemExit) and exc.code == 130):
        return "interrupted; `gleaner runs resume RUN_ID` goes on from there"
    if isinstance(exc, SystemExit):
        return "the command stopped"
    text = str(exc).splitlines()[0][:500] if str(exc) else ""
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__
