import gzip

import pytest

from gleaner.discover.links import extract_links
from gleaner.discover.sitemaps import parse_sitemap
from gleaner.errors import InvalidInput

URLSET = b"""<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc> https://a.test/x </loc><lastmod>2026-01-01</lastmod></url><url><loc>https://a.test/y</loc></url></urlset>"""
INDEX = b"""<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>https://a.test/s1.xml.gz</loc></sitemap></sitemapindex>"""


def test_a_urlset_yields_its_locations():
    sitemap = parse_sitemap(URLSET)
    assert sitemap.kind == "urlset" and sitemap.locs == ("https://a.test/x", "https://a.test/y")


def test_an_index_and_a_gzipped_sitemap_are_read():
    assert parse_sitemap(INDEX).kind == "index"
    assert parse_sitemap(gzip.compress(URLSET)).locs[1] == "https://a.test/y"


@pytest.mark.parametrize("bad", [b"<urlset><url>", b"<html><body>hi</body></html>", b"\x1f\x8bnotgzip", b""])
def test_malformed_sitemaps_raise_a_clear_error(bad):
    with pytest.raises(InvalidInput):
        parse_sitemap(bad)


def test_a_gzip_bomb_is_refused_before_it_inflates():
    bomb = gzip.compress(b"<urlset>" + b" " * (60 * 1024 * 1024) + b"</urlset>")
    assert len(bomb) < 200_000
    with pytest.raises(InvalidInput, match="inflates past"):
        parse_sitemap(bomb)


def test_entities_are_not_expanded():
    billion = b"""<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://a.test/&b;</loc></url></urlset>"""
    try:
        sitemap = parse_sitemap(billion)
    except InvalidInput:
        return
    assert all("aaaaaaaaaa" not in loc for loc in sitemap.locs)


def test_links_are_resolved_canonicalised_and_deduplicated():
    html = """<html><head><base href="/docs/"><link rel="alternate" type="application/rss+xml" href="/feed.xml">
    </head><body><a href="a">A</a><a href="a#frag">A again</a><a href="https://a.test/b/?utm_source=x">B</a>
    <a href="mailto:x@y">m</a><a href="javascript:void(0)">j</a><a rel="nofollow" href="/secret">s</a></body></html>"""
    page = extract_links(html, "https://a.test/index")
    assert page.links == ("https://a.test/docs/a", "https://a.test/b/?utm_source=x")
    assert page.feeds == ("https://a.test/feed.xml",)


def test_a_nofollow_page_yields_no_links_and_broken_html_yields_nothing():
    assert (
        extract_links('<meta name="robots" content="noindex,nofollow"><a href="/x">x</a>', "https://a.test/").links
        == ()
    )
    assert extract_links("", "https://a.test/").links == ()
