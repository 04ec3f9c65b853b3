"""The back office's pages for what only the CLI did before (issue 44): subscriptions added, tested and
deleted; a composite made from selected pages; a page erased after a confirmation; site and workspace
tokens created (shown once) and revoked.

Each calls what the CLI calls (changes.subscriptions, changes.delivery, operator.routing, store.erasure,
the token store), acting as the operator only: a site token's session gets 403. A refusal (the address
policy's answer, a bad field) is shown on the page the form was on, never as a bare error page.
"""

from __future__ import annotations

from collections.abc import Callable

from gleaner.app import Deps
from gleaner.backoffice import api
from gleaner.backoffice.api import ApiRequest, HttpError
from gleaner.backoffice.pages import Page, PageRequest, changes_page, render
from gleaner.errors import InvalidInput, PolicyRefused

NOTICES: dict[str, str] = {
    "subscription-removed": "Subscription deleted: nothing more is sent to it (its delivery log is kept).",
    "composite-created": "Composite created from the selected pages: it starts as generated, to be validated.",
    "erased": "Page erased: its versions, texts and citations are gone and its content is blocklisted.",
    "token-revoked": "Token revoked: requests with it are refused from now on.",
}


def _operator(req: PageRequest) -> None:
    if not req.access.is_operator:
        raise HttpError(403, "only the operator may do this; a site token manages its own site's pages only")


# -- subscriptions --------------------------------------------------------------------------------

def add_subscription(deps: Deps, req: PageRequest) -> Page:
    """``notify add`` from the changes page: refused targets (the address policy's answer) shown there."""
    from gleaner.changes import channels, subscriptions

    _operator(req)
    url = req.form.get("url", "").strip()
    site = req.form.get("site", "").strip() or None
    try:
        if not url:
            raise InvalidInput("give the webhook or Apprise URL to send to")
        if site is not None and not (deps.browse.site_exists(site)
                                     or api.operator_sites.find_site(deps, site) is not None):
            raise InvalidInput(f"unknown site {site!r}: Gleaner has neither crawled nor registered it")
        sub = subscriptions.add(deps.metadata, url, site=site,
                                types=subscriptions.parse_types(req.form.get("types", "").strip() or None),
                                allow=deps.settings.allow_networks,
                                digest_seconds=subscriptions.parse_digest(req.form.get("digest") or None))
    except (InvalidInput, PolicyRefused) as exc:
        return changes_page(deps, req, refused=f"Not added: {exc}", form=dict(req.form))
    secret = None if channels.is_channel(url) else sub.secret
    return changes_page(deps, req, added={"id": sub.id, "url": channels.masked(url), "secret": secret})


def test_subscription(deps: Deps, req: PageRequest, subscription_id: str) -> Page:
    """``notify test``: the answer (delivered in N ms, or why not) on the changes page."""
    from gleaner.changes import delivery

    _operator(req)
    try:
        response = delivery.send_test(deps, subscription_id)
    except PolicyRefused as exc:
        return changes_page(deps, req, refused=f"Test not sent: {exc}")
    if response.ok:
        said = f"HTTP {response.status}" if response.status else "sent"
        return changes_page(deps, req, tested=f"Test message delivered ({said} in {response.ms} ms).")
    from gleaner.display.vocabulary import explain_error

    return changes_page(deps, req, refused="Test message not delivered: "
                        + explain_error(response.error or f"HTTP {response.status}"))


def delete_subscription(deps: Deps, req: PageRequest, subscription_id: str) -> Page:
    _operator(req)
    if not deps.metadata.remove_subscription(subscription_id):
        raise HttpError(404, f"no subscription {subscription_id}")
    return Page(303, location="/ui/changes?done=subscription-removed")


# -- composites -----------------------------------------------------------------------------------

def create_composite_page(deps: Deps, req: PageRequest, site: str) -> Page:
    """A composite of the pages ticked on the documents page (``doc`` fields hold their URLs)."""
    from gleaner.backoffice.actions import composites_page
    from gleaner.operator.routing import create_composite

    _operator(req)
    urls = [u for u in req.form.get("doc", "").split("\n") if u.strip()]
    try:
        create_composite(deps, site, req.form.get("title", ""), urls, kind=req.form.get("kind") or None,
                         actor=req.access.actor)
    except InvalidInput as exc:
        return composites_page(deps, req, site, refused=f"Not created: {exc}")
    bus = deps.local_bus  # the composite's index rows are queued for ingest; run them now, as the CLI does
    if bus is not None and bus.pending():
        bus.drain()
    return Page(303, location=f"/ui/sites/{site}/composites?done=composite-created")


# -- erasing a page -------------------------------------------------------------------------------

def erase_page(deps: Deps, req: PageRequest, document_id: str) -> Page:
    """GET: what will be removed and a reason field; POST (confirmed): erase, recorded with who and when."""
    from gleaner.store.documents.erasure import erase_document

    _operator(req)
    found = api.get_document(deps, ApiRequest("GET", "", access=req.access), document_id)
    doc = found["document"]
    if doc["status"] == "erased":
        return Page(303, location=f"/ui/documents/{doc['id']}")
    if req.method == "POST":
        if req.form.get("confirm") != doc["url"]:
            return render("erase.html", 400, doc=doc, versions=found["versions"], citations=found["citations"],
                          error="Type the page's address exactly to confirm", reason=req.form.get("reason", ""))
        erase_document(deps.provenance, deps.blobs, deps.blocklist, doc["id"], req.form.get("reason") or None,
                       f"{req.access.actor} in the back office")
        # The document.removed event goes out with the outbox's next drain, as the back office's rule
        # changes' events do: the back-office function has no queue of its own to send on.
        return Page(303, location=f"/ui/documents/{doc['id']}?done=erased")
    return render("erase.html", doc=doc, versions=found["versions"], citations=found["citations"], error=None,
                  reason="")


# -- tokens ---------------------------------------------------------------------------------------

def tokens_page(deps: Deps, req: PageRequest, *, created: dict[str, str] | None = None,
                refused: str | None = None, code: int = 200) -> Page:
    _operator(req)
    return render("tokens.html", code, tokens=deps.tokens.list(), created=created, refused=refused)


def add_token(deps: Deps, req: PageRequest) -> Page:
    """A site or workspace token, shown on the answering page once (it is stored hashed)."""
    from gleaner.tenancy import InvalidTenant, validate_site_domain

    _operator(req)
    kind, name, label = req.form.get("kind", ""), req.form.get("name", "").strip(), req.form.get("label", "").strip()
    if not name or kind not in ("site", "workspace"):
        return tokens_page(deps, req, refused="Not created: name a site or a workspace", code=400)
    if kind == "site":
        try:
            validate_site_domain(name)
        except InvalidTenant as exc:
            return tokens_page(deps, req, refused=f"Not created: {exc}", code=400)
        made = deps.tokens.add_site(name, label)
    else:
        made = deps.tokens.add(name, label)
    return tokens_page(deps, req, created={"id": str(made["id"]), "token": made["token"], "for": f"{kind} {name}"})


def revoke_token(deps: Deps, req: PageRequest, token_id: str) -> Page:
    _operator(req)
    if not deps.tokens.revoke(token_id):
        raise HttpError(404, f"no live token {token_id}")
    return Page(303, location="/ui/tokens?done=token-revoked")


ROUTES: dict[str, dict[str, Callable[..., Page]]] = {
    "/ui/subscriptions/?": {"POST": add_subscription},
    "/ui/subscriptions/{subscription}/test": {"POST": test_subscription},
    "/ui/subscriptions/{subscription}/delete": {"POST": delete_subscription},
    "/ui/sites/{site}/composites/new": {"POST": create_composite_page},
    "/ui/documents/{document}/erase": {"GET": erase_page, "POST": erase_page},
    "/ui/tokens/?": {"GET": tokens_page, "POST": add_token},
    "/ui/tokens/{token}/revoke": {"POST": revoke_token},
}
