"""Back-office login sessions (issue 26): a random id per login kept server-side with an expiry, a logout
that ends it, a growing wait after failed logins, a CSRF token on every form, and a cookie whose Secure
flag follows the scheme actually served."""

from __future__ import annotations

import hashlib
import io
import re
from typing import Any
from urllib.parse import urlencode

import pytest

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.operator.sites import add_site
from gleaner.store.access.sessions import login_delay
from tests.backoffice.conftest import Answer

SECRET = "operator-secret-0123456789abcdef0123456789"
SITE = "shop.test"


@pytest.fixture
def deps(make_deps: Any) -> Deps:
    """A site registered, nothing crawled: the pages and their forms need no more."""
    built = make_deps(webhook_secret=SECRET)
    add_site(built, "http://127.0.0.1:9/", site_domain=SITE, every="6h")
    return built


def request(app: BackofficeApp, method: str, path: str, *, form: dict[str, str] | None = None,
            cookie: str | None = None, peer: str = "192.0.2.50", **headers: str) -> Answer:
    body = urlencode(form or {}).encode()
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method, "PATH_INFO": path.split("?")[0], "QUERY_STRING": path.partition("?")[2],
        "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body)), "HTTP_HOST": "backoffice.example",
        "CONTENT_TYPE": "application/x-www-form-urlencoded", "REMOTE_ADDR": peer, "wsgi.url_scheme": "http",
        **{f"HTTP_{k.upper()}": v for k, v in headers.items()}}
    if cookie:
        environ["HTTP_COOKIE"] = cookie
    seen: list[Any] = []
    out = b"".join(app(environ, lambda status, hdrs, exc_info=None: seen.extend((status, hdrs))))
    return Answer(int(seen[0].split()[0]), dict(seen[1]), out)


def log_in(app: BackofficeApp, token: str = SECRET, **headers: str) -> tuple[Answer, str]:
    answer = request(app, "POST", "/ui/login", form={"token": token}, **headers)
    assert answer.status == 303, answer.body
    return answer, answer.headers["Set-Cookie"].split(";", 1)[0]


def stored_sessions(deps: Deps) -> list[tuple[bytes, Any]]:
    with tenancy.all_tenants(), deps.engine.begin() as conn:
        return [(bytes(r[0]), r[1]) for r in conn.exec_driver_sql(
            "SELECT id_sha256, ended_at FROM knowledge.backoffice_sessions").all()]


def test_each_login_is_a_new_random_session_stored_only_as_its_digest_and_logout_ends_it(deps: Deps):
    app = BackofficeApp(deps, bearer=SECRET)
    first, cookie = log_in(app)
    _, second_cookie = log_in(app)
    assert cookie != second_cookie  # a new id at every login, not one value forever
    assert first.headers["Location"] == "/ui/login?took=1"
    assert "Max-Age=43200" in first.headers["Set-Cookie"]  # it expires
    session_id = cookie.split("=", 1)[1]
    digests = [d for d, _ended in stored_sessions(deps)]
    assert hashlib.sha256(session_id.encode()).digest() in digests
    assert all(session_id.encode() not in d for d in digests)
    assert request(app, "GET", "/ui/login?took=1", cookie=cookie).headers["Location"] == "/ui/"
    home = request(app, "GET", "/ui/", cookie=cookie)
    assert home.status == 200 and b'action="/ui/logout"' in home.body
    out = request(app, "POST", "/ui/logout", cookie=cookie)
    assert out.status == 303 and "Max-Age=0" in out.headers["Set-Cookie"]
    assert request(app, "GET", "/v1/sites", cookie=cookie).status == 401  # ended, though the browser kept it
    assert request(app, "GET", "/v1/sites", cookie=second_cookie).status == 200  # the other login goes on


def test_an_expired_session_opens_nothing(deps: Deps):
    app = BackofficeApp(deps, bearer=SECRET)
    _, cookie = log_in(app)
    with tenancy.all_tenants(), deps.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE knowledge.backoffice_sessions SET expires_at = now() - interval '1 second'")
    assert request(app, "GET", "/v1/sites", cookie=cookie).status == 401


def test_failed_logins_from_one_address_make_it_wait_longer_and_longer(deps: Deps):
    app = BackofficeApp(deps, bearer=SECRET)
    statuses = [request(app, "POST", "/ui/login", form={"token": f"guess-{i}"}).status for i in range(6)]
    # Three typos are free; after them the address must wait (1 s, then 2, 4 ...): refused unread until then.
    assert statuses[:3] == [401] * 3 and set(statuses[3:]) == {429}
    waited = request(app, "POST", "/ui/login", form={"token": SECRET})
    assert waited.status == 429 and int(waited.headers["Retry-After"]) >= 1
    assert b"Too many failed logins" in waited.body
    # Another address is not held up by this one's failures.
    assert request(app, "POST", "/ui/login", form={"token": SECRET}, peer="192.0.2.51").status == 303
    assert [login_delay(n) for n in range(3, 8)] == [1, 2, 4, 8, 16] and login_delay(50) == 30


def test_every_post_form_carries_a_csrf_token_and_a_form_without_it_is_refused(deps: Deps):
    app = BackofficeApp(deps, bearer=SECRET)
    _, cookie = log_in(app)
    tree = request(app, "GET", f"/ui/sites/{SITE}", cookie=cookie).body.decode()
    forms = re.findall(r"<form\b[^>]*method=\"post\"[^>]*>(.*?)</form>", tree, flags=re.S)
    assert forms and all('name="csrf"' in f for f in forms)
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', tree).group(1)
    same_origin = {"origin": "http://backoffice.example"}
    refused = request(app, "POST", f"/ui/sites/{SITE}/rules", form={"glob": "/a/*", "action": "skip"},
                      cookie=cookie, **same_origin)
    assert refused.status == 403 and b"security token" in refused.body
    forged = request(app, "POST", f"/ui/sites/{SITE}/rules", form={"glob": "/a/*", "action": "skip", "csrf": "0" * 64},
                     cookie=cookie, **same_origin)
    assert forged.status == 403
    assert request(app, "GET", f"/v1/sites/{SITE}/rules", cookie=cookie).json()["rules"] == []
    done = request(app, "POST", f"/ui/sites/{SITE}/rules", form={"glob": "/a/*", "action": "skip", "csrf": token},
                   cookie=cookie, **same_origin)
    assert done.status == 303
    assert [r["glob"] for r in request(app, "GET", f"/v1/sites/{SITE}/rules", cookie=cookie).json()["rules"]] == \
        ["/a/*"]
    # Another login's token is not this one's.
    _, other = log_in(app)
    assert request(app, "POST", f"/ui/sites/{SITE}/rules", form={"glob": "/b/*", "action": "skip", "csrf": token},
                   cookie=other, **same_origin).status == 403


def test_the_cookie_is_secure_exactly_when_the_page_is_served_over_https(deps: Deps):
    app = BackofficeApp(deps, bearer=SECRET)
    plain, _ = log_in(app)
    assert "Secure" not in plain.headers["Set-Cookie"]
    proxied, _ = log_in(app, x_forwarded_proto="https")
    assert proxied.headers["Set-Cookie"].endswith("; Secure")


def test_behind_a_trusted_proxy_one_clients_failures_never_hold_back_anothers_correct_token(deps: Deps):
    app = BackofficeApp(deps, bearer=SECRET)  # default: a proxy on this machine is trusted
    attacker = {"peer": "127.0.0.1", "x_forwarded_for": "198.51.100.66"}
    statuses = [request(app, "POST", "/ui/login", form={"token": f"guess-{i}"}, **attacker).status for i in range(6)]
    assert set(statuses[3:]) == {429}
    operator = {"peer": "127.0.0.1", "x_forwarded_for": "203.0.113.10"}
    assert request(app, "POST", "/ui/login", form={"token": SECRET}, **operator).status == 303
    # The attacker cannot pose as the operator by writing its address first: the proxy appends the real one.
    spoofed = {"peer": "127.0.0.1", "x_forwarded_for": "203.0.113.10, 198.51.100.66"}
    assert request(app, "POST", "/ui/login", form={"token": SECRET}, **spoofed).status == 429
