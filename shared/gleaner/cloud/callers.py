"""Who is calling an HTTP trigger: the shared bearer, or an identity Cloud Run already checked.

Two models, chosen by ``GLEANER_HTTP_AUTH`` (:class:`gleaner.settings.config.HttpAuth`):

- ``bearer`` (default; laptops, the emulator mode): ``Authorization: Bearer $GLEANER_WEBHOOK_SECRET``,
  compared in constant time. Anyone who can reach the port and lacks it gets 401.
- ``iam`` (Terraform sets it): the function's Cloud Run service admits only callers holding
  ``roles/run.invoker`` (no ``allUsers`` binding exists), and Cloud Run verifies their Google
  identity token *before* the request reaches the code. A request that arrives with an identity
  token in ``Authorization`` or ``X-Serverless-Authorization`` was therefore admitted by IAM; the
  code reads the token's claims (without verifying the signature again: Cloud Run strips it) to
  name the caller in the logs. ``gcloud functions call``, the console's test tab, Cloud Scheduler's
  OIDC token and ``gleaner submit`` all send one. The bearer is still accepted too.

The claims are only read, never trusted for anything IAM did not already decide: the trust is
that no ``allUsers`` binding exists (tests/unit/test_deploy_config.py keeps Terraform that way).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass

from gleaner.settings.config import HttpAuth, Settings

# Cloud Run passes the identity token on when the caller used this header, leaving Authorization to the app.
SERVERLESS_AUTHORIZATION = "X-Serverless-Authorization"
GOOGLE_ISSUERS = frozenset({"https://accounts.google.com", "accounts.google.com"})


@dataclass(frozen=True, slots=True)
class Caller:
    """An admitted caller: how it proved itself and who it is (for the logs)."""

    kind: str  # "bearer" | "iam"
    name: str


def bearer_token(value: str) -> str | None:
    """The token of an ``Authorization`` value ``Bearer <token>``; None for any other value.

    Every HTTP surface reads the header through this and compares through :func:`secret_matches`,
    so they agree on what a bearer is."""
    scheme, _, token = value.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def secret_matches(token: str, secret: str | None) -> bool:
    """Constant-time comparison of a presented token with the configured secret (never with none)."""
    if not secret:
        return False
    # surrogatepass: a header decoded with surrogateescape must be compared, not crash the handler.
    return hmac.compare_digest(token.encode("utf-8", "surrogatepass"), secret.encode("utf-8"))


def bearer_matches(headers: Mapping[str, str], secret: str | None) -> bool:
    """Constant-time comparison of the Authorization bearer with the configured secret."""
    token = bearer_token(headers.get("Authorization", "") or "")
    return token is not None and secret_matches(token, secret)


def identity_claims(token: str) -> dict[str, object] | None:
    """The claims of a Google identity token (a JWT issued by Google, not expired), else None."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(claims, dict) or claims.get("iss") not in GOOGLE_ISSUERS:
        return None
    expires = claims.get("exp")
    if not isinstance(expires, int | float) or expires < time.time() - 60:
        return None
    return claims


def admitted(headers: Mapping[str, str], settings: Settings) -> Caller | None:
    """The caller if this request may act as an operator, else None (answer 401)."""
    if bearer_matches(headers, settings.webhook_secret):
        return Caller("bearer", "shared bearer")
    if settings.http_auth is not HttpAuth.IAM:
        return None
    for header in (SERVERLESS_AUTHORIZATION, "Authorization"):
        token = bearer_token(headers.get(header, "") or "")
        claims = identity_claims(token) if token else None
        if claims is not None:
            return Caller("iam", str(claims.get("email") or claims.get("sub") or "?"))
    return None
