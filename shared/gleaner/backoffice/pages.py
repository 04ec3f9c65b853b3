"""The back office's pages under ``/ui/``: Jinja2 templates over the API's own handlers.

Each page calls the same functions as ``/v1/`` (so a page shows exactly what the
API answers) and renders them server-side; the only scripts are the tree's lazy
folder expansion and the run page's refresh while a run is going.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import urlencode

import jinja2
import markupsafe

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.backoffice import api, wordiff
from gleaner.backoffice.api import OPERATOR, Access, ApiRequest, HttpError
from gleaner.display import humanize, vocabulary
from gleaner.errors import InvalidInput
from gleaner.operator import sites as operator_sites
from gleaner.store import browse
from gleaner.store.feeds.references import QUALITY_FLAGS

# Whether the request being rendered came with a login session (set by the WSGI layer per request).
SIGNED_IN: ContextVar[bool] = ContextVar("signed_in", default=False)
# The message of the action that led to this page (``?done=KEY`` of actions.NOTICES), for base.html.
NOTICE: ContextVar[str | None] = ContextVar("gleaner_backoffice_notice", default=None)

# Run statuses after which nothing changes: the run page stops refreshing.
TERMINAL_RUN_STATUSES = frozenset({"finished", "partial", "failed", "cancelled", "interrupted"})


@dataclass(frozen=True, slots=True)
class Page:
    status: int
    body: str = ""
    location: str | None = None  # a redirect after a form post
    content_type: str = "text/html; charset=utf-8"


@dataclass(frozen=True, slots=True)
class PageRequest:
    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    form: Mapping[str, str] = field(default_factory=dict)
    access: Access = OPERATOR


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("gleaner.backoffice", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["qs"] = lambda params: urlencode({k: v for k, v in params.items() if v not in (None, "")})
    env.globals["terminal"] = TERMINAL_RUN_STATUSES
    # The operator's pages (the quality log) are linked only where the request sees every tenant.
    env.globals["every_tenant"] = lambda: tenancy.current().all_tenants
    env.globals["signed_in"] = SIGNED_IN.get  # a logout button for a login session (wsgi sets it)
    env.globals["notice"] = lambda: NOTICE.get()
    env.filters["plain"] = humanize.plain
    env.filters["words"] = vocabulary.words  # codes in a reader's words (gleaner/display/vocabulary.py)
    env.filters["explain"] = vocabulary.explain_error
    env.filters["page_url"] = vocabulary.page_url  # an erased page's address is gone: say so
    env.filters["plural"] = humanize.plural
    env.filters["day"] = humanize.day
    env.globals["cannot_resume"] = vocabulary.cannot_resume_because
    env.globals["word_diff"] = wordiff.marked  # a changed line's differing words, marked
    env.filters["ago"] = humanize.ago
    # A time as "3 min ago", the full time on hover (and machine-readable for scripts and tests).
    env.filters["when"] = lambda value: markupsafe.Markup(
        '<time datetime="{}" title="{}">{}</time>').format(value or "", humanize.full_time(value),
                                                           humanize.ago(value)) if value else "-"
    return env


def render(template: str, code: int = 200, **context: Any) -> Page:
    return Page(code, environment().get_template(template).render(**context))


def _api(req: PageRequest, path: str, **query: str) -> ApiRequest:
    return ApiRequest("GET", path, {**req.query, **query}, access=req.access)


def home(deps: Deps, req: PageRequest) -> Page:
    runs = api.get_runs(deps, _api(req, "/v1/runs", limit="20"))
    return render("home.html", sites=api.get_sites(deps, _api(req, "/v1/sites"))["sites"], runs=runs["runs"])


def run_page(deps: Deps, req: PageRequest, run_id: str, *, refused: str | None = None) -> Page:
    run = api.get_run(deps, _api(req, ""), run_id)
    urls = api.get_run_urls(deps, _api(req, ""), run_id)
    return render("run.html", 409 if refused else 200, run=run, urls=urls, status_filter=req.query.get("status", ""),
                  refused=refused)


def site_page(deps: Deps, req: PageRequest, site: str) -> Page:
    level = api.get_tree(deps, _api(req, ""), site)
    return render("tree.html", site=site, level=level, rules=api.get_rules(deps, _api(req, ""), site)["rules"],
                  registered=operator_sites.find_site(deps, site))


def _command(req: PageRequest, **fields: str | None) -> ApiRequest:
    return ApiRequest("POST", "", {}, json.dumps({k: v for k, v in fields.items() if v}).encode(), req.access)


def add_rule(deps: Deps, req: PageRequest, site: str) -> Page:
    api.post_rule(deps, _command(req, glob=req.form.get("glob"), action=req.form.get("action"),
                                 reason=req.form.get("reason")), site)
    return Page(303, location=f"/ui/sites/{site}?done=rule-added")


def remove_rule(deps: Deps, req: PageRequest, site: str, rule_id: str) -> Page:
    api.delete_rule(deps, _command(req), site, rule_id)
    return Page(303, location=f"/ui/sites/{site}?done=rule-removed")


def review_page(deps: Deps, req: PageRequest, site: str) -> Page:
    return render("review.html", site=site, items=api.get_review(deps, _api(req, ""), site)["items"])


def decide_review(deps: Deps, req: PageRequest, site: str) -> Page:
    api.post_review(deps, _command(req, url=req.form.get("url"), decision=req.form.get("decision")), site)
    return Page(303, location=f"/ui/sites/{site}/review")


def tree_fragment(deps: Deps, req: PageRequest, site: str) -> Page:
    level = api.get_tree(deps, _api(req, ""), site)
    return render("tree_level.html", site=site, level=level, rules=api.get_rules(deps, _api(req, ""), site)["rules"])


def documents_page(deps: Deps, req: PageRequest, site: str) -> Page:
    listing = api.get_documents(deps, _api(req, ""), site)
    return render("documents.html", site=site, listing=listing, statuses=browse.DOCUMENT_STATUSES,
                  policies=browse.SCRAPE_POLICIES, query=dict(req.query))


def document_page(deps: Deps, req: PageRequest, document_id: str) -> Page:
    found = api.get_document(deps, _api(req, ""), document_id)
    doc = found["document"]
    diff = None
    if found["versions"]:
        diff = api.document_diff(deps, doc, api.int_arg(req.query, "from", None, 1),
                                 api.int_arg(req.query, "to", None, 1))
    from gleaner.origins.remarks import RemarkStore

    return render("document.html", doc=doc, versions=found["versions"], diff=diff, citations=found["citations"],
                  erasure=found.get("erasure"), remarks=RemarkStore(deps.engine).of_document(doc["id"]) or [])


def version_page(deps: Deps, req: PageRequest, document_id: str, number: str) -> Page:
    body = api.get_version(deps, _api(req, ""), document_id, number)
    return render("version.html", body=body)


def changes_page(deps: Deps, req: PageRequest, *, refused: str | None = None, added: dict[str, Any] | None = None,
                 tested: str | None = None, form: dict[str, str] | None = None) -> Page:
    """The change feed, the subscriptions (with the form that adds one) and the delivery log; an action's
    answer (a refusal, a new webhook's secret shown once, a test's outcome) above them."""
    events = api.get_changes(deps, _api(req, ""))["events"]
    subscriptions = api.get_subscriptions(deps, _api(req, ""))["subscriptions"]
    return render("changes.html", 400 if refused and form is not None else 200, events=list(reversed(events)),
                  subscriptions=subscriptions, refused=refused, added=added, tested=tested, form=form or {},
                  subscription_urls={s["id"]: s["url"] for s in subscriptions},
                  deliveries=api.get_deliveries(deps, _api(req, "", limit="50"))["deliveries"])


def conflicts_page(deps: Deps, req: PageRequest, site: str) -> Page:
    listing = api.get_conflicts(deps, _api(req, ""), site)
    return render("conflicts.html", site=site, conflicts=listing["conflicts"],
                  status_filter=req.query.get("status", ""))


def settle_conflict(deps: Deps, req: PageRequest, site: str, conflict_id: str) -> Page:
    api.post_conflict(deps, _command(req, status=req.form.get("status", "")), site, conflict_id)
    return Page(303, location=f"/ui/sites/{site}/conflicts")


def retry_delivery(deps: Deps, req: PageRequest, delivery_id: str) -> Page:
    api.post_retry(deps, _command(req), delivery_id)
    return Page(303, location="/ui/changes?done=retried")


def cancel_run(deps: Deps, req: PageRequest, run_id: str) -> Page:
    try:
        answer = api.post_cancel(deps, _command(req), run_id)
    except HttpError as exc:
        if exc.status != 409:
            raise
        return run_page(deps, req, run_id, refused=f"Not cancelled: {exc.message}")
    return Page(303, location=f"/ui/runs/{run_id}?done={'cancelled' if answer['cancelled'] else 'already-cancelled'}")


def resume_run(deps: Deps, req: PageRequest, run_id: str) -> Page:
    try:
        api.post_resume(deps, _command(req), run_id)
    except HttpError as exc:
        if exc.status != 409:
            raise
        return run_page(deps, req, run_id, refused=f"Not resumed: {exc.message}")
    return Page(303, location=f"/ui/runs/{run_id}?done=resumed")


def quality_page(deps: Deps, req: PageRequest) -> Page:
    listing = api.get_quality(deps, _api(req, ""))
    return render("quality.html", listing=listing, kinds=QUALITY_FLAGS, kind=req.query.get("kind", ""),
                  since=req.query.get("since", ""))


# The pages that run Gleaner build on this module (imported here, last).
from gleaner.backoffice import actions, operatorpages, originspages, watchpage  # noqa: E402

actions.NOTICES.update(operatorpages.NOTICES)

PageHandler = Callable[..., Page]
_PAGES: dict[str, dict[str, PageHandler]] = {
    "/ui/?": {"GET": home},
    "/ui/runs/?": {"GET": actions.runs_index},
    "/ui/add-site": {"GET": actions.new_site_page, "POST": actions.new_site_page},
    "/ui/sites/{site}/edit": {"GET": actions.edit_site_page, "POST": actions.edit_site_page},
    "/ui/sites/{site}/crawl": {"POST": actions.crawl_now},
    "/ui/search/?": {"GET": actions.search_page},
    "/ui/runs/{run}": {"GET": run_page},
    "/ui/runs/{run}/cancel": {"POST": cancel_run},
    "/ui/runs/{run}/resume": {"POST": resume_run},
    "/ui/sites/{site}": {"GET": site_page},
    "/ui/sites/{site}/tree": {"GET": tree_fragment},
    "/ui/sites/{site}/documents": {"GET": documents_page},
    "/ui/sites/{site}/rules": {"POST": add_rule},
    "/ui/sites/{site}/rules/{rule}/remove": {"POST": remove_rule},
    "/ui/sites/{site}/review": {"GET": review_page, "POST": decide_review},
    "/ui/sites/{site}/conflicts": {"GET": conflicts_page},
    "/ui/sites/{site}/conflicts/{conflict}": {"POST": settle_conflict},
    "/ui/documents/{document}": {"GET": document_page},
    "/ui/documents/{document}/versions/{version}": {"GET": version_page},
    "/ui/changes/?": {"GET": changes_page},
    "/ui/deliveries/{delivery}/retry": {"POST": retry_delivery},
    "/ui/quality/?": {"GET": quality_page},
    "/ui/documents/{document}/rescrape": {"POST": actions.rescrape},
    "/ui/runs/{run}/replay": {"POST": actions.replay_run},
    "/ui/sites/{site}/composites/?": {"GET": actions.composites_page},
    "/ui/composites/{composite}/move": {"POST": actions.move_composite},
    "/ui/subscriptions/{subscription}/status": {"POST": actions.subscription_status},
    **operatorpages.ROUTES,
    **watchpage.ROUTES,
    "/ui/sites/{site}/upload": {"GET": originspages.upload_page},
    "/ui/documents/{document}/feedback": {"POST": originspages.send_feedback},
    "/ui/documents/{document}/remarks": {"POST": originspages.send_remark},
    "/ui/composites/{composite}/edit": {"POST": originspages.edit_composite},
}
PAGES = api.compile_routes(_PAGES)


def handle(req: PageRequest, deps: Deps) -> Page:
    from gleaner.backoffice import shortids

    try:
        path = shortids.expand(deps, req.path)
    except HttpError as exc:
        return render("error.html", exc.status, status=exc.status, message=exc.message)
    if path != req.path and req.method in ("GET", "HEAD"):
        # A short id (as the pages show them) opens the page at its whole id, so links and reloads agree.
        return Page(303, location=path + (f"?{urlencode(dict(req.query))}" if req.query else ""))
    found = api.find_route(PAGES, path)
    if found is None:
        return render("error.html", 404, status=404, message=f"no page {req.path[:200]}")
    methods, args = found
    fn = methods.get("GET" if req.method == "HEAD" else req.method)
    if fn is None:
        return render("error.html", 405, status=405, message=f"use {' or '.join(methods)}")
    NOTICE.set(actions.NOTICES.get(req.query.get("done", "")))
    try:
        return fn(deps, req, *args)
    except HttpError as exc:
        return render("error.html", exc.status, status=exc.status, message=exc.message)
    except InvalidInput as exc:
        return render("error.html", 400, status=400, message=str(exc))
