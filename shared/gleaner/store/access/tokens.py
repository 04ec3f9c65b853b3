"""Bearer tokens for HTTP callers, each bound to one workspace or one site; only their SHA-256 digest is stored.

A workspace token is the feed webhook's caller (its ledger rows); a site token is the back
office's per-tenant credential (``tenancy.scope(site)``). Neither kind passes for the other.
The lookups by token run across tenants: they are the authentication that decides the tenant.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from gleaner import tenancy
from gleaner.errors import InvalidInput
from gleaner.store.backends.sqlstore import SqlStore

TOKEN_PREFIX = "glt_"
TOKEN_BYTES = 32  # 256 bits: guessing is hopeless, so an unsalted digest suffices
MAX_WORKSPACE_CHARS = 200  # the webhook's limit on workspace_id


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a request acts for: the admin (the shared secret) or one workspace (a token)."""

    workspace_id: str | None = None  # None: the admin, who sees every workspace

    @property
    def is_admin(self) -> bool:
        return self.workspace_id is None


ADMIN = Caller()


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def validate_workspace(value: str) -> str:
    value = value.strip()
    if not value or len(value) > MAX_WORKSPACE_CHARS or "\x00" in value:
        raise InvalidInput(f"a workspace id is 1 to {MAX_WORKSPACE_CHARS} characters, without NUL")
    return value


@dataclass(frozen=True, slots=True)
class SiteToken:
    """A live site-bound token: its id and the one site it acts for."""

    id: str
    site_domain: str
    token_sha256: bytes


def new_token() -> str:
    return TOKEN_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(TOKEN_BYTES)).decode().rstrip("=")


class TokenStore(SqlStore):
    """The caller tokens; the composition root hands one out (``deps.tokens``)."""

    def add(self, workspace_id: str, label: str = "") -> dict[str, str]:
        """A new token for the workspace: ``{"id", "workspace_id", "token"}``; the token is shown only here."""
        workspace_id = validate_workspace(workspace_id)
        token_id, token = self._insert(workspace_id, None, label)
        return {"id": token_id, "workspace_id": workspace_id, "token": token}

    def add_site(self, site_domain: str, label: str = "") -> dict[str, str]:
        """A new token acting for one site: ``{"id", "site_domain", "token"}``; the token is shown only here.

        Written under the caller's tenant scope, so ``gleaner --tenant A`` cannot mint a token for B."""
        site_domain = tenancy.validate_site_domain(site_domain)
        token_id, token = self._insert(None, site_domain, label)
        return {"id": token_id, "site_domain": site_domain, "token": token}

    def _insert(self, workspace_id: str | None, site_domain: str | None, label: str) -> tuple[str, str]:
        token = new_token()
        token_id = self._write_scalar(
            "INSERT INTO knowledge.caller_tokens (workspace_id, site_domain, token_sha256, label)"
            " VALUES (:w, :s, :d, :l) RETURNING id",
            {"w": workspace_id, "s": site_domain, "d": digest(token), "l": label},
        )
        return str(token_id), token

    def caller_for(self, token: str) -> Caller | None:
        """The workspace a live workspace token acts for, or None (unknown, revoked or a site token)."""
        row = self._live(token, "workspace_id")
        return Caller(workspace_id=row[1]) if row is not None else None

    def site_token(self, token: str) -> SiteToken | None:
        """The site a live site token acts for, or None (unknown, revoked or a workspace token)."""
        row = self._live(token, "site_domain")
        return SiteToken(str(row[0]), row[1], digest(token)) if row is not None else None

    def site_token_by_id(self, token_id: str) -> SiteToken | None:
        """A live site token by its id (what a back-office session cookie names), else None."""
        try:
            token_id = str(uuid.UUID(token_id))
        except ValueError:
            return None
        with tenancy.all_tenants():
            row = self._first("SELECT id, site_domain, token_sha256 FROM knowledge.caller_tokens"
                              " WHERE id = CAST(:i AS uuid) AND site_domain IS NOT NULL AND revoked_at IS NULL",
                              {"i": token_id})
        return SiteToken(str(row[0]), row[1], bytes(row[2])) if row is not None else None

    def _live(self, token: str, binding: str) -> Any:
        """(id, binding) of the live token with this digest whose ``binding`` column is set, else None."""
        assert binding in ("workspace_id", "site_domain")
        wanted = digest(token)
        # Authentication decides the tenant, so it cannot run inside one.
        with tenancy.all_tenants():
            row = self._first(f"SELECT id, {binding}, token_sha256 FROM knowledge.caller_tokens"
                              f" WHERE token_sha256 = :d AND revoked_at IS NULL AND {binding} IS NOT NULL",
                              {"d": wanted})
        # The index probe found the row by digest; compare again in constant time all the same.
        if row is None or not hmac.compare_digest(bytes(row[2]), wanted):
            return None
        return row

    def list(self) -> list[dict[str, Any]]:
        rows = self._all("SELECT id, workspace_id, site_domain, label, created_at, revoked_at"
                         " FROM knowledge.caller_tokens ORDER BY created_at, id")
        return [{"id": str(r[0]), "workspace_id": r[1], "site_domain": r[2], "label": r[3],
                 "created_at": r[4].isoformat(), "revoked_at": r[5].isoformat() if r[5] else None} for r in rows]

    def revoke(self, token_id: str) -> bool:
        """True if a live token with that id was revoked now."""
        done = self._write_first(
            "UPDATE knowledge.caller_tokens SET revoked_at = now()"
            " WHERE id = CAST(:i AS uuid) AND revoked_at IS NULL RETURNING id",
            {"i": token_id},
        )
        return done is not None
