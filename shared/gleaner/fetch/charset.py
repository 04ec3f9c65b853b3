"""Which character encoding an HTML body is in, decided as the HTML standard's sniffing algorithm does.

In order: a byte order mark; the transport's ``charset`` (the Content-Type header);
a ``<meta>`` prescan of the first 1024 bytes; else the bytes themselves (UTF-8 if
they are valid UTF-8, windows-1252 otherwise, the standard's default for most
locales). Labels resolve through the WHATWG Encoding table (``webencodings``), so
``latin1`` and ``iso-8859-1`` mean windows-1252 and an unknown label is ignored. A
``<meta>`` that says UTF-16 over bytes that were read as ASCII-compatible to find
it means UTF-8, and ``x-user-defined`` there means windows-1252 (both rules of the
prescan). Pure: bytes in, an encoding name and text out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import webencodings

# The prescan's window (HTML standard: "the first 1024 bytes").
PRESCAN_BYTES = 1024

_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xfe\xff", "utf-16be"), (b"\xff\xfe", "utf-16le"))
_COMMENT = re.compile(rb"<!--.*?(?:-->|$)", re.DOTALL)
_META = re.compile(rb"<meta[\s/]([^>]*)", re.IGNORECASE)
_ATTRIBUTE = re.compile(rb"""([^\s=/>]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s>]*))?""")
_CHARSET_IN_CONTENT = re.compile(rb"""charset\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s;"']+))""", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Sniffed:
    """The encoding's WHATWG name, where the decision came from, and how many BOM bytes to skip."""

    encoding: str
    source: str  # bom | transport | meta | utf-8 | default
    skip: int = 0


def _lookup(label: bytes | str | None) -> webencodings.Encoding | None:
    if not label:
        return None
    text = label.decode("ascii", "replace") if isinstance(label, bytes) else label
    return webencodings.lookup(text.strip())


def prescan(head: bytes) -> str | None:
    """The encoding a ``<meta>`` in ``head`` declares (after the prescan's UTF-16 and x-user-defined rules)."""
    head = _COMMENT.sub(b"", head[:PRESCAN_BYTES])
    for match in _META.finditer(head):
        attributes: dict[bytes, bytes] = {}
        for name, value in _ATTRIBUTE.findall(match.group(1)):
            attributes.setdefault(name.lower(), value.strip(b"\"'"))
        label: bytes | None = attributes.get(b"charset")
        if label is None and attributes.get(b"http-equiv", b"").lower() == b"content-type":
            found = _CHARSET_IN_CONTENT.search(attributes.get(b"content", b""))
            label = next((g for g in found.groups() if g), None) if found else None
        encoding = _lookup(label)
        if encoding is None:
            continue
        if encoding.name in ("utf-16be", "utf-16le"):
            return "utf-8"
        if encoding.name == "x-user-defined":
            return "windows-1252"
        return str(encoding.name)
    return None


def sniff(body: bytes, transport: str | None) -> Sniffed:
    """The encoding of ``body`` given the Content-Type's ``charset`` (or None)."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return Sniffed(name, "bom", len(bom))
    declared = _lookup(transport)
    if declared is not None:
        return Sniffed(str(declared.name), "transport")
    meta = prescan(body)
    if meta is not None:
        return Sniffed(meta, "meta")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return Sniffed("windows-1252", "default")
    return Sniffed("utf-8", "utf-8")


def decode_html(body: bytes, transport: str | None) -> str:
    """The body as text in its sniffed encoding; bytes invalid in it become U+FFFD."""
    sniffed = sniff(body, transport)
    encoding = webencodings.lookup(sniffed.encoding)
    text, _ = encoding.codec_info.decode(body[sniffed.skip:], "replace")
    return str(text)
