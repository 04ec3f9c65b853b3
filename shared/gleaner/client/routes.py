"""Which server route each client method calls: declared once, on the method, and used to build its path.

``@endpoint("GET", "/v1/runs/{run}")`` hands the method its :class:`Route` (first argument after
``self``), so the path a method requests is the template it declares, and a test can compare the
declared routes with the server's OpenAPI document without calling anything.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import quote

P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S")

_SEGMENT = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    template: str  # as the OpenAPI document writes it: /v1/documents/{document}/versions/{version}

    def path(self, **segments: str | int) -> str:
        """The template with each ``{name}`` filled in, percent-encoded as one path segment."""
        names = set(_SEGMENT.findall(self.template))
        if names != set(segments):
            raise TypeError(f"{self.template} needs {sorted(names)}, got {sorted(segments)}")
        return _SEGMENT.sub(lambda m: quote(str(segments[m.group(1)]), safe=""), self.template)


def endpoint(method: str, template: str) -> Callable[[Callable[Concatenate[S, Route, P], T]],
                                                      Callable[Concatenate[S, P], T]]:
    """Bind a method to its route (readable back as ``method.route``)."""
    route = Route(method, template)

    def bind(fn: Callable[Concatenate[S, Route, P], T]) -> Callable[Concatenate[S, P], T]:
        @functools.wraps(fn)
        def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return fn(self, route, *args, **kwargs)

        # help() and editors show the caller's signature, without the route argument.
        signature = inspect.signature(fn)
        params = list(signature.parameters.values())
        call.__signature__ = signature.replace(parameters=[params[0], *params[2:]])  # type: ignore[attr-defined]
        call.route = route  # type: ignore[attr-defined]
        return call

    return bind


def routes_of(cls: type) -> dict[str, Route]:
    """``{method name: Route}`` for every method of ``cls`` bound with :func:`endpoint`."""
    found: dict[str, Route] = {}
    for name, member in vars(cls).items():
        route: Any = getattr(member, "route", None)
        if isinstance(route, Route):
            found[name] = route
    return found
