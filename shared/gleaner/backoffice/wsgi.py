"""The back office as one WSGI callable: ``/v1/`` (JSON) and ``/ui/`` (pages), behind an optional bearer.

``gleaner serve`` mounts it beside the ingest webhook; any WSGI host (a cloud
function, waitress) can serve it as is. Two credentials, each an
``Authorization: Bearer <token>`` (compared in constant time):

- the operator bearer (``GLEANER_WEBHOOK_SECRET``): every tenant, under ``tenancy.all_tenants()``;
- a site token (``gleaner tokens add --site-domain SITE``): that site only, under
  ``tenancy.scope(SITE)``, so row-level security hides every other tenant's rows and
  another site's ids answer 404, exactly like ids that do not exist.

Without a credential, a request is the operator's only when it comes from this
machine to a loopback name with no proxy in between (``gleaner.serving.hostgate``; the
server's Host rule has already refused names that are not its own). A wrong
token is 401 everywhere. A browser cannot add the header, so ``/ui/login``
takes the token once and starts a server-side session
(``gleaner.backoffice.login``): a random id in an HttpOnly, SameSite=Strict
cookie, Secure when served over HTTPS, its digest and expiry in the database,
ended by ``/ui/logout``, by its expiry or by revoking the site token.

A browser on the operator's machine also runs other sites' pages, which can
send it requests: state-changing requests (anything but GET and HEAD) are refused with 403 unless
they come from the back office's own origin (``Sec-Fetch-Site``/``Origin``), the API's commands
must be JSON, which no cross-site form can send, and every form POST must carry the page's CSRF token.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.backoffice import api, pages
from gleaner.backoffice.api import OPERATOR, Access, Stream
from gleaner.backoffice.login import COOKIE, LOGIN_PATH, LOGOUT_PATH, Csrf, Login, cookie, refused_form
from gleaner.cloud.callers import bearer_token, identity_claims, secret_matches
from gleaner.errors import RetryableError
from gleaner.operator.composites import MAX_EDIT_BYTES
from gleaner.serving.hostgate import HostPolicy, client_address
from gleaner.serving.textcheck import text_problem
from gleaner.serving.web import query_of
from gleaner.store.access.sessions import SessionStore
from gleaner.store.access.tokens import TOKEN_PREFIX, SiteToken
from gleaner.store.backends.dberrors import DatabaseRefused, is_permanent

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024  # forms and JSON commands are a few hundred bytes
# A composite's edit carries its whole text (JSON-escaped or form-encoded: up to three bytes a byte).
_EDIT_BODY_BYTES = 3 * MAX_EDIT_BYTES + MAX_BODY_BYTES
_EDIT_PATH = re.compile(r"/(?:v1|ui)/composites/[^/]+/edit/?")
RETRY_AFTER = 5  # seconds a client waits while the database is unavailable (503)
PREFIXES = ("/v1/", "/ui")

StartResponse = Callable[..., Any]


def serves(path: str) -> bool:
    """Whether a path belongs to the back office (for hosts that mount it beside other routes).
    ``/v1/texts/`` stays the webhook's (``gleaner.serving.textsapi``), with the webhook's callers and bearer."""
    if path.startswith("/v1/texts/"):
        return False
    return path.startswith("/v1/") or path == "/ui" or path.startswith("/ui/")


class BackofficeApp:
    def __init__(self, deps: Deps, bearer: str | None = None, hosts: HostPolicy | None = None) -> None:
        """``bearer`` None: no credential exists and every request is the operator's (an in-process embedding,
        tests, the benchmark; never ``gleaner serve``). ``hosts``: the server's Host policy, which lets a
        request from this machine to a loopback name act as the operator without a credential."""
        self.deps = deps
        self.bearer = bearer
        self.hosts = hosts
        # The forms' CSRF key: the operator bearer where there is one (tokens survive a restart), else random.
        self._csrf_key = (bearer or secrets.token_urlsafe(32)).encode()
        self.sessions = SessionStore(deps.engine)
        trusted = deps.settings.trusted_proxies
        self.login = Login(self.sessions, lambda token: secret_matches(token, self.bearer), self._site_token,
                           client_of=lambda environ: client_address(environ, trusted))

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            # No tenant until the credential names one: _answer enters the caller's scope (docs/security.md).
            with tenancy.no_tenant():
                status, headers, body = self._answer(environ)
        except RetryableError as exc:
            # The database is down or restarting (gleaner serve starts the embedded one again): a wait, not a
            # failure of the request. One line in the log; the driver's traceback only at debug level.
            log.warning("back office request answered 503: %s", exc)
            log.debug("the database error", exc_info=True)
            status, headers, body = 503, [("Content-Type", "application/json"), ("Retry-After", str(RETRY_AFTER))], \
                b'{"error": "the database is unavailable; try again shortly"}'
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
        headers.append(("X-Content-Type-Options", "nosniff"))
        if isinstance(body, bytes):
            headers.append(("Content-Length", str(len(body))))
        start_response(f"{status} {_REASONS.get(status, 'Status')}", headers)
        if isinstance(body, bytes):
            return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else body]
        if environ.get("REQUEST_METHOD") == "HEAD":
            body.close()
            return []
        return body  # no length: the server sends it chunked, as it is made

    def _answer(self, environ: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes | ScopedChunks]:
        path = environ.get("PATH_INFO") or "/"
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        is_api = path.startswith("/v1/")
        if not serves(path):
            return _json(404, {"error": f"no such endpoint {path[:200]}"})
        if method not in ("GET", "HEAD"):
            refused = _cross_site(environ, is_api and method == "POST" and not _is_upload(path))
            if refused:
                return _json(403, {"error": refused})
        if self.bearer is not None and path in (LOGIN_PATH, LOGOUT_PATH):
            form = query_of(_read_body(environ) or b"") if method == "POST" else {}
            if text_problem(list(form.items())):
                return _json(400, {"error": "the form is not valid text"})
            if path == LOGOUT_PATH:
                return self.login.logout(environ) if method == "POST" else _json(405, {"error": "use POST"})
            return self.login.answer(environ, method, form, query_of(str(environ.get("QUERY_STRING", "")).encode()))
        access = self._access(environ)
        if access is None:
            if not is_api and method == "GET" and self.bearer is not None:
                return 303, [("Location", LOGIN_PATH), ("Content-Type", "text/plain")], b"log in first"
            status, headers, body = _json(401, {"error": "send Authorization: Bearer <token>"})
            headers.append(("WWW-Authenticate", 'Bearer realm="gleaner"'))
            return status, headers, body
        signed_in = pages.SIGNED_IN.set(access.session)
        try:
            with acting_for(access):
                return self._dispatch(environ, path, method, access)
        finally:
            pages.SIGNED_IN.reset(signed_in)

    def _dispatch(self, environ: dict[str, Any], path: str, method: str, access: Access
                  ) -> tuple[int, list[tuple[str, str]], bytes | ScopedChunks]:
        is_api = path.startswith("/v1/")
        # WSGI hands the path and query as latin-1-decoded bytes (PEP 3333): read them as the UTF-8 they are,
        # keeping bytes that are not as lone surrogates, so that they are refused below with NULs.
        path = path.encode("latin-1").decode("utf-8", "surrogateescape")
        query = query_of(str(environ.get("QUERY_STRING", "")).encode("latin-1"))
        limit = _upload_limit(self.deps) if is_api and method == "POST" and _is_upload(path) else \
            _EDIT_BODY_BYTES if method == "POST" and _EDIT_PATH.fullmatch(path) else MAX_BODY_BYTES
        read = _read_body(environ, limit)
        if read is None:
            return _json(413, {"error": f"bodies are limited to {limit} bytes", "limit": limit})
        body = read
        form = query_of(body) if body and not is_api and not _is_upload(path) else {}
        problem = text_problem([path, *query.keys(), *query.values(), *form.keys(), *form.values()])
        if problem:
            message = f"the path, query or form {problem}"
            if is_api:
                return _json(400, {"error": message})
            page = pages.render("error.html", 400, status=400, message=message)
            return page.status, [("Content-Type", page.content_type)], page.body.encode("utf-8")
        if is_api:
            status, answer = api.dispatch(api.ApiRequest(method, path, query, body, access,
                                                         str(environ.get("CONTENT_TYPE", ""))), self.deps)
            if isinstance(answer, Stream):
                return status, [("Content-Type", answer.content_type), ("Cache-Control", "no-store")], \
                    ScopedChunks(answer, access)
            return _json(status, answer)
        csrf = Csrf.of(self._csrf_key, environ)
        if method == "POST" and not csrf.accepts(form):
            return refused_form()
        page = pages.handle(pages.PageRequest(method, path, query, form, access), self.deps)
        headers = [("Content-Type", page.content_type), ("Cache-Control", "no-store"),
                   ("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline';"
                                               " script-src 'self' 'unsafe-inline'; frame-ancestors 'none'")]
        if page.location:
            headers.append(("Location", page.location))
        body = page.body.encode("utf-8")
        return page.status, headers, csrf.stamp(environ, body, headers) if "html" in page.content_type else body

    def access_for(self, environ: dict[str, Any]) -> Access | None:
        """Whom a request with this environ acts for, or None (401): other surfaces served beside the
        back office (``/mcp``) decide their caller through this same gate."""
        return self._access(environ)

    def _access(self, environ: dict[str, Any]) -> Access | None:
        """Whom the request acts for, or None (401): its bearer, else its login session, else (from this
        machine to a loopback name, no proxy: gleaner.serving.hostgate) the operator."""
        header = str(environ.get("HTTP_AUTHORIZATION", ""))
        token = bearer_token(header)
        # A Google identity token there is Cloud Run's gate (IAM admitted the caller, e.g. through
        # `gcloud run services proxy`), never the back office's credential: the cookie still decides.
        if header and not (token is not None and identity_claims(token) is not None):
            return self._token_access(token) if token is not None else None
        session = cookie(environ, COOKIE)
        if session is not None and self.bearer is not None:
            found = self.sessions.find(session)
            if found is not None:
                return Access(found.site_domain, session=True)
        if self.bearer is None or (self.hosts is not None and self.hosts.credential_free(environ)):
            return OPERATOR
        return None

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

@contextmanager
def acting_for(access: Access) -> Iterator[object]:
    """The operator's console reads and steers every tenant; a site token's, its own site only (the MCP
    tools act for their caller the same way)."""
    if access.site_domain is None:
        with tenancy.all_tenants() as chosen:
            yield chosen
    else:
        with tenancy.scope(access.site_domain) as chosen:
            yield chosen


class ScopedChunks:
    """A streamed answer's body as the WSGI server pulls it: each chunk is made in the caller's tenant
    scope (the request's own scope ended when the app returned), and the stream is closed with it."""

    def __init__(self, stream: Stream, access: Access) -> None:
        self._stream = stream
        self._access = access

    def __iter__(self) -> ScopedChunks:
        return self

    def __next__(self) -> bytes:
        try:
            with tenancy.no_tenant(), acting_for(self._access):
                chunk = next(self._stream.chunks, None)  # the end is signalled outside the scope's context
        except Exception:  # headers are sent: the server can only cut the connection, so the log says why
            log.exception("a streamed back office answer failed after it started")
            raise
        if chunk is None:
            raise StopIteration
        return chunk

    def close(self) -> None:
        self._stream.close()


def _json(status: int, answer: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    return status, [("Content-Type", "application/json")], json.dumps(answer, default=str).encode("utf-8")


def _is_upload(path: str) -> bool:
    """An upload's route (the API's, the back office's form): its body is a file, sent as a multipart form."""
    return path.rstrip("/") in ("/v1/ingest", "/ui/upload")


def _upload_limit(deps: Deps) -> int:
    from gleaner.backoffice.originsapi import max_body

    return max_body(deps)


def _read_body(environ: dict[str, Any], limit: int = MAX_BODY_BYTES) -> bytes | None:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
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
    # Media types compare case-insensitively (RFC 9110, 8.3.1): Application/JSON is JSON.
    media_type = str(environ.get("CONTENT_TYPE", "")).split(";", 1)[0].strip().lower()
    if needs_json and media_type != "application/json":
        return "send commands as application/json"
    return None


_REASONS = {200: "OK", 201: "Created", 202: "Accepted", 303: "See Other", 400: "Bad Request", 401: "Unauthorized",
            403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict", 413: "Payload Too Large",
            422: "Unprocessable Content", 429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable"}

