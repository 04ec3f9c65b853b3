"""Standard Webhooks signing (FACTS.md): ``whsec_`` secrets and ``v1,<base64 HMAC-SHA256>`` signatures.

The signed content is ``"{webhook-id}.{webhook-timestamp}.{body}"`` keyed by the secret's bytes (the
base64 after ``whsec_``). Pure functions: the tests verify them with the specification's reference
implementation (the ``standardwebhooks`` package), not with this module.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from gleaner.errors import InvalidInput

SECRET_PREFIX = "whsec_"
# The specification asks for 24 to 64 random bytes.
SECRET_BYTES = 32


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise InvalidInput("a webhook secret starts with whsec_")
    try:
        return base64.b64decode(secret[len(SECRET_PREFIX):], validate=True)
    except ValueError as exc:
        raise InvalidInput(f"the webhook secret is not base64: {exc}") from exc


def sign(secret: str, msg_id: str, timestamp: int, body: str) -> str:
    """The ``webhook-signature`` header value for one attempt."""
    content = f"{msg_id}.{timestamp}.{body}".encode()
    digest = hmac.new(secret_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def headers(secret: str, msg_id: str, timestamp: int, body: str) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(secret, msg_id, timestamp, body)}
