"""The back office's pages that run Gleaner: add and edit a site, crawl it now, the runs index, search,
rescrape one page, a site's composites and their moves, disabling and enabling a subscription.

Each form posts back to its own page; a wrong field re-renders the form with what the operator typed
and the error beside that field (never a bare 400 page). After an action the page it lands on says
what happened (``?done=``: a fixed message, never text from the URL).
"""

from __future__ import annotations

import json
from typing import Any

from gleaner.app import Deps
from gleaner.backoffice import api, compositesapi, notifyapi, operate
from gleaner.backoffice.api import ApiRequest, HttpError
from gleaner.backoffice.pages import Page, PageRequest, render
from gleaner.backoffice.siteform import FIELDS, RENDER_MODES, check_site, form_values
from gleaner.operator import sites as operator_sites
from gleaner.store.ledger.runstate import RunStatus

# What a finished action says on the page it lands on (``?done=KEY``).
NOTICES: dict[str, str] = {
    "site-added": "Site added. “Crawl now” starts its first run; its schedule (if any) starts it on its own.",
    "site-saved": "Site saved; the next run uses these settings.",
    "crawl-started": "Crawl started: this page follows it until it ends.",
    "cancelled": "Run cancelled: nothing more is fetched (a batch in flight completes).",
    "already-cancelled": "The run was already cancelled.",
    "resumed": "Run resumed: what it left is being fetched now (pages it fetched are not fetched again).",
    "retried": "Delivery attempted again; its state below is the outcome.",
    "rule-added": "Rule added and applied to the pages it matches.",
    "feedback-kept": "Feedback kept: this is its document, searchable and citable; it contradicts nothing kept.",
    "feedback-conflicts": "Feedback kept, and it contradicts what the copy says: see the site's conflicts.",
    "rule-removed": "Rule removed; what it skipped or blocked is back to normal.",
    "rescrape-started": "Rescrape started: a run of this one page (robots.txt and the site's politeness apply); "
                        "this page follows it until it ends.",
    "replay-started": "Replay started: a new run of the pages that run fetched, read from the store (nothing is "
                      "fetched); this page follows it until it ends.",
    "composite-moved": "Composite moved; its history below records who moved it and when.",
    "composite-edited": "Composite edited: your text is its new version, to be validated; its history below says "
                        "who edited it and when.",
    "composite-unchanged": "Nothing to keep: the text sent is the composite's current version.",
    "comment-kept": "Comment kept, with who wrote it and when (below).",
    "flag-kept": "Flag kept, with who raised it and when (below).",
    "subscription-disabled": "Subscription disabled: its pending deliveries were cancelled and nothing is sent "
                             "to it until it is enabled.",
    "subscription-enabled": "Subscription enabled: the changes from now on are delivered to it.",
}


def _site_form(site: str | None, values: dict[str, str], errors: dict[str, str], code: int = 200) -> Page:
    return render("site_form.html", code, site=site, values=values, errors=errors, render_modes=RENDER_MODES,
                  fields=FIELDS)


def new_site_page(deps: Deps, req: PageRequest) -> Page:
    if req.method == "POST":
        return _save(deps, req, None)
    return _site_form(None, {name: "" for name in FIELDS}, {})


def edit_site_page(deps: Deps, req: PageRequest, site: str) -> Page:
    found = operator_sites.find_site(deps, site) if api.valid_site_domain(site) else None
    if found is None:
        raise HttpError(404, f"{site[:200]} is not a registered site: add it with “Add a site”")
    if req.method == "POST":
        return _save(deps, req, found.site_domain)
    return _site_form(found.site_domain, form_values(found), {})


def _save(deps: Deps, req: PageRequest, site: str | None) -> Page:
    values = {name: req.form.get(name, "") for name in FIELDS}
    if site is not None:
        values["site_domain"] = site  # an edit keeps the site's key
    checked = check_site(values)
    if isinstance(checked, dict):
        return _site_form(site, values, checked, 400)
    try:
        saved, created = operate.save_site(deps, checked)
    except operate.FieldErrors as exc:
        return _site_form(site, values, exc.fields, 400)
    done = "site-added" if created else "site-saved"
    return Page(303, location=f"/ui/sites/{saved.site_domain}?done={done}")


def crawl_now(deps: Deps, req: PageRequest, site: str) -> Page:
    _, answer = operate.post_site_run(deps, ApiRequest("POST", "", access=req.access), site)
    return Page(303, location=f"/ui/runs/{answer['run_id']}?done=crawl-started")


def runs_index(deps: Deps, req: PageRequest) -> Page:
    query = {k: v for k, v in req.query.items() if k in ("site", "status", "limit", "offset") and v}
    try:
        listing = api.get_runs(deps, ApiRequest("GET", "", query, access=req.access))
        error = None
    except HttpError as exc:  # a bad filter: say so above an empty list, keep the filters shown
        listing, error = {"runs": [], "total": 0, "limit": 100, "offset": 0}, exc.message
    sites = [s["site_domain"] for s in api.get_sites(deps, ApiRequest("GET", "", access=req.access))["sites"]]
    return render("runs.html", listing=listing, sites=sites, statuses=[str(s) for s in RunStatus],
                  site=req.query.get("site", ""), status=req.query.get("status", ""), error=error)


def search_page(deps: Deps, req: PageRequest) -> Page:
    """The search box's page over ``GET /v1/search`` (the retrieval work's route, when it is there)."""
    q = req.query.get("q", "").strip()
    answer: dict[str, Any] | None = None
    error = None
    if q:
        query = {k: v for k, v in req.query.items() if k in ("q", "site", "limit") and v}
        code, found = api.handle(ApiRequest("GET", "/v1/search", query, access=req.access), deps)
        answer = found if code == 200 else None
        if code == 404 and "no such endpoint" in str(found.get("error", "")):
            error = "Search is not available in this version of Gleaner."
        elif code != 200:
            error = str(found.get("error", f"search answered {code}"))
    from gleaner.backoffice.passages import grouped

    return render("search.html", q=q, site=req.query.get("site", ""), answer=answer, error=error,
                  hits=grouped(answer) if answer is not None else [])


def _post(req: PageRequest, **fields: str | None) -> ApiRequest:
    """The API command a form stands for (empty fields left out)."""
    return ApiRequest("POST", "", {}, json.dumps({k: v for k, v in fields.items() if v}).encode(), req.access)


def rescrape(deps: Deps, req: PageRequest, document_id: str) -> Page:
    _, answer = operate.post_rescrape(deps, _post(req), document_id)
    return Page(303, location=f"/ui/runs/{answer['run_id']}?done=rescrape-started")


def composites_page(deps: Deps, req: PageRequest, site: str, *, refused: str | None = None) -> Page:
    listing = compositesapi.get_composites(deps, ApiRequest("GET", "", access=req.access), site)
    shown = {c["id"]: compositesapi.get_composite(deps, ApiRequest("GET", "", access=req.access), c["id"])
             for c in listing["composites"]}
    history = {i: c["history"] for i, c in shown.items()}
    bodies = {i: _current_body(deps, listing["site_domain"], i, c["versions"]) for i, c in shown.items()}
    return render("composites.html", 409 if refused else 200, site=listing["site_domain"],
                  composites=listing["composites"], history=history, versions={i: c["versions"] for i, c in
                                                                               shown.items()},
                  bodies=bodies, refused=refused)


def _current_body(deps: Deps, site: str, composite_id: str, versions: list[dict[str, Any]]) -> str | None:
    """The composite's current text, for its edit form (None: no version, or its body is gone)."""
    from gleaner.store.backends.blobs import snapshot_content_key

    current = next((v for v in versions if v["current"]), None)
    if current is None:
        return None
    try:
        return deps.blobs.get(snapshot_content_key(site, composite_id, current["content_hash"])).decode("utf-8")
    except KeyError:
        return None


def move_composite(deps: Deps, req: PageRequest, composite_id: str) -> Page:
    """One move; an illegal one (a second click, a stale page) re-renders the list saying why."""
    found = compositesapi.get_composite(deps, ApiRequest("GET", "", access=req.access), composite_id)["composite"]
    try:
        compositesapi.post_composite(deps, _post(req, status=req.form.get("status"), note=req.form.get("note")),
                                     composite_id)
    except HttpError as exc:
        if exc.status not in (400, 409):
            raise
        return composites_page(deps, req, found["site_domain"], refused=f"Not moved: {exc.message}")
    return Page(303, location=f"/ui/sites/{found['site_domain']}/composites?done=composite-moved")


def subscription_status(deps: Deps, req: PageRequest, subscription_id: str) -> Page:
    status = req.form.get("status", "")
    notifyapi.post_subscription(deps, _post(req, status=status), subscription_id)
    return Page(303, location=f"/ui/changes?done=subscription-{'enabled' if status == 'active' else 'disabled'}")


def replay_run(deps: Deps, req: PageRequest, run_id: str) -> Page:
    _, answer = api.post_replay(deps, _post(req), run_id)
    return Page(303, location=f"/ui/runs/{answer['run_id']}?done=replay-started")
