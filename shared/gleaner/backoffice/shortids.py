"""Short ids in back-office and API paths: ``/ui/runs/b86e645c`` is the run whose id starts so.

The pages show 8-character ids; a path may carry one (or any unique prefix of 4+ hex digits) wherever
it carries a full id. The one resolver is :mod:`gleaner.display.idprefix`; this maps a path's segments to the
kind of id they hold (the segment after ``runs`` is a run id, and so on).
"""

from __future__ import annotations

from gleaner.app import Deps
from gleaner.backoffice.request import HttpError
from gleaner.display import idprefix

# The collection a path segment names -> the kind of id the next segment holds.
COLLECTIONS = {"runs": "run", "documents": "document", "subscriptions": "subscription", "composites": "composite",
               "deliveries": "delivery", "conflicts": "conflict", "rules": "rule", "tokens": "token"}


def expand(deps: Deps, path: str) -> str:
    """``path`` with every short id made whole; HttpError 404 (none) or 409 (several, named) otherwise."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        kind = COLLECTIONS.get(parts[i - 1])
        segment = parts[i]
        if kind is None or not segment or idprefix.full_id(segment) is not None:
            continue
        if idprefix.hex_prefix(segment) is None:
            continue  # not an id at all: the route (or its absence) answers
        try:
            parts[i] = idprefix.resolve(kind, segment, deps.metadata.ids_between)
        except idprefix.AmbiguousId as exc:
            raise HttpError(409, str(exc)) from None
        except idprefix.UnknownId as exc:
            raise HttpError(404, str(exc)) from None
    return "/".join(parts)
