"""The blocklist of erased content and the erased form of a URL (seed 004).

An erasure adds the keyed digests of a page's URL, bodies and texts to its tenant's blocklist
(gleaner/store/documents/erasure.py); a crawl, a landing and ingest ask it before they store anything, so erased
content never comes back. An erased URL is written nowhere in clear: wherever it stood, its erased
form (``erased:<keyed digest>``) stands instead, and map names a rediscovered erased URL by it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from gleaner.provenance.digests import erasure_digest, tenant_key

if TYPE_CHECKING:
    from gleaner.store.documents.erasure import ErasureStore

K = TypeVar("K", bound=Hashable)

ERASED_PREFIX = "erased:"


def erased_form(url_digest: str) -> str:
    """What stands for an erased URL wherever the URL stood: its keyed digest, never the URL."""
    return ERASED_PREFIX + url_digest


def is_erased_form(url: str | None) -> bool:
    return bool(url) and str(url).startswith(ERASED_PREFIX)


class Blocklist:
    """The per-tenant blocklist of erased content, asked before anything is stored again."""

    def __init__(self, store: ErasureStore, secret: Callable[[], bytes]) -> None:
        self.store = store
        self._secret = secret

    def key(self, site: str) -> bytes:
        return tenant_key(self._secret(), site)

    def refused(self, site: str, items: Mapping[K, Sequence[bytes]]) -> set[K]:
        """The items any of whose byte strings (URL, body, text) is blocklisted for the tenant: one query."""
        # A tenant that never erased anything (nearly all) costs one indexed lookup, no hashing and no key.
        if not items or not self.store.has_erasures(site):
            return set()
        key = self.key(site)
        digests = {k: [erasure_digest(key, data) for data in values] for k, values in items.items()}
        hits = self.store.blocked_digests(site, sorted({d for values in digests.values() for d in values}))
        return {k for k, values in digests.items() if hits.intersection(values)} if hits else set()

    def erased_urls(self, site: str) -> Callable[[str], str | None]:
        """For map: a URL's erased form if the tenant erased it, else None (one query, then local hashing)."""
        if not self.store.has_erasures(site):
            return lambda _url: None
        key = self.key(site)
        erased = self.store.url_digests(site)

        def form(url: str) -> str | None:
            digest = erasure_digest(key, url.encode("utf-8"))
            return erased_form(digest) if digest in erased else None

        return form


def erased_forms(blocklist: Blocklist, canonical_url: str, site: str | None) -> list[tuple[str, str]]:
    """(site, erased form) for each tenant (or ``site``) that erased this URL: how a reader finds the
    erased document by the URL it asks about, which the database no longer holds."""
    if is_erased_form(canonical_url):
        return []
    sites = [site] if site else blocklist.store.sites_with_erased_urls()
    return [(s, form) for s in sites if (form := blocklist.erased_urls(s)(canonical_url)) is not None]
