"""Keyed digests of erased content: what the blocklist holds instead of the content (seed 004).

A plain hash of erased content would let anyone holding the blocklist confirm a
guess of it; a keyed one (HMAC-BLAKE3: BLAKE3 in keyed mode) does not without
the key. Each tenant gets its own key, derived from one secret, so equal content
erased by two tenants leaves unrelated digests.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

import blake3

DIGEST_SCHEME = "hmac_blake3_v1"
KEY_BYTES = 32


class DigestKind(StrEnum):
    """What a blocklisted digest was made from."""

    URL = "url"  # the canonical URL
    BODY = "body"  # content.md (a snapshot's body) or raw.md
    TEXT = "text"  # the canonical text


def tenant_key(secret: bytes, site_domain: str) -> bytes:
    if len(secret) != KEY_BYTES:
        raise ValueError(f"the erasure key must be {KEY_BYTES} bytes")
    return blake3.blake3(f"{DIGEST_SCHEME}:{site_domain}".encode(), key=secret).digest()


def erasure_digest(key: bytes, data: bytes) -> str:
    """The keyed digest of some bytes under a tenant's key."""
    return blake3.blake3(data, key=key).hexdigest()


def digests_of(key: bytes, items: Iterable[bytes]) -> list[str]:
    return [erasure_digest(key, data) for data in items]
