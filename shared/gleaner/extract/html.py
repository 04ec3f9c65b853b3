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
from importlib.metadata import version
from typing import TYPE_CHECKING

from lxml import html as lxml_html
from lxml.etree import ParserError, tostring

if TYPE_CHECKING:
    from trafilatura.settings import Extractor

# trafilatura is imported where a page is extracted, not here: a process that extracts nothing (an
# unchanged recrawl's main process) should not pay for its import. The extraction pool preloads it.
EXTRACTOR = f"trafilatura-{version('trafilatura')}"

_SKIP = {"script", "style", "noscript", "template", "svg", "iframe", "head", "form", "button", "select"}
_BLOCK = {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "blockquote",
          "figure", "figcaption", "dd", "dt", "address", "details", "summary", "body"}
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
# XHTML's XML declaration (docutils, DocBook and many older generators write one): lxml refuses a str
# that declares an encoding, and one that declares none it reads as a fragment, not a document.
_XML_DECLARATION = re.compile(r"\A\ufeff?\s*<\?xml[^>]*\?>")
_COLLAPSED = ("\t", "\r", "\f", "\v", "\u00a0")  # what _SPACES matches besides a space
# What the walker does with each tag (one dict lookup instead of a chain of set tests).
_SKIPPED, _HEADING, _ITEM, _CODE, _TABLE, _CONTAINER, _INLINE = range(7)
_KINDS = {
    **{tag: _SKIPPED for tag in _SKIP},
    **{f"h{level}": _HEADING for level in range(1, 7)},
    "li": _ITEM, "pre": _CODE, "table": _TABLE,
    **{tag: _CONTAINER for tag in ("ul", "ol", "dl", "html", *_BLOCK)},
}


@dataclass(frozen=True, slots=True)
class Extracted:
    content_md: str
    raw_md: str
    title: str | None
    main_text_chars: int
    extractor: str = EXTRACTOR


def _normalise(text: str) -> str:
    """Runs of spaces, tabs and no-break spaces become one space; the ends are stripped."""
    text = text.strip()
    # Most text has no run to collapse: C substring scans decide, and the regex runs only on text that
    # has one (this runs for every text piece of every page; commit 6cdbf00 has the figures).
    if "  " in text or (not text.isprintable() and any(c in text for c in _COLLAPSED)):
        return _SPACES.sub(" ", text)
    return text


def _text_content(node: lxml_html.HtmlElement) -> str:
    """``node.text_content()``: the same string (comments and processing instructions left out), from
    libxml2's text serialiser, which skips the XPath evaluation text_content() sets up per call."""
    return str(tostring(node, method="text", encoding="unicode", with_tail=False))


def _text(node: lxml_html.HtmlElement) -> str:
    return _normalise(_text_content(node))


def whole_page_markdown(tree: lxml_html.HtmlElement) -> str:
    """Every visible block of the page as markdown: recall over precision."""
    out: list[str] = []
    append = out.append

    def walk(node: lxml_html.HtmlElement) -> None:
        tag = node.tag
        # Comments and processing instructions (tag is not a string) are walked like blocks.
        kind = _KINDS.get(tag, _INLINE) if isinstance(tag, str) else _CONTAINER
        if kind == _CONTAINER:
            own = node.text
            if own and not own.isspace():
                append(_normalise(own))
            for child in node:
                walk(child)
                tail = child.tail
                if tail and not tail.isspace():
                    append(_normalise(tail))
        elif kind == _INLINE:
            text = _text(node)
            if text:
                append(text)
        elif kind == _HEADING:
            text = _text(node)
            if text:
                append("#" * int(tag[1]) + " " + text)
        elif kind == _ITEM:
            text = _text(node)
            if text:
                append("- " + text)
        elif kind == _CODE:
            code = _text_content(node).strip("\n")
            if code.strip():
                append("```\n" + code + "\n```")
        elif kind == _TABLE:
            rows = []
            for tr in node.iter("tr"):
                cells = [_text(c).replace("|", "\\|") for c in tr if c.tag in ("td", "th")]
                if cells:
                    rows.append("| " + " | ".join(cells) + " |")
            if rows:
                width = rows[0].count(" | ") + 1
                append("\n".join([rows[0], "|" + " --- |" * width, *rows[1:]]))

    body = tree.find("body")
    walk(body if body is not None else tree)
    return "\n\n".join(out).strip() + "\n"


def extract_html(html: str, url: str | None = None) -> Extracted:
    """content.md and raw.md for one page; an unparseable page yields empty bodies."""
    html = _XML_DECLARATION.sub("", html, count=1)
    try:
        tree = lxml_html.fromstring(html) if html.strip() else None
    except (ParserError, ValueError):
        tree = None
    if tree is None:
        return Extracted("", "", None, 0)
    title_node = tree.find(".//title")
    title = _text(title_node) if title_node is not None else None
    raw_md = whole_page_markdown(tree)
    import trafilatura

    content = trafilatura.extract(tree, options=_options(url))
    content_md = (content or "").strip()
    content_md = content_md + "\n" if content_md else ""
    return Extracted(content_md, raw_md, title or None, len(content_md))


# trafilatura's options for every page but its URL, built once per process: trafilatura.extract builds an
# Extractor per call from keyword arguments, and that reads its settings through configparser each time.
_TEMPLATE: Extractor | None = None


def _options(url: str | None) -> Extractor:
    """What ``trafilatura.extract(tree, url=url, output_format="markdown", include_tables=True,
    include_formatting=True, include_links=False, include_comments=False, with_metadata=False,
    deduplicate=False)`` would build, as a copy of one template with the page's URL set as Extractor
    sets it (tests/unit/test_extract_options.py compares the two field by field)."""
    global _TEMPLATE
    from trafilatura.settings import Extractor, set_date_params

    if _TEMPLATE is None:
        _TEMPLATE = Extractor(output_format="markdown", tables=True, formatting=True, links=False, comments=False,
                              with_metadata=False, dedup=False)
    options = object.__new__(Extractor)
    for name in Extractor.__slots__:
        setattr(options, name, getattr(_TEMPLATE, name))
    # A copy (nothing of one page's run reaches the next) with today's latest date, as Extractor sets it per
    # call: a process running past midnight would otherwise keep the day it started.
    options.date_params = set_date_params(bool(_TEMPLATE.date_params.get("extensive_search", True)))
    options.url = url
    options.source = url and url.encode("utf-8", "replace").decode("utf-8")
    return options
