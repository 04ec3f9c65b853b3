"""What every ``/v1/`` handler shares: the request, who it acts for, errors, and checked query and body values.

A handler is ``fn(deps, request, *path_segments)`` returning a JSON object, ``(status, object)``, or a
:class:`Stream` (a body produced while it is sent). Every query and body value is checked here, so a
bad one is a 400 naming the value, never a database error.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gleaner.app import Deps
from gleaner.errors import InvalidInput
from gleaner.operator import sites as operator_sites
from gleaner.serving.textcheck import text_problem

Answer = tuple[int, dict[str, Any]]

MAX_PAGE = 1000
DEFAULT_PAGE = 100
# Past any table this holds and inside PostgreSQL's integer: a larger offset or version is bad input.
MAX_INT_ARG = 2**31 - 1


def valid_site_domain(value: str) -> bool:
    """DESIGN.md's tenant key, exactly as written (no case folding: a URL names one site)."""
    try:
        return operator_sites.site_key(value) == value
    except InvalidInput:
        return False


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Access:
    """Who a request acts for: the operator (every tenant) or one site (a site-bound token)."""

    site_domain: str | None = None
    session: bool = False  # acting through a browser login session (the pages offer a logout)

    @property
    def is_operator(self) -> bool:
        return self.site_domain is None

    @property
    def actor(self) -> str:
        """Who did it, as a history records it: the credential (Gleaner's callers are not users)."""
        return "operator" if self.site_domain is None else f"site token for {self.site_domain}"


OPERATOR = Access()


@dataclass(frozen=True, slots=True)
class ApiRequest:
    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    access: Access = OPERATOR
    content_type: str = ""  # the body's media type (an upload's multipart/form-data names its boundary here)


def operator_only(req: ApiRequest) -> None:
    if not req.access.is_operator:
        raise HttpError(403, "only the operator may read this; a site token sees its own site")


# -- query values ---------------------------------------------------------------------------------

def int_arg(query: Mapping[str, str], name: str, default: int | None, low: int = 0, high: int | None = None
            ) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    # int() also takes other scripts' digits and "1_000"; a query value is plain ASCII decimal digits.
    if not re.fullmatch(r"-?[0-9]{1,10}", raw):
        raise HttpError(400, f"{name} must be an integer, not {raw[:40]!r}")
    value = int(raw)
    top = MAX_INT_ARG if high is None else high
    if value < low or value > top:
        raise HttpError(400, f"{name} must be between {low} and {top}")
    return value


def page_args(query: Mapping[str, str]) -> tuple[int, int]:
    limit = int_arg(query, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    offset = int_arg(query, "offset", 0, 0)
    assert limit is not None and offset is not None
    return limit, offset


def choice_arg(query: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    value = query.get(name) or None
    if value is not None and value not in allowed:
        raise HttpError(400, f"{name} must be one of {', '.join(allowed)}")
    return value


def time_arg(query: Mapping[str, str], name: str) -> datetime | None:
    if not query.get(name):
        return None
    try:
        value = datetime.fromisoformat(query[name])
        # Near the ends of the calendar an offset moves the instant out of it (year 0 or 10000): the
        # database cannot hold that, so it is refused here. A time without an offset is UTC.
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        raise HttpError(400, f"{name} must be an ISO 8601 time between the years 1 and 9999") from None


def prefix_arg(query: Mapping[str, str]) -> str:
    prefix = query.get("prefix") or "/"
    if not prefix.startswith("/") or len(prefix) > 2048:
        raise HttpError(400, "prefix must be a path starting with '/'")
    return prefix if prefix.endswith("/") else prefix + "/"


def check_uuid(value: str, what: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise HttpError(404, f"no {what} {value[:60]}") from None


def check_site(deps: Deps, site: str) -> str:
    if not valid_site_domain(site) or not (deps.browse.site_exists(site)
                                           or operator_sites.find_site(deps, site) is not None):
        raise HttpError(404, f"no site {site[:80]}")
    return site


def json_body(req: ApiRequest) -> dict[str, Any]:
    try:
        body = json.loads(req.body or b"{}")
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise HttpError(400, "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise HttpError(400, "the body must be a JSON object")
    problem = text_problem(body)
    if problem:
        raise HttpError(400, f"the body {problem}")
    return body


def text_field(body: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 2048:
        raise HttpError(400, f"{name} must be a non-empty string")
    return value


def choice_field(body: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    value = body.get(name)
    if value not in allowed:
        raise HttpError(400, f"{name} must be one of {', '.join(allowed)}")
    return str(value)


@dataclass(frozen=True, slots=True)
class Stream:
    """A 200 answer whose body is made while it is sent (an export of a large site), not held whole.

    ``chunks`` is a generator: the WSGI layer runs each step in the caller's tenant scope and closes it
    when the client goes away."""

    chunks: Iterator[bytes]
    content_type: str

    def close(self) -> None:
        close = getattr(self.chunks, "close", None)
        if close is not None:
            close()
