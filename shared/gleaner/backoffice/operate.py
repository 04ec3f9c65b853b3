"""Running Gleaner over HTTP (DESIGN.md "Operating over HTTP"): add or replace a site, start its crawl now.

    POST /v1/sites                 {"url", "site_domain"?, "every"?, "include"?, "exclude"?, "limit"?,
                                    "max_depth"?, "delay"?, "concurrency"?, "render"?} -> 201/200 the site
    POST /v1/sites/{site}/runs     202 {"run_id"}: a crawl of the registered site starts now
    POST /v1/documents/{doc}/rescrape  202 {"run_id"}: a run of that one URL starts now

A rescrape is a run of its own (``mode=manual``, ``triggered_by=backoffice``) whose map stage
starts and stops at the page (limit 1, depth 0): robots.txt is read first, the site's politeness,
budget and render mode hold, the page's rules hold (a skipped page is refused here: gate 1 means it
is never fetched), and its outcome is the run's, on the run page like any other.

A crawl started here runs on a background thread over the in-process bus (the answer does not wait
for it; the run page follows it); on the cloud bus the request is published, as a tick does.
A 400 names each wrong field (``{"error", "fields": {name: message}}``) so a form can show each one.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from urllib.parse import urlsplit

from gleaner.app import Deps
from gleaner.backoffice.api import Answer, ApiRequest, HttpError, json_body, operator_only, valid_site_domain
from gleaner.backoffice.siteform import SiteFields, check_site
from gleaner.errors import InvalidInput
from gleaner.messages import CrawlRequested
from gleaner.operator import sites as operator_sites
from gleaner.urls import canonicalize, site_domain_of

log = logging.getLogger(__name__)

# How long "crawl now" waits for the run to exist (robots.txt is read first, under the fetch timeout).
RUN_APPEARS_SECONDS = 20.0


class FieldErrors(HttpError):
    """400 with the message of each wrong field."""

    def __init__(self, fields: dict[str, str]) -> None:
        super().__init__(400, "; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = fields


def save_site(deps: Deps, fields: SiteFields) -> tuple[operator_sites.Site, bool]:
    """Create or replace the site; True when it is new. Its host reads its politeness again at the next request."""
    key = operator_sites.site_key(fields.site_domain or site_domain_of(canonicalize(fields.url)))
    existed = operator_sites.find_site(deps, key) is not None
    try:
        site = operator_sites.add_site(deps, fields.url, **fields.arguments())
    except InvalidInput as exc:  # what only the database knows (e.g. a key taken another way)
        raise FieldErrors({"url": str(exc)}) from None
    deps.host_table.forget(urlsplit(site.target_url).hostname or "")
    return site, not existed


def post_site(deps: Deps, req: ApiRequest) -> Answer:
    operator_only(req)
    checked = check_site(json_body(req))
    if isinstance(checked, dict):
        raise FieldErrors(checked)
    site, created = save_site(deps, checked)
    return (201 if created else 200), site.to_dict()


def crawl_request_for(site: operator_sites.Site) -> CrawlRequested:
    """A crawl of the registered site as it stands, started by hand."""
    return CrawlRequested(request_id=str(uuid.uuid4()), target_url=site.target_url, site_domain=site.site_domain,
                          limit=site.limit, max_depth=site.max_depth, include=site.include, exclude=site.exclude,
                          mode="manual", triggered_by="api", max_requests=site.run_max_requests,
                          max_bytes=site.run_max_bytes, max_seconds=site.run_max_seconds)


def start_crawl(deps: Deps, site: operator_sites.Site) -> str:
    """Start a crawl of the site now; its run id."""
    return start_request(deps, crawl_request_for(site))


def start_request(deps: Deps, request: CrawlRequested) -> str:
    """Start the crawl ``request`` asks for now; its run id (once the run exists, locally)."""
    site = request.site_domain or ""
    if deps.local_bus is None:
        deps.bus.publish(request, ordering_key=site)
        return request.run_id

    def drive() -> None:
        from gleaner.runtime.runner import crawl

        try:
            crawl(deps, request)
        except Exception:  # the run records how it ended; the server must go on
            log.exception("crawl of %s started from the back office failed", site)

    threading.Thread(target=drive, name=f"gleaner-crawl-{request.run_id[:8]}", daemon=True).start()
    # The map stage creates the run first thing: answer once it exists, so its page is there to follow.
    deadline = time.monotonic() + RUN_APPEARS_SECONDS
    while deps.metadata.run_summary(request.run_id) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return request.run_id


def post_site_run(deps: Deps, req: ApiRequest, site: str) -> Answer:
    """A site token may crawl its own registered site now; another site's is absent to it (404)."""
    found = operator_sites.find_site(deps, site) if valid_site_domain(site) else None
    if found is None:
        raise HttpError(404, f"no registered site {site[:200]}: add it first (POST /v1/sites)")
    return 202, {"run_id": start_crawl(deps, found), "site_domain": found.site_domain}


def post_rescrape(deps: Deps, req: ApiRequest, document_id: str) -> Answer:
    """A run of this one page now (the ADR's "single URL" rescrape)."""
    from gleaner.backoffice.api import check_uuid

    doc = deps.browse.document(check_uuid(document_id, "document"))
    if doc is None:
        raise HttpError(404, f"no document {document_id[:60]}")
    if doc["status"] == "erased":
        raise HttpError(409, "this page was erased: its content is refused if it comes back")
    if doc["scrape_policy"] == "skip":
        raise HttpError(409, "this page is skipped (gate 1: never fetched): lift its skip rule or review "
                             "decision first")
    registered = operator_sites.find_site(deps, doc["site_domain"])
    request = CrawlRequested(
        request_id=str(uuid.uuid4()), target_url=doc["url"], site_domain=doc["site_domain"], limit=1, max_depth=0,
        mode="manual", triggered_by="backoffice",
        max_requests=registered.run_max_requests if registered else None,
        max_bytes=registered.run_max_bytes if registered else None,
        max_seconds=registered.run_max_seconds if registered else None)
    return 202, {"run_id": start_request(deps, request), "site_domain": doc["site_domain"], "url": doc["url"]}
