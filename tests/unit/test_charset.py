"""Charset sniffing follows the HTML standard: BOM, then the transport's charset, then a <meta> prescan."""

import pytest

from gleaner.fetch.charset import decode_html, sniff

CAFE_UTF8 = "café €".encode()
CAFE_1252 = "café €".encode("windows-1252")


def page(meta: str, text: bytes) -> bytes:
    return b"<!doctype html><html><head>" + meta.encode("ascii") + b"</head><body>" + text + b"</body></html>"


CASES = [
    # (what, body, Content-Type charset, expected encoding, where the decision came from)
    ("a UTF-8 BOM beats the header", b"\xef\xbb\xbf" + page("", CAFE_UTF8), "windows-1252", "utf-8", "bom"),
    ("a UTF-16LE BOM beats a meta", b"\xff\xfe" + "<p>café</p>".encode("utf-16le"), None, "utf-16le", "bom"),
    ("a UTF-16BE BOM", b"\xfe\xff" + "<p>café</p>".encode("utf-16be"), None, "utf-16be", "bom"),
    ("the header beats a meta", page('<meta charset="utf-8">', CAFE_1252), "windows-1252", "windows-1252",
     "transport"),
    ("latin1 in the header means windows-1252", page("", CAFE_1252), "latin1", "windows-1252", "transport"),
    ("iso-8859-1 in the header means windows-1252", page("", CAFE_1252), "ISO-8859-1", "windows-1252", "transport"),
    ("an unknown header label is ignored", page('<meta charset="utf-8">', CAFE_UTF8), "no-such-thing", "utf-8",
     "meta"),
    ("a meta charset", page('<meta charset="windows-1252">', CAFE_1252), None, "windows-1252", "meta"),
    ("a meta http-equiv", page('<meta http-equiv="Content-Type" content="text/html; charset=latin1">', CAFE_1252),
     None, "windows-1252", "meta"),
    ("a meta saying UTF-16 over ASCII-compatible bytes means UTF-8", page('<meta charset="utf-16">', CAFE_UTF8),
     None, "utf-8", "meta"),
    ("a meta saying UTF-16LE likewise", page("<meta charset=UTF-16LE>", CAFE_UTF8), None, "utf-8", "meta"),
    ("x-user-defined in a meta means windows-1252", page('<meta charset="x-user-defined">', CAFE_1252), None,
     "windows-1252", "meta"),
    ("a meta inside a comment is not read", page('<!-- <meta charset="windows-1252"> -->', CAFE_UTF8), None,
     "utf-8", "utf-8"),
    ("a meta past the first 1024 bytes is not read",
     b"<html><head>" + b" " * 1100 + b'<meta charset="windows-1252"></head><body>' + CAFE_UTF8, None, "utf-8",
     "utf-8"),
    ("no declaration, valid UTF-8", page("", CAFE_UTF8), None, "utf-8", "utf-8"),
    ("no declaration, not UTF-8: windows-1252", page("", CAFE_1252), None, "windows-1252", "default"),
]


@pytest.mark.parametrize(("what", "body", "header", "encoding", "source"), CASES, ids=[c[0] for c in CASES])
def test_the_encoding_is_sniffed_as_the_html_standard_says(what, body, header, encoding, source):
    sniffed = sniff(body, header)
    assert (sniffed.encoding, sniffed.source) == (encoding, source)


def test_a_page_declaring_utf16_over_utf8_bytes_decodes_to_the_right_text_not_mojibake():
    text = decode_html(page('<meta charset="utf-16">', CAFE_UTF8), None)
    assert "café €" in text


def test_a_bom_is_not_part_of_the_text_and_windows_1252_bytes_decode_as_such():
    assert decode_html(b"\xef\xbb\xbf<p>x</p>", None) == "<p>x</p>"
    assert "café €" in decode_html(page("", CAFE_1252), "latin1")
