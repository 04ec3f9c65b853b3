"""The back office as one WSGI callable: ``/v1/`` (JSON) and ``/ui/`` (pages), behind an optional bearer.

``gleaner serve`` mounts it beside the ingest webhook; any WSGI host (a cloud
function, waitress) can serve it as is. Two credentials, each an
``Authorization: Bearer <token>`` (compared in constant time):

- the operator bearer (``GLEANER_WEBHOOK_SECRET``): every tenant, under ``tenancy.all_tenants()``;
- a site token (``gleaner tokens add --site-domain SITE``): that site only, under
  ``tenancy.scope(SITE)``, so row-level security hides every other tenant's rows and
  another site's ids answer 404, exactly like ids that do not exist.

Locally on 127.0.0.1 it runs without the operator bearer (DESIGN.md): a request
without a credential is the operator's, one with a site token acts for that
site, one with a wrong token gets 401. Given the bearer, every request needs a
credential or gets 401. A browser cannot add that header, so ``/ui/login``
takes the token once and sets a cookie holding an HMAC keyed by the operator
bearer (of a constant for the operator, of the token's id and digest for a site
token: revoking the token ends the session), HttpOnly, Secure, SameSite=Strict,
which the pages then carry; the token itself never sits in the browser.

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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.backoffice import api, pages
from gleaner.backoffice.api import OPERATOR, Access
from gleaner.callers import bearer_token, identity_claims, secret_matches
from gleaner.store.dberrors import DatabaseRefused, is_permanent
from gleaner.store.tokens import TOKEN_PREFIX, SiteToken
from gleaner.textcheck import text_problem
from gleaner.web import query_of

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
            # No tenant until the credential names one: _answer enters the caller's scope (docs/security.md).
            with tenancy.no_tenant():
                status, headers, body = self._answer(environ)
        except DatabaseRefused as exc:
            if not is_permanent(exc):
                raise
            # A backstop: the parsers refuse what they know; a value the database still cannot store is
            # the caller's bad input all the same (logged, as it names a check the parsers lack).
            log.warning("back office input refused by the database: %s", exc)
            status, headers, body = 400, [("Content-Type", "application/json")], \
                b'{"error": "the database refused a value in the request"}'
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
        access = self._access(environ)
        if access is None:
            if not is_api and method == "GET" and self.bearer is not None:
                return 303, [("Location", LOGIN_PATH), ("Content-Type", "text/plain")], b"log in first"
            status, headers, body = _json(401, {"error": "send Authorization: Bearer <token>"})
            headers.append(("WWW-Authenticate", 'Bearer realm="gleaner"'))
            return status, headers, body
        with _acting_for(access):
            return self._dispatch(environ, path, method, access)

    def _dispatch(self, environ: dict[str, Any], path: str, method: str, access: Access
                  ) -> tuple[int, list[tuple[str, str]], bytes]:
        is_api = path.startswith("/v1/")
        # WSGI hands the path and query as latin-1-decoded bytes (PEP 3333): read them as the UTF-8 they are,
        # keeping bytes that are not as lone surrogates, so that they are refused below with NULs.
        path = path.encode("latin-1").decode("utf-8", "surrogateescape")
        query = query_of(str(environ.get("QUERY_STRING", "")).encode("latin-1"))
        read = _read_body(environ)
        if read is None:
            return _json(413, {"error": f"bodies are limited to {MAX_BODY_BYTES} bytes"})
        body = read
        form = query_of(body) if body and not is_api else {}
        problem = text_problem([path, *query.keys(), *query.values(), *form.keys(), *form.values()])
        if problem:
            message = f"the path, query or form {problem}"
            if is_api:
                return _json(400, {"error": message})
            page = pages.render("error.html", 400, status=400, message=message)
            return page.status, [("Content-Type", page.content_type)], page.body.encode("utf-8")
        if is_api:
            status, answer = api.handle(api.ApiRequest(method, path, query, body, access), self.deps)
            return _json(status, answer)
        page = pages.handle(pages.PageRequest(method, path, query, form, access), self.deps)
        headers = [("Content-Type", page.content_type), ("Cache-Control", "no-store"),
                   ("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline';"
                                               " script-src 'self' 'unsafe-inline'; frame-ancestors 'none'")]
        if page.location:
            headers.append(("Location", page.location))
        return page.status, headers, page.body.encode("utf-8")

    def access_for(self, environ: dict[str, Any]) -> Access | None:
        """Whom a request with this environ acts for, or None (401): other surfaces served beside the
        back office (``/mcp``) decide their caller through this same gate."""
        return self._access(environ)

    def _access(self, environ: dict[str, Any]) -> Access | None:
        """Whom the request acts for, or None (401): its bearer, else its session cookie, else (only
        without an operator bearer, on loopback) the operator."""
        header = str(environ.get("HTTP_AUTHORIZATION", ""))
        token = bearer_token(header)
        # A Google identity token there is Cloud Run's gate (IAM admitted the caller, e.g. through
        # `gcloud run services proxy`), never the back office's credential: the cookie still decides.
        if header and not (token is not None and identity_claims(token) is not None):
            return self._token_access(token) if token is not None else None
        session = _cookie(environ)
        if session is not None and self.bearer is not None:
            return self._session_access(session)
        return OPERATOR if self.bearer is None else None

    def _token_access(self, token: str) -> Access | None:
        # On loopback (no bearer required) the operator's secret still names the operator, as it does
        # at /v1/texts/ beside it: a client holding it needs one credential for every route.
        if secret_matches(token, self.bearer or self.deps.settings.webhook_secret):
            return OPERATOR
        site = self._site_token(token)
        return Access(site.site_domain) if site is not None else None

    def _site_token(self, token: str) -> SiteToken | None:
        if not token.startswith(TOKEN_PREFIX) or len(token) >= 100:
            return None
        return self.deps.tokens.site_token(token)

    def _session_access(self, session: str) -> Access | None:
        if hmac.compare_digest(session.encode(), self._session(None).encode()):
            return OPERATOR
        token_id, _, _mac = session.partition(".")
        site = self.deps.tokens.site_token_by_id(token_id)
        if site is not None and hmac.compare_digest(session.encode(), self._session(site).encode()):
            return Access(site.site_domain)
        return None

    def _session(self, site: SiteToken | None) -> str:
        """The cookie value: for the operator an HMAC of a constant, for a site token its id and an HMAC
        of its id and digest (so revoking the token ends its sessions); keyed by the operator bearer."""
        assert self.bearer is not None
        if site is None:
            return hmac.new(self.bearer.encode(), b"gleaner back office session", hashlib.sha256).hexdigest()
        mac = hmac.new(self.bearer.encode(), f"site session {site.id} ".encode() + site.token_sha256, hashlib.sha256)
        return f"{site.id}.{mac.hexdigest()}"

    def _login(self, environ: dict[str, Any], method: str) -> tuple[int, list[tuple[str, str]], bytes]:
        html = [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")]
        if method == "POST":
            body = _read_body(environ) or b""
            token = dict(parse_qsl(body.decode("utf-8", errors="replace"))).get("token", "")
            operator = secret_matches(token, self.bearer)
            site = None if operator else self._site_token(token)
            if operator or site is not None:
                cookie = f"{COOKIE}={self._session(site)}; Path=/; HttpOnly; Secure; SameSite=Strict"
                return 303, [("Location", "/ui/"), ("Set-Cookie", cookie), ("Content-Type", "text/plain")], b"ok"
            return 401, html, pages.render("login.html", failed=True).body.encode("utf-8")
        if method != "GET":
            return _json(405, {"error": "use GET or POST"})
        return 200, html, pages.render("login.html", failed=False).body.encode("utf-8")


@contextmanager
def _acting_for(access: Access) -> Iterator[object]:
    """The operator's console reads and steers every tenant; a site token's, its own site only."""
    if access.site_domain is None:
        with tenancy.all_tenants() as chosen:
            yield chosen
    else:
        with tenancy.scope(access.site_domain) as chosen:
            yield chosen


def _cookie(environ: dict[str, Any]) -> str | None:
    cookie = SimpleCookie()
    try:
        cookie.load(str(environ.get("HTTP_COOKIE", "")))
    except CookieError:
        return None
    session = cookie.get(COOKIE)
    return session.value if session is not None else None


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


_REASONS = {200: "OK", 202: "Accepted", 303: "See Other", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 409: "Conflict", 413: "Payload Too Large",
            500: "Internal Server Error"}

