"""``GET /v1/openapi.json``: an OpenAPI 3.1 description generated from the route table the API serves.

Nothing here lists routes by hand. Paths and methods come from :data:`gleaner.backoffice.api._API`
(the table :func:`gleaner.backoffice.api.handle` dispatches on), so a route added there is
described at once; summaries, query parameters and bodies come from the route list in the API
module's docstring, which already says them for readers, and else from the handler's docstring.
The one ``/v1/`` route served elsewhere, ``/v1/texts/{text_hash}`` (the webhook's), is added from
:data:`OTHER_ROUTES`. A test checks that every table route is here and every route here answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gleaner import __version__

# One line of api.py's route list: "    [METHOD ]/v1/path[?query]   description".
_DOC_LINE = re.compile(r"^\s+(?:(GET|POST|PUT|PATCH|DELETE) )?(/v1/\S+?)(?:\?(\S+))?(?:\s{2,}(.*))?$")
_PARAM = re.compile(r"\{([a-z_]+)\}")
_INTEGER_QUERY = frozenset({"limit", "offset", "from", "to", "start", "end"})
# Handlers that answer 202: work accepted and going on in the background.
_ACCEPTED = frozenset({"post_resume", "post_site_run", "post_rescrape", "post_replay", "post_ingest"})
_CREATED = frozenset({"post_feedback", "post_remark", "post_edit"})
_ERRORS = {"400": "bad input", "401": "missing or wrong bearer token",
           "403": "an operator-only route asked with a site token",
           "404": "unknown object, or another tenant's (the same answer)", "409": "not possible in the current state"}


@dataclass(frozen=True, slots=True)
class RouteDoc:
    """What the docs say of one route: its query names and a sentence."""

    query: tuple[str, ...] = ()
    summary: str = ""


OTHER_ROUTES: dict[str, dict[str, RouteDoc]] = {
    "/v1/texts/{text_hash}": {"GET": RouteDoc(("start", "end"), "a verbatim slice of a stored canonical text "
                                                                 "(bytes [start, end), UTF-8)")},
}


def openapi_path(table_path: str) -> str:
    """The table's pattern as an OpenAPI path: ``/v1/sites/?`` -> ``/v1/sites``."""
    return table_path.removesuffix("/?")


def _shape(path: str) -> str:
    return _PARAM.sub("{}", path.rstrip("/"))


def route_docs(docstring: str) -> dict[tuple[str, str], RouteDoc]:
    """``{(METHOD, path shape): RouteDoc}`` from a module docstring's route list."""
    found: dict[tuple[str, str], RouteDoc] = {}
    for line in docstring.splitlines():
        match = _DOC_LINE.match(line)
        if not match:
            continue
        method, path, query, summary = match.groups()
        names = tuple(part.split("=", 1)[0] for part in (query or "").split("&") if part)
        found[(method or "GET", _shape(path))] = RouteDoc(names, (summary or "").strip())
    return found


def _operation(method: str, path: str, doc: RouteDoc | None, handler: Callable[..., Any] | None) -> dict[str, Any]:
    summary = doc.summary if doc and doc.summary else (handler.__doc__ or "").strip().split("\n")[0]
    name = getattr(handler, "__name__", "")
    if not name.isidentifier():  # no handler (another module's route) or a lambda: named by method and path
        name = f"{method.lower()}_{_shape(path).strip('/')}"
    params: list[dict[str, Any]] = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                                    for p in _PARAM.findall(path)]
    params += [{"name": q, "in": "query", "required": False,
                "schema": {"type": "integer" if q in _INTEGER_QUERY else "string"}} for q in (doc.query if doc else ())]
    ok = "202" if name in _ACCEPTED else "201" if name in _CREATED else "200"
    answer = {"description": "the answer", "content": {"application/json": {"schema": {"type": "object"}}}}
    if _streams(handler):
        answer = {"description": "JSON Lines, one object per line, sent while they are made",
                  "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}
    operation: dict[str, Any] = {
        "operationId": re.sub(r"[^A-Za-z0-9_]", "_", name), "summary": summary or f"{method} {path}",
        "responses": {ok: answer,
                      **{code: {"description": why, "content": {"application/json": {
                          "schema": {"$ref": "#/components/schemas/Error"}}}} for code, why in _ERRORS.items()}},
    }
    if params:
        operation["parameters"] = params
    if method in ("POST", "PUT", "PATCH"):
        operation["requestBody"] = {"required": False, "content": {"application/json": {"schema": {"type": "object"}}}}
    if name == "post_ingest":  # an upload: a file in a form, beside the JSON forms
        operation["requestBody"]["content"]["multipart/form-data"] = {"schema": {"type": "object", "properties": {
            "file": {"type": "string", "format": "binary"}, "site": {"type": "string"},
            "path": {"type": "string"}, "format": {"type": "string"}}, "required": ["file"]}}
        operation["responses"]["413"] = {"description": "past an upload ceiling (the limit is named)"}
        operation["responses"]["422"] = {"description": "a file its extractor cannot read (the reason is given)"}
    return operation


def _streams(handler: Callable[..., Any] | None) -> bool:
    """Whether the handler answers a ``Stream`` (its annotation, a string under postponed evaluation)."""
    returns = getattr(handler, "__annotations__", {}).get("return")
    return returns == "Stream" or getattr(returns, "__name__", None) == "Stream"


def document(table: Mapping[str, Mapping[str, Callable[..., Any]]] | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document for ``table`` (default: the API's own) and :data:`OTHER_ROUTES`."""
    from gleaner.backoffice import api

    routes = api._API if table is None else table  # the very table api.handle dispatches on
    docs = route_docs(api.__doc__ or "")
    paths: dict[str, dict[str, Any]] = {}
    for table_path, methods in routes.items():
        path = openapi_path(table_path)
        for method, handler in methods.items():
            doc = docs.get((method, _shape(path)))
            paths.setdefault(path, {})[method.lower()] = _operation(method, path, doc, handler)
    for path, described in OTHER_ROUTES.items():
        for method, doc in described.items():
            paths.setdefault(path, {})[method.lower()] = _operation(method, path, doc, None)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Gleaner", "version": __version__,
                 "description": "The kept copy over HTTP: sites, runs, documents and versions, change events, "
                                "rules, review, conflicts, verbatim text slices. MCP is served at /mcp."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "the operator bearer or a site token; none on loopback"}},
            "schemas": {"Error": {"type": "object", "properties": {"error": {"type": "string"}},
                                  "required": ["error"]}},
        },
    }
