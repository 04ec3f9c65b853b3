"""Search results as a reader wants them: passages as text (no ``#`` or ``**``), grouped by page.

The search API answers chunks of canonical markdown, best first, possibly several of one page, and
(under its relevance floor) ``"results": []`` with a ``"note"``. This turns that into what the page
shows; the API's answer itself is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from markdown_it import MarkdownIt

# Inline tokens whose content is text a reader sees.
_TEXT_TOKENS = frozenset({"text", "code_inline"})


@cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark")


def as_text(markdown: str) -> str:
    """The words of a markdown passage: headings, emphasis, links and list marks reduced to their text."""
    blocks: list[str] = []
    for token in _parser().parse(markdown or ""):
        if token.type == "inline":
            words = "".join(child.content if child.type in _TEXT_TOKENS else " " if child.type in (
                "softbreak", "hardbreak") else "" for child in token.children or ())
            if words.strip():
                blocks.append(" ".join(words.split()))
        elif token.type in ("fence", "code_block") and token.content.strip():
            blocks.append(" ".join(token.content.split()))
    return " · ".join(blocks)


@dataclass
class PageHits:
    """One page's matching passages, best first."""

    document_id: str | None
    url: str
    link: str  # the back-office page of the hit: its document, or its site's composites
    title: str
    site_domain: str
    version: Any
    score: float
    passages: list[str] = field(default_factory=list)
    # The best passage's verbatim slice: what the feedback form of the hit is about.
    text_hash: str | None = None
    start: Any = None
    end: Any = None


def grouped(answer: dict[str, Any]) -> list[PageHits]:
    """The results by page, in the order of each page's best passage."""
    pages: dict[str, PageHits] = {}
    for r in answer.get("results") or ():
        key = str(r.get("document_id") or r.get("url"))
        hit = pages.get(key)
        if hit is None:
            link = (f"/ui/documents/{r['document_id']}" if r.get("document_id")
                    else f"/ui/sites/{r.get('site_domain')}/composites")
            hit = pages[key] = PageHits(r.get("document_id"), r.get("url") or "", link,
                                        r.get("title") or r.get("url") or "",
                                        r.get("site_domain") or "", r.get("version"), float(r.get("score") or 0),
                                        text_hash=r.get("text_hash"), start=r.get("start"), end=r.get("end"))
        text = as_text(r.get("preview") or r.get("text") or "")
        if text and text not in hit.passages:
            hit.passages.append(text)
    return list(pages.values())
