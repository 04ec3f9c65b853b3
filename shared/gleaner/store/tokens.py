"""Bearer tokens for HTTP callers, each bound to one workspace; only their SHA-256 digest is stored."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from gleaner.errors import InvalidInput
from gleaner.store.sqlstore import SqlStore

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


class TokenStore(SqlStore):
    """The caller tokens; the composition root hands one out (``deps.tokens``)."""

    def add(self, workspace_id: str, label: str = "") -> dict[str, str]:
        """A new token for the workspace: ``{"id", "workspace_id", "token"}``; the token is shown only here."""
        workspace_id = validate_workspace(workspace_id)
        token = TOKEN_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(TOKEN_BYTES)).decode().rstrip("=")
        token_id = self._write_scalar(
            "INSERT INTO knowledge.caller_tokens (workspace_id, token_sha256, label)"
            " VALUES (:w, :d, :l) RETURNING id",
            {"w": workspace_id, "d": digest(token), "l": label},
        )
        return {"id": str(token_id), "workspace_id": workspace_id, "token": token}

    def caller_for(self, token: str) -> Caller | None:
        """The workspace a live token acts for, or None (unknown or revoked)."""
        wanted = digest(token)
        row = self._first(
            "SELECT workspace_id, token_sha256 FROM knowledge.caller_tokens"
            " WHERE token_sha256 = :d AND revoked_at IS NULL",
            {"d": wanted},
        )
        # The index probe found the row by digest; compare again in constant time all the same.
        if row is None or not hmac.compare_digest(bytes(row[1]), wanted):
            return None
        return Caller(workspace_id=row[0])

    def list(self) -> list[dict[str, Any]]:
        rows = self._all(
            "SELECT id, workspace_id, label, created_at, revoked_at FROM knowledge.caller_tokens"
            " ORDER BY created_at, id",
        )
        return [{"id": str(r[0]), "workspace_id": r[1], "label": r[2], "created_at": r[3].isoformat(),
                 "revoked_at": r[4].isoformat() if r[4] else None} for r in rows]

    def revoke(self, token_id: str) -> bool:
        """True if a live token with that id was revoked now."""
        done = self._write_first(
            "UPDATE knowledge.caller_tokens SET revoked_at = now()"
            " WHERE id = CAST(:i AS uuid) AND revoked_at IS NULL RETURNING id",
            {"i": token_id},
        )
        return done is not None
