"""Gleaner's HTTP surfaces as one WSGI app composed of routes, and the server that runs it.

``gleaner serve`` runs :func:`compose` of its routes under waitress
(:func:`make_server`): a fixed pool of worker threads, idle and slow
connections closed after a timeout, at most ``connection_limit`` connections,
and a body cap the server enforces while it reads (a declared
``Content-Length`` over the cap is refused before any body byte is read; a
chunked body is cut off at the cap). Another surface is one more route::

    app = compose([("/v1/", api_app), ("/ui/", ui_app), ("/", webhook_app)])

Handlers read a body only through :func:`read_body`, after they have
authenticated the caller: it refuses a malformed or negative (400) or oversized
(413) ``Content-Length`` and never reads past the cap. A request with neither a
``Content-Length`` nor a chunked body has an empty body (RFC 9112): nothing is read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

log = logging.getLogger(__name__)

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]

_REASONS = {200: "OK", 202: "Accepted", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 411: "Length Required", 413: "Content Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}


class BodyRefused(Exception):
    """The request body cannot be read as sent: the HTTP status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def read_body(environ: Environ, cap: int, stream: Callable[[], Any] | None = None) -> bytes:
    """The request body, at most ``cap`` bytes; BodyRefused (400/413) otherwise. Never reads past cap + 1.

    A chunked body arrives with no Content-Length: waitress has de-chunked it (capped) and set one;
    other servers mark it ``wsgi.input_terminated``, and it is read up to the cap. ``stream`` opens
    the input when it is read (default: ``wsgi.input``); a refused body is never opened.
    """
    open_stream = stream or (lambda: environ["wsgi.input"])
    raw = environ.get("CONTENT_LENGTH")
    if raw is None or raw == "":
        if not environ.get("wsgi.input_terminated"):
            return b""  # no Content-Length and not chunked: the body is empty (RFC 9112, 6.3), nothing is read
        data = _read(open_stream(), cap + 1)
        if len(data) > cap:
            raise BodyRefused(413, f"body larger than {cap} bytes")
        return data
    if not raw.isascii() or not raw.isdigit():
        raise BodyRefused(400, "malformed Content-Length")
    declared = int(raw)
    if declared > cap:
        raise BodyRefused(413, f"body larger than {cap} bytes")
    data = _read(open_stream(), declared)
    if len(data) < declared:
        raise BodyRefused(400, "body shorter than its Content-Length")
    return data


def query_of(raw: bytes) -> dict[str, str]:
    """A query string's parameters; bytes that are not UTF-8 survive as lone surrogates (surrogateescape),
    so the handler refuses them (400) instead of searching for U+FFFD replacements."""
    text = raw.decode("utf-8", "surrogateescape")
    return dict(parse_qsl(text, keep_blank_values=True, errors="surrogateescape"))


def _read(stream: Any, size: int) -> bytes:
    parts: list[bytes] = []
    left = size
    while left > 0:
        chunk = stream.read(left)
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def respond(start_response: StartResponse, status: int, body: Any, *, head: bool = False,
            headers: Sequence[tuple[str, str]] = ()) -> list[bytes]:
    """A JSON answer."""
    data = json.dumps(body, default=str).encode("utf-8")
    start_response(f"{status} {_REASONS.get(status, 'Status')}",
                   [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *headers])
    return [] if head else [data]


def compose(routes: Sequence[tuple[str, WsgiApp]]) -> WsgiApp:
    """One app over (path prefix, app) pairs: the longest prefix that the path starts with answers.

    Each app sees the whole path. A prefix ending in ``/`` also matches the path without it
    (``/v1`` goes to the ``/v1/`` app); no match is a JSON 404.
    """
    table = sorted(routes, key=lambda route: len(route[0]), reverse=True)

    def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        for prefix, handler in table:
            if path.startswith(prefix) or (prefix.endswith("/") and path == prefix[:-1]):
                return handler(environ, start_response)
        return respond(start_response, 404, {"error": f"no route {path[:200]}"})

    return app


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """How much of the machine callers can hold (see :func:`make_server`)."""

    max_body_bytes: int
    threads: int = 8  # requests in progress at once; more wait in the server's queue
    connection_limit: int = 100  # open sockets; past it the server stops accepting until some close
    channel_timeout: float = 30.0  # an idle or trickling connection is closed after this many seconds
    in_memory_body_bytes: int = 64 * 1024  # a larger body waits in a temporary file, not in memory


def make_server(app: WsgiApp, host: str, port: int, limits: ServerLimits) -> Any:
    """A waitress server for app (not started: call ``run()`` or ``close()``)."""
    from waitress.server import create_server

    return create_server(
        app, host=host, port=port, threads=limits.threads, connection_limit=limits.connection_limit,
        channel_timeout=int(max(1, limits.channel_timeout)), cleanup_interval=max(1, int(limits.channel_timeout) // 2),
        # waitress refuses a body of max_request_body_size or more; ours refuses more than the cap.
        max_request_body_size=limits.max_body_bytes + 1, inbuf_overflow=limits.in_memory_body_bytes,
        # Forwarding headers reach the app, which trusts none of them for addresses but reads their presence
        # as "a proxy is in front": no credential-less access then (gleaner.serving.hostgate).
        ident="gleaner", expose_tracebacks=False, clear_untrusted_proxy_headers=False,
    )
