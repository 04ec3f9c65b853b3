"""The frameworks' loaders and retrievers over :class:`gleaner.client.Gleaner`: passages with provenance.

It knows nothing of the frameworks. Errors are :mod:`gleaner.client.errors`'s (``GleanerApiError``
is :class:`gleaner.client.ApiError`: the server's status and message).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from gleaner.client import ApiError, Gleaner

GleanerApiError = ApiError  # the name the loaders' callers catch
DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class Passage:
    """A verbatim piece of a kept page and where it came from (a whole current text, or a search hit)."""

    text: str
    metadata: dict[str, Any]


class GleanerClient:
    """``GleanerClient("http://127.0.0.1:8080", token=...)``; ``token`` is a site token or the operator's."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 transport: httpx.BaseTransport | None = None) -> None:
        # An explicit empty token: the loaders never pick up GLEANER_TOKEN behind their caller's back.
        self.api = Gleaner(base_url, token or "", timeout=timeout, transport=transport)

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> GleanerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def search(self, query: str, site: str | None = None, limit: int = 10) -> list[dict[str, Any]]:
        """``GET /v1/search``: ranked hits, best first (DESIGN.md's Search shape)."""
        return [dict(hit) for hit in self.api.search(query, site=site, limit=limit)]

    def text(self, text_hash: str, start: int | None = None, end: int | None = None) -> str:
        """``GET /v1/texts/{text_hash}``: bytes [start, end) of a stored canonical text, verbatim."""
        return self.api.text(text_hash, start, end)["text"]

    def documents(self, site: str) -> Iterator[dict[str, Any]]:
        """The site's active documents, page by page."""
        return self.api.each_document(site, status="active")

    def current_texts(self, site: str) -> Iterator[Passage]:
        """Each active document's current canonical text, whole, with its provenance."""
        for listed in self.documents(site):
            found = self.api.document(listed["id"])
            current = found.get("current_text")
            if not current:  # fetched but not (yet) ingested: nothing citable to hand out
                continue
            doc = found["document"]
            yield Passage(self.text(current["text_hash"]), {
                "url": doc["url"], "title": doc.get("title"), "site_domain": doc["site_domain"],
                "document_id": doc["id"], "version": current["version"], "text_hash": current["text_hash"],
                "start": 0, "end": current["length"]})

    def hits(self, query: str, site: str | None = None, limit: int = 10) -> Iterator[Passage]:
        """Search, then each hit's verbatim slice (the preview is shortened; the slice is the stored bytes)."""
        for hit in self.search(query, site, limit):
            metadata = {k: v for k, v in hit.items() if k != "preview"}
            yield Passage(self.text(hit["text_hash"], hit["start"], hit["end"]), metadata)
