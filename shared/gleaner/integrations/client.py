"""A small client of a Gleaner server's HTTP API: search, verbatim slices, a site's current documents.

The frameworks' loaders and retrievers share it; it knows nothing of them. Errors become
:class:`GleanerApiError` with the server's status and message (``{"error": ...}``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

PAGE = 100
DEFAULT_TIMEOUT = 30.0


class GleanerApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Passage:
    """A verbatim piece of a kept page and where it came from (a whole current text, or a search hit)."""

    text: str
    metadata: dict[str, Any]


class GleanerClient:
    """``GleanerClient("http://127.0.0.1:8080", token=...)``; ``token`` is a site token or the operator's."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout,
                                  transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GleanerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, path: str, **params: Any) -> dict[str, Any]:
        response = self._http.get(path, params={k: v for k, v in params.items() if v is not None})
        try:
            body = response.json()
        except ValueError:
            body = {"error": response.text[:200]}
        if response.status_code != 200:
            raise GleanerApiError(response.status_code, str(body.get("error", body)))
        return dict(body)

    def search(self, query: str, site: str | None = None, limit: int = 10) -> list[dict[str, Any]]:
        """``GET /v1/search``: ranked hits, best first (DESIGN.md's Search shape)."""
        return list(self._get("/v1/search", q=query, site=site, limit=limit)["results"])

    def text(self, text_hash: str, start: int | None = None, end: int | None = None) -> str:
        """``GET /v1/texts/{text_hash}``: bytes [start, end) of a stored canonical text, verbatim."""
        return str(self._get(f"/v1/texts/{text_hash}", start=start, end=end)["text"])

    def documents(self, site: str) -> Iterator[dict[str, Any]]:
        """The site's active documents, page by page."""
        offset = 0
        while True:
            page = self._get(f"/v1/sites/{site}/documents", status="active", limit=PAGE, offset=offset)
            yield from page["documents"]
            offset += len(page["documents"])
            if not page["documents"] or offset >= page["total"]:
                return

    def current_texts(self, site: str) -> Iterator[Passage]:
        """Each active document's current canonical text, whole, with its provenance."""
        for listed in self.documents(site):
            found = self._get(f"/v1/documents/{listed['id']}")
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
