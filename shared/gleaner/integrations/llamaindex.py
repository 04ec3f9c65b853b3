"""LlamaIndex: a reader for a site's current pages, or for the hits of a search.

``pip install gleaner[llamaindex]``::

    from gleaner.integrations.llamaindex import GleanerReader
    reader = GleanerReader("http://127.0.0.1:8080", token=TOKEN)
    pages = reader.load_data(site="example.com")           # every active page, whole
    hits = reader.load_data(query="how do I install it")   # verbatim search hits

Each document's text is verbatim canonical text; its metadata names the byte range (``text_hash``,
``start``, ``end``) that ``gleaner slice`` reproduces, and its id is that range (stable across loads).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.readers.base import BaseReader
from llama_index.core.schema import Document

from gleaner.integrations.client import GleanerClient, Passage


class GleanerReader(BaseReader):
    """Reads a Gleaner server's kept copy: ``load_data(site=...)`` or ``load_data(query=...)``."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.base_url = base_url
        self.token = token
        self.timeout = timeout

    def load_data(self, site: str | None = None, query: str | None = None, limit: int = 10,
                  **kwargs: Any) -> list[Document]:
        if site is None and query is None:
            raise ValueError("give a site (its current pages) or a query (search hits)")
        with GleanerClient(self.base_url, self.token, timeout=self.timeout) as client:
            passages = client.hits(query, site, limit) if query is not None else client.current_texts(str(site))
            return [_document(p) for p in passages]


def _document(passage: Passage) -> Document:
    meta = passage.metadata
    return Document(text=passage.text, metadata=meta, id_=f"{meta['text_hash']}:{meta['start']}:{meta['end']}")
