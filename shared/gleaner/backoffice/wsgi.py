"""The back office as one WSGI callable: ``/v1/`` (JSON) and ``/ui/`` (pages), behind an optional bearer.

``gleaner serve`` mounts it beside the ingest webhook; any WSGI host (a cloud
function, waitress) can serve it as is. Locally on 127.0.0.1 it runs without a
bearer (DESIGN.md); given one, every request must carry
``Authorization: Bearer <token>`` (compared in constant time) or gets 401. A
browser cannot add that header, so ``/ui/login`` takes the token once and sets
a cookie holding an HMAC of it (HttpOnly, Secure, SameSite=Strict), which the
pages then carry; the token itself never sits in the browser.

A browser on the operator's machine also runs other sites' pages, which can
send it requests: state-changing requests (anything but GET and HEAD) are refused with 403 unless
they come from the back office's own origin (``Sec-Fetch-Site``/``Origin``), and
the API's commands must be JSON, which no cross-site form can send.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Iterable
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from gleaner.app import Deps
from gleaner.backoffice import api, pages

log = logging.getLogger(__name__)

LOGIN_PATH = "/ui/login"
COOKIE = "gleaner_backoffice"
MAX_BODY_BYTES = 64 * 1024  # forms and JSON commands are a few hundred bytes
PREFIXES = ("/v1/", "/ui")

StartResponse = Callable[..., Any]


def serves(path: str) -> bool:
    """Whether a path belongs to the back office (for hosts that mount it beside other routes).
    ``/v1/texts/`` stays the webhook's (``gleaner.textsapi``), with the webhook's callers and bearer."""
    if path.startswith("/v1/texts/"):
        return False
    return path.startswith("/v1/") or path == "/ui" or path.startswith("/ui/")


class BackofficeApp:
    def __init__(self, deps: Deps, bearer: str | None = None) -> None:
        self.deps = deps
        self.bearer = bearer

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            status, headers, body = self._answer(environ)
        except Exception:  # one failing request must not take the server down; the log has the traceback
            log.exception("back office request failed")
            status, headers, body = 500, [("Content-Type", "application/json")], b'{"error": "internal error"}'
        headers.append(("Content-Length", str(len(body))))
        headers.append(("X-Content-Type-Options", "nosniff"))
        start_response(f"{status} {_REASONS.get(status, 'Status')}", headers)
        return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else body]

    def _answer(self, environ: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
        path = environ.get("PATH_INFO") or "/"
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        is_api = path.startswith("/v1/")
        if not serves(path):
            return _json(404, {"error": f"no such endpoint {path[:200]}"})
        if method not in ("GET", "HEAD"):
            refused = _cross_site(environ, is_api and method == "POST")
            if refused:
                return _json(403, {"error": refused})
        if self.bearer is not None and path == LOGIN_PATH:
            return self._login(environ, method)
        if self.bearer is not None and not self._authorized(environ):
            if not is_api and method == "GET":
                return 303, [("Location", LOGIN_PATH), ("Content-Type", "text/plain")], b"log in first"
            status, headers, body = _json(401, {"error": "send Authorization: Bearer <token>"})
            headers.append(("WWW-Authenticate", 'Bearer realm="gleaner"'))
            return status, headers, body
        query = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        read = _read_body(environ)
        if read is None:
            return _json(413, {"error": f"bodies are limited to {MAX_BODY_BYTES} bytes"})
        body = read
        if is_api:
            status, answer = api.handle(api.ApiRequest(method, path, query, body), self.deps)
            return _json(status, answer)
        form = dict(parse_qsl(body.decode("utf-8", errors="replace"))) if body else {}
        page = pages.handle(pages.PageRequest(method, path, query, form), self.deps)
        headers = [("Content-Type", page.content_type), ("Cache-Control", "no-store"),
                   ("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline';"
                                               " script-src 'self' 'unsafe-inline'; frame-ancestors 'none'")]
        if page.location:
            headers.append(("Location", page.location))
        return page.status, headers, page.body.encode("utf-8")

    def _authorized(self, environ: dict[str, Any]) -> bool:
        assert self.bearer is not None
        header = str(environ.get("HTTP_AUTHORIZATION", ""))
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.bearer.encode()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(str(environ.get("HTTP_COOKIE", "")))
        except CookieError:
            return False
        session = cookie.get(COOKIE)
        return session is not None and hmac.compare_digest(session.value.encode(), self._session().encode())

    def _session(self) -> str:
        assert self.bearer is not None
        return hmac.new(self.bearer.encode(), b"gleaner back office session", hashlib.sha256).hexdigest()

    def _login(self, environ: dict[str, Any], method: str) -> tuple[int, list[tuple[str, str]], bytes]:
        html = [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")]
        if method == "POST":
            body = _read_body(environ) or b""
            token = dict(parse_qsl(body.decode("utf-8", errors="replace"))).get("token", "")
            assert self.bearer is not None
            if hmac.compare_digest(token.encode(), self.bearer.encode()):
                cookie = f"{COOKIE}={self._session()}; Path=/; HttpOnly; Secure; SameSite=Strict"
                return 303, [("Location", "/ui/"), ("Set-Cookie", cookie), ("Content-Type", "text/plain")], b"ok"
            return 401, html, pages.render("login.html", failed=True).body.encode("utf-8")
        if method != "GET":
            return _json(405, {"error": "use GET or POST"})
        return 200, html, pages.render("login.html", failed=False).body.encode("utf-8")


def _json(status: int, answer: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    return status, [("Content-Type", "application/json")], json.dumps(answer, default=str).encode("utf-8")


def _read_body(environ: dict[str, Any]) -> bytes | None:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > MAX_BODY_BYTES:
        return None
    return environ["wsgi.input"].read(length) if length > 0 else b""


def _cross_site(environ: dict[str, Any], needs_json: bool) -> str | None:
    """Why a state-changing request is refused as cross-site, or None when it is the back office's own."""
    fetch_site = environ.get("HTTP_SEC_FETCH_SITE")
    if fetch_site and fetch_site not in ("same-origin", "none"):
        return "cross-site requests may not change anything"
    origin = environ.get("HTTP_ORIGIN")
    if origin and (origin == "null" or urlsplit(origin).netloc != environ.get("HTTP_HOST")):
        return "cross-origin requests may not change anything"
    # Other methods than POST always need a CORS preflight; a POST that is not JSON may come from any form.
    if needs_json and not str(environ.get("CONTENT_TYPE", "")).startswith("application/json"):
        return "send commands as application/json"
    return None


_REASONS = {200: "OK", 303: "See Other", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large", 500: "Internal Server Error"}


def answer_http(app: BackofficeApp, request: BaseHTTPRequestHandler) -> None:
    """Answer one request of the standard library's HTTP server through the WSGI app (``gleaner serve``)."""
    parts = urlsplit(request.path)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.command, "PATH_INFO": parts.path, "QUERY_STRING": parts.query,
        "SERVER_PROTOCOL": request.request_version, "wsgi.url_scheme": "http",
        "CONTENT_TYPE": request.headers.get("Content-Type", ""), "wsgi.input": request.rfile,
    }
    for key, value in request.headers.items():
        environ["HTTP_" + key.upper().replace("-", "_")] = value
    declared = request.headers.get("Content-Length")
    chunked = request.headers.get("Transfer-Encoding", "").lower() == "chunked"
    try:
        length = int(declared) if declared else 0
    except ValueError:
        length = -1
    if chunked or length < 0 or length > MAX_BODY_BYTES:
        environ["CONTENT_LENGTH"] = str(MAX_BODY_BYTES + 1)  # answered 413 without reading
    else:
        environ["CONTENT_LENGTH"] = str(length)
    sent: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        sent[:] = [status, headers]

    body = b"".join(app(environ, start_response))
    code, _, reason = sent[0].partition(" ")
    request.send_response(int(code), reason)
    for key, value in sent[1]:
        request.send_header(key, value)
    if chunked or length < 0 or length > MAX_BODY_BYTES:
        request.send_header("Connection", "close")  # the unread body must not be parsed as a request
        request.close_connection = True
    request.end_headers()
    if request.command != "HEAD":
        request.wfile.write(body)
