"""The back office's browser session: login, logout, the session cookie and the forms' CSRF token.

- **Login** (``POST /ui/login``) takes the operator bearer or a site token once and starts a
  server-side session (:mod:`gleaner.store.access.sessions`): the cookie holds a random id, the database its
  digest and expiry. A failed login from an address makes the next ones from it wait longer
  (429 with ``Retry-After`` until then), so guessing costs time and holds no server thread. The
  address is the client's: behind a trusted proxy (``GLEANER_TRUSTED_PROXIES``), the one it forwards,
  so one client's failures never hold back another's correct token.
- **The cookie** is ``HttpOnly``, ``SameSite=Strict`` and ``Secure`` exactly when the page was
  served over HTTPS (the request's scheme, or a proxy's ``X-Forwarded-Proto: https``): a browser
  drops a Secure cookie set over plain HTTP on any address but loopback, which made a LAN login
  fail without a word. After login the browser is sent to a check (``/ui/login?took=1``): if the
  cookie did not come back, the page says why and what to do instead of showing the form again.
- **Logout** (``POST /ui/logout``) ends the session in the database and clears the cookie.
- **CSRF**: every ``<form method="post">`` the back office renders gets a hidden ``csrf`` field, an
  HMAC of the session id (or, without a session, of a random ``gleaner_csrf`` cookie) keyed by the
  server's key; a form POST without the right one is refused (403), on top of the Origin check.
  Login and logout need none: they change no data, and the Origin check still applies.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Any

from gleaner.backoffice import pages
from gleaner.serving.hostgate import host_name, is_loopback_name
from gleaner.store.access.sessions import SESSION_TTL, SessionStore, login_delay
from gleaner.store.access.tokens import SiteToken

LOGIN_PATH = "/ui/login"
LOGOUT_PATH = "/ui/logout"
COOKIE = "gleaner_backoffice"
CSRF_COOKIE = "gleaner_csrf"
CSRF_FIELD = "csrf"

Reply = tuple[int, list[tuple[str, str]], bytes]
_POST_FORM = re.compile(r"<form\b[^>]*\bmethod=\"?post\"?[^>]*>", re.IGNORECASE)
_HTML = [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")]


def cookie(environ: dict[str, Any], name: str) -> str | None:
    jar = SimpleCookie()
    try:
        jar.load(str(environ.get("HTTP_COOKIE", "")))
    except CookieError:
        return None
    found = jar.get(name)
    return found.value if found is not None and found.value else None


def served_over_https(environ: dict[str, Any]) -> bool:
    """Whether the browser sees this page over HTTPS. A proxy's word is taken: it can only make the
    cookie stricter (Secure), never hand anyone access."""
    if environ.get("wsgi.url_scheme") == "https":
        return True
    proto = str(environ.get("HTTP_X_FORWARDED_PROTO", "")).split(",")[0].strip().lower()
    return proto == "https" or "proto=https" in str(environ.get("HTTP_FORWARDED", "")).lower()


def set_cookie(environ: dict[str, Any], name: str, value: str, max_age: int) -> tuple[str, str]:
    secure = "; Secure" if served_over_https(environ) else ""
    return "Set-Cookie", f"{name}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"


@dataclass(frozen=True, slots=True)
class Csrf:
    """The forms' token for one request, and the cookie to set when the browser has no seed yet."""

    token: str
    new_seed: str | None = None

    @classmethod
    def of(cls, key: bytes, environ: dict[str, Any]) -> Csrf:
        seed = cookie(environ, COOKIE) or cookie(environ, CSRF_COOKIE)
        fresh = None
        if seed is None:
            seed = fresh = secrets.token_urlsafe(32)
        return cls(hmac.new(key, b"csrf " + seed.encode(), hashlib.sha256).hexdigest(), fresh)

    def accepts(self, form: dict[str, str]) -> bool:
        return self.new_seed is None and hmac.compare_digest(form.get(CSRF_FIELD, "").encode(), self.token.encode())

    def stamp(self, environ: dict[str, Any], html: bytes, headers: list[tuple[str, str]]) -> bytes:
        """Every POST form in ``html`` with the token; the seed cookie added when it is new."""
        field = f'<input type="hidden" name="{CSRF_FIELD}" value="{self.token}">'
        stamped = _POST_FORM.sub(lambda m: m.group() + field, html.decode("utf-8"))
        if self.new_seed is not None:
            headers.append(set_cookie(environ, CSRF_COOKIE, self.new_seed, int(SESSION_TTL.total_seconds())))
        return stamped.encode("utf-8")


def refused_form() -> Reply:
    page = pages.render("error.html", 403, status=403,
                        message="This form's security token is missing or out of date (the page may be older than "
                                "your login). Reload the page and try again.")
    return page.status, list(_HTML), page.body.encode("utf-8")


class Login:
    """``/ui/login`` and ``/ui/logout`` over the session store; ``check`` names the credential of a token."""

    def __init__(self, sessions: SessionStore, operator: Callable[[str], bool],
                 site_token: Callable[[str], SiteToken | None],
                 client_of: Callable[[dict[str, Any]], str] = lambda environ: str(environ.get("REMOTE_ADDR", ""))
                 ) -> None:
        """``client_of``: the address a login's back-off is kept for (the client a trusted proxy names)."""
        self.sessions = sessions
        self.client_of = client_of
        self.operator = operator
        self.site_token = site_token

    def answer(self, environ: dict[str, Any], method: str, form: dict[str, str], query: dict[str, str]) -> Reply:
        if method == "POST":
            return self._post(environ, form)
        if method not in ("GET", "HEAD"):
            return 405, [("Content-Type", "application/json")], b'{"error": "use GET or POST"}'
        if query.get("took") == "1":
            session = cookie(environ, COOKIE)
            if session is not None and self.sessions.find(session) is not None:
                return 303, [("Location", "/ui/"), ("Content-Type", "text/plain")], b"logged in"
            return self._page(200, refused=cookie_refused_reason(environ))
        return self._page(200)

    def logout(self, environ: dict[str, Any]) -> Reply:
        session = cookie(environ, COOKIE)
        if session is not None:
            self.sessions.end(session)
        headers = [("Location", LOGIN_PATH), ("Content-Type", "text/plain"), set_cookie(environ, COOKIE, "", 0)]
        return 303, headers, b"logged out"

    def _post(self, environ: dict[str, Any], form: dict[str, str]) -> Reply:
        peer = self.client_of(environ)
        failures, since = self.sessions.failures(peer)
        wait = login_delay(failures) - since
        if wait > 0:
            status, headers, body = self._page(429, wait=int(wait) + 1)
            return status, [*headers, ("Retry-After", str(int(wait) + 1))], body
        token = form.get("token", "")
        site = None if self.operator(token) else self.site_token(token)
        if site is None and not self.operator(token):
            failures = self.sessions.failed(peer)
            return self._page(401, failed=True, wait=int(login_delay(failures)) or None)
        self.sessions.succeeded(peer)
        session = self.sessions.start(site)
        headers = [("Location", LOGIN_PATH + "?took=1"), ("Content-Type", "text/plain"),
                   set_cookie(environ, COOKIE, session, int(SESSION_TTL.total_seconds()))]
        return 303, headers, b"ok"

    @staticmethod
    def _page(status: int, failed: bool = False, refused: str | None = None, wait: int | None = None) -> Reply:
        page = pages.render("login.html", status, failed=failed, refused=refused, wait=wait)
        return page.status, list(_HTML), page.body.encode("utf-8")


def cookie_refused_reason(environ: dict[str, Any]) -> str:
    """Why a login's cookie did not come back, as far as the server can tell, and what to do."""
    name = host_name(environ) or "this address"
    if served_over_https(environ):
        return ("The cookie is marked Secure because this server was reached over HTTPS (or a proxy said so with "
                f"X-Forwarded-Proto). A browser refuses a Secure cookie on a plain-HTTP page at {name}: open the back "
                f"office at https://{name}/ui/login, or fix the proxy's X-Forwarded-Proto.")
    if not is_loopback_name(name):
        return (f"The page is served over plain HTTP at {name}, and this browser did not keep the cookie (cookies "
                "blocked for this site, or a browser that keeps none over HTTP off loopback). Allow cookies for "
                "this address, or serve the back office over HTTPS (a TLS proxy: docs/security.md), or open it "
                "on the server itself at http://127.0.0.1 with an SSH tunnel (ssh -L).")
    return "This browser did not keep the cookie: allow cookies for this address and log in again."
