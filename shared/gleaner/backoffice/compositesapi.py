"""The API's composites: a site's list, one composite with its history, one lifecycle move.

    GET  /v1/sites/{site}/composites     the site's composites, oldest first, with status and who validated
    GET  /v1/composites/{id}             one composite, its sources, its legal next statuses, its history and
                                         its versions (who wrote each, and when)
    POST /v1/composites/{id}             {"status", "note"?}: move it one legal step, recorded as the caller's
    POST /v1/composites/{id}/edit        {"markdown", "note"?}: the caller's edit, its next version (201),
                                         ``edited`` until validated; the same body again is 200 and writes nothing

A site token moves and edits its own site's composites (the ADR's client validation); another site's
are absent to it (row-level security), as everywhere. An illegal move is 409 with the legal ones named.
"""

from __future__ import annotations

from typing import Any

from gleaner.app import Deps
from gleaner.backoffice.api import Answer, ApiRequest, HttpError, check_site, check_uuid, json_body, text_field
from gleaner.operator import composites
from gleaner.operator.routing import Composite


def described(composite: Composite) -> dict[str, Any]:
    """A composite as the API shows it: its fields and the statuses it may go to next."""
    nexts = composites.MOVES.get(composites.CompositeStatus(composite.status), ())
    return {**composite.to_dict(), "next": [{"status": s.value, "verb": composites.VERBS.get(s, s.value)}
                                            for s in nexts]}


def get_composites(deps: Deps, req: ApiRequest, site: str) -> dict[str, Any]:
    site = check_site(deps, site)
    return {"site_domain": site, "composites": [described(c) for c in deps.metadata.composites(site)]}


def _composite(deps: Deps, composite_id: str) -> Composite:
    found = deps.metadata.composite(check_uuid(composite_id, "composite"))
    if found is None:
        raise HttpError(404, f"no composite {composite_id[:60]}")
    return found


def get_composite(deps: Deps, req: ApiRequest, composite_id: str) -> dict[str, Any]:
    found = _composite(deps, composite_id)
    return _answer(deps, found)


def _answer(deps: Deps, found: Composite) -> dict[str, Any]:
    return {"composite": described(found),
            "history": [t.to_dict() for t in composites.history(deps, found.id)],
            "versions": [v.to_dict() for v in composites.versions(deps, found.id)]}


def post_edit(deps: Deps, req: ApiRequest, composite_id: str) -> Answer:
    found = _composite(deps, composite_id)
    body = json_body(req)
    markdown = body.get("markdown")
    if not isinstance(markdown, str):
        raise HttpError(400, "markdown must be a string: the composite's whole new text")
    try:
        edited, written = composites.edit(deps, found.id, markdown, req.access.actor, text_field(body, "note", False))
    except composites.IllegalMove as exc:
        raise HttpError(409, str(exc)) from None
    bus = deps.local_bus  # in one process, ingest indexes the new version now (as a composite's creation)
    if written and bus is not None and bus.pending():
        bus.drain()
    return (201 if written else 200), _answer(deps, edited)


def post_composite(deps: Deps, req: ApiRequest, composite_id: str) -> dict[str, Any]:
    found = _composite(deps, composite_id)
    body = json_body(req)
    status = str(text_field(body, "status"))
    try:
        moved = composites.move(deps, found.id, status, req.access.actor, text_field(body, "note", False))
    except composites.IllegalMove as exc:
        raise HttpError(409, str(exc)) from None
    return _answer(deps, moved)
