"""HTML to markdown: content.md (main content, trafilatura) and raw.md (the whole page).

One parse per page: the whole-page markdown is rendered from the lxml tree first,
then the same tree goes to trafilatura (which prunes it in place). raw.md is our
own small renderer rather than a second trafilatura pass with recall settings:
a second pass doubles the dominant cost of a crawl (FACTS.md), and raw.md's job
is recall, which a walk over every block element gives at a fraction of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import trafilatura
from lxml import html as lxml_html
from lxml.etree import ParserError

EXTRACTOR = f"trafilatura-{trafilatura.__version__}"

_SKIP = {"script", "style", "noscript", "template", "svg", "iframe", "head", "form", "button", "select"}
_BLOCK = {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "blockquote",
          "figure", "figcaption", "dd", "dt", "address", "details", "summary", "body"}
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")


@dataclass(frozen=True, slots=True)
class Extracted:
    content_md: str
    raw_md: str
    title: str | None
    main_text_chars: int
    extractor: str = EXTRACTOR


def _text(node: lxml_html.HtmlElement) -> str:
    return _SPACES.sub(" ", node.text_content()).strip()


def whole_page_markdown(tree: lxml_html.HtmlElement) -> str:
    """Every visible block of the page as markdown: recall over precision."""
    out: list[str] = []

    def walk(node: lxml_html.HtmlElement) -> None:
        tag = node.tag if isinstance(node.tag, str) else ""
        if tag in _SKIP:
            return
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            text = _text(node)
            if text:
                out.append("#" * int(tag[1]) + " " + text)
            return
        if tag == "li":
            text = _text(node)
            if text:
                out.append("- " + text)
            return
        if tag == "pre":
            code = node.text_content().strip("\n")
            if code.strip():
                out.append("```\n" + code + "\n```")
            return
        if tag == "table":
            rows = []
            for tr in node.iter("tr"):
                cells = [_text(c).replace("|", "\\|") for c in tr if isinstance(c.tag, str) and c.tag in ("td", "th")]
                if cells:
                    rows.append("| " + " | ".join(cells) + " |")
            if rows:
                width = rows[0].count(" | ") + 1
                out.append("\n".join([rows[0], "|" + " --- |" * width, *rows[1:]]))
            return
        if tag in ("ul", "ol", "dl") or tag in _BLOCK or tag in ("html", ""):
            own = _SPACES.sub(" ", node.text or "").strip()
            if own:
                out.append(own)
            for child in node:
                walk(child)
                tail = _SPACES.sub(" ", child.tail or "").strip()
                if tail:
                    out.append(tail)
            return
        text = _text(node)
        if text:
            out.append(text)

    body = tree.find("body")
    walk(body if body is not None else tree)
    return "\n\n".join(out).strip() + "\n"


def extract_html(html: str, url: str | None = None) -> Extracted:
    """content.md and raw.md for one page; an unparseable page yields empty bodies."""
    try:
        tree = lxml_html.fromstring(html) if html.strip() else None
    except (ParserError, ValueError):
        tree = None
    if tree is None:
        return Extracted("", "", None, 0)
    title_node = tree.find(".//title")
    title = _text(title_node) if title_node is not None else None
    raw_md = whole_page_markdown(tree)
    content = trafilatura.extract(
        tree,
        url=url,
        output_format="markdown",
        include_tables=True,
        include_formatting=True,
        include_links=False,
        include_comments=False,
        with_metadata=False,
        deduplicate=False,
    )
    content_md = (content or "").strip()
    content_md = content_md + "\n" if content_md else ""
    return Extracted(content_md, raw_md, title or None, len(content_md))
