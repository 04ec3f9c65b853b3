"""``GET /v1/search?q=&site=&limit=``: gleaner.retrieval's search over HTTP, in the caller's tenant scope.

A site token searches its own site only (row-level security); naming another site answers 404, as
every route does for another tenant's objects.
"""

from __future__ import annotations

from typing import Any

from gleaner.app import Deps
from gleaner.backoffice.api import ApiRequest, HttpError, check_site, int_arg
from gleaner.retrieval.ranking import MAX_LIMIT, MAX_QUERY_CHARS, search


def get_search(deps: Deps, req: ApiRequest) -> dict[str, Any]:
    query = (req.query.get("q") or "").strip()
    if not query:
        raise HttpError(400, "q (the search query) is required")
    if len(query) > MAX_QUERY_CHARS:
        raise HttpError(400, f"q is longer than {MAX_QUERY_CHARS} characters")
    site = req.query.get("site") or None
    if site is not None:
        site = check_site(deps, site)
    limit = int_arg(req.query, "limit", 10, 1, MAX_LIMIT)
    return search(deps, query, site_domain=site, limit=limit or 10)
