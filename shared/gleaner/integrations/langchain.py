"""LangChain: a document loader for a site's current pages and a retriever over Gleaner's search.

``pip install gleaner[langchain]``::

    from gleaner.integrations.langchain import GleanerLoader, GleanerRetriever
    docs = GleanerLoader("http://127.0.0.1:8080", site="example.com", token=TOKEN).load()
    hits = GleanerRetriever(base_url="http://127.0.0.1:8080", token=TOKEN, k=4).invoke("how do I install it")

Each document's ``page_content`` is verbatim canonical text; its metadata names the byte range
(``text_hash``, ``start``, ``end``) that ``gleaner slice`` reproduces.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from gleaner.integrations.client import GleanerClient


class GleanerLoader(BaseLoader):
    """Every active page of one site, as its current canonical text."""

    def __init__(self, base_url: str, site: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.base_url = base_url
        self.site = site
        self.token = token
        self.timeout = timeout

    def lazy_load(self) -> Iterator[Document]:
        with GleanerClient(self.base_url, self.token, timeout=self.timeout) as client:
            for passage in client.current_texts(self.site):
                yield Document(page_content=passage.text, metadata=passage.metadata)


class GleanerRetriever(BaseRetriever):
    """Gleaner's hybrid search; each hit is the verbatim slice, with its scores and provenance."""

    base_url: str
    token: str | None = None
    site: str | None = None
    k: int = 4
    timeout: float = 30.0

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        with GleanerClient(self.base_url, self.token, timeout=self.timeout) as client:
            return [Document(page_content=p.text, metadata=p.metadata)
                    for p in client.hits(query, self.site, self.k)]
