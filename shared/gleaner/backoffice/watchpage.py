"""The watch view (``/ui/watch``): each site's and page's last check and last change, the changes
since the reader's last visit, filtered by site, type and date.

"Your last visit" is the browser's own (kept in its local storage by the page's script): the back
office has no user accounts, and the same page serves every operator.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gleaner.app import Deps
from gleaner.backoffice import api
from gleaner.backoffice.api import ApiRequest, HttpError
from gleaner.backoffice.pages import Page, PageRequest, render
from gleaner.changes.events import EventType

# Without a date, the view looks this far back.
DEFAULT_DAYS = 30
PAGES_SHOWN = 200


def watch_page(deps: Deps, req: PageRequest) -> Page:
    site = req.query.get("site") or None
    if site is not None and not api.valid_site_domain(site):
        raise HttpError(400, "site must be a site domain")
    kind = req.query.get("type") or None
    if kind is not None and kind not in {str(t) for t in EventType}:
        raise HttpError(400, f"type must be one of {', '.join(str(t) for t in EventType)}")
    day = req.query.get("since") or ""
    try:
        since = datetime.fromisoformat(day).replace(tzinfo=UTC) if day else \
            datetime.now(UTC) - timedelta(days=DEFAULT_DAYS)
    except ValueError:
        raise HttpError(400, "since must be a date such as 2026-12-01") from None
    query = {"since": since.isoformat(), "limit": "500", **({"site": site} if site else {})}
    events = api.get_changes(deps, ApiRequest("GET", "", query, access=req.access))["events"]
    events = [e for e in reversed(events) if kind is None or e["type"] == kind]
    sites = deps.metadata.watched_sites()
    return render("watch.html", sites=sites, pages=deps.metadata.watched_pages(site, since, PAGES_SHOWN),
                  events=events, site=site or "", kind=kind or "", since=day, types=[str(t) for t in EventType],
                  site_names=[s["site_domain"] for s in sites], default_days=DEFAULT_DAYS)


ROUTES = {"/ui/watch/?": {"GET": watch_page}}
