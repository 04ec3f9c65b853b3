"""Back-office login sessions and the failed-login count, kept in the database (migration 0022).

A session id is 32 random bytes (base64url) handed to the browser once, in the cookie; only its
SHA-256 is stored, so a copy of the table opens nothing. A session ends at its expiry, at logout,
and, for a site token's session, when the token is revoked. The lookups run across tenants: they
are the authentication that decides the tenant.

Failed logins are counted per peer address (a row per address, reset by a success): the login
answers more slowly the more failures an address has (:func:`login_delay`), so guessing a secret
costs time that grows with every try, while the operator who mistypes once barely notices.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from gleaner import tenancy
from gleaner.store.access.tokens import SiteToken
from gleaner.store.backends.sqlstore import SqlStore

SESSION_BYTES = 32
SESSION_TTL = timedelta(hours=12)  # a working day; the operator logs in again the next morning
FREE_FAILURES = 3  # typos: no delay for the first few
MAX_DELAY_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Session:
    """A live session: the operator's (site_domain None) or a site token's."""

    site_domain: str | None


def _digest(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()


def login_delay(failures: int) -> float:
    """Seconds a login attempt waits after ``failures`` recent failures from its address: none for the
    first few, then doubling from one second up to a ceiling."""
    if failures < FREE_FAILURES:
        return 0.0
    return min(MAX_DELAY_SECONDS, 2.0 ** (failures - FREE_FAILURES))


class SessionStore(SqlStore):
    def start(self, site: SiteToken | None, ttl: timedelta = SESSION_TTL) -> str:
        """A new session; its id (the cookie's value) is returned only here."""
        session_id = base64.urlsafe_b64encode(secrets.token_bytes(SESSION_BYTES)).decode().rstrip("=")
        with tenancy.all_tenants():
            # Expired sessions go as new ones start: the table holds the live ones and a day of the rest.
            self._run("DELETE FROM knowledge.backoffice_sessions WHERE expires_at < now() - interval '1 day'")
            self._run("INSERT INTO knowledge.backoffice_sessions (id_sha256, site_domain, site_token_id, expires_at)"
                      " VALUES (:d, :s, CAST(:t AS uuid), now() + make_interval(secs => :ttl))",
                      {"d": _digest(session_id), "s": site.site_domain if site else None,
                       "t": site.id if site else None, "ttl": ttl.total_seconds()})
        return session_id

    def find(self, session_id: str) -> Session | None:
        """The live session with this id (not ended, not expired, its token not revoked), else None."""
        if not session_id or len(session_id) > 100:
            return None
        with tenancy.all_tenants():
            row = self._first(
                "SELECT s.site_domain FROM knowledge.backoffice_sessions s"
                " LEFT JOIN knowledge.caller_tokens t ON t.id = s.site_token_id"
                " WHERE s.id_sha256 = :d AND s.ended_at IS NULL AND s.expires_at > now()"
                " AND (s.site_token_id IS NULL OR t.revoked_at IS NULL)",
                {"d": _digest(session_id)})
        return Session(row[0]) if row is not None else None

    def end(self, session_id: str) -> bool:
        """End the session (logout); True when a live one was ended now."""
        with tenancy.all_tenants():
            return self._run("UPDATE knowledge.backoffice_sessions SET ended_at = now()"
                             " WHERE id_sha256 = :d AND ended_at IS NULL", {"d": _digest(session_id)}) > 0

    def failures(self, peer: str, window: timedelta = timedelta(hours=1)) -> tuple[int, float]:
        """Failed logins from ``peer`` in the last ``window`` (older ones are forgotten), and the seconds
        since the last one."""
        with tenancy.all_tenants():
            row = self._first("SELECT failures, EXTRACT(EPOCH FROM now() - last_failed_at)"
                              " FROM knowledge.backoffice_login_failures"
                              " WHERE peer = :p AND last_failed_at > now() - make_interval(secs => :w)",
                              {"p": peer[:100], "w": window.total_seconds()})
        return (int(row[0]), float(row[1])) if row is not None else (0, 0.0)

    def failed(self, peer: str, window: timedelta = timedelta(hours=1)) -> int:
        """Record a failed login from ``peer``; the count now."""
        with tenancy.all_tenants():
            return int(self._write_scalar(
                "INSERT INTO knowledge.backoffice_login_failures AS f (peer, failures, last_failed_at)"
                " VALUES (:p, 1, now()) ON CONFLICT (peer) DO UPDATE SET last_failed_at = now(),"
                " failures = CASE WHEN f.last_failed_at > now() - make_interval(secs => :w)"
                "   THEN f.failures + 1 ELSE 1 END RETURNING failures",
                {"p": peer[:100], "w": window.total_seconds()}))

    def succeeded(self, peer: str) -> None:
        with tenancy.all_tenants():
            self._run("DELETE FROM knowledge.backoffice_login_failures WHERE peer = :p", {"p": peer[:100]})
