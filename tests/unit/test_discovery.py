import gzip

import pytest

from gleaner.discover.links import extract_links
from gleaner.discover.sitemaps import SitemapStream, parse_sitemap
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
    bomb = gzip.compress(b"<urlset>" + b"<url></url>" * (6 * 1024 * 1024) + b"</urlset>")
    assert len(bomb) < 400_000
    with pytest.raises(InvalidInput, match="inflates past"):
        list(SitemapStream(bomb, max_bytes=1024 * 1024))


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


def test_a_large_gzipped_sitemap_is_read_only_as_far_as_the_reader_goes():
    entries = b"".join(b"<url><loc>https://a.test/p%d</loc></url>" % i for i in range(200_000))
    stream = SitemapStream(gzip.compress(b"<urlset>" + entries + b"</urlset>"))
    first = [loc for _, (loc, _lastmod) in zip(range(3), stream, strict=False)]
    assert stream.kind == "urlset" and first == ["https://a.test/p0", "https://a.test/p1", "https://a.test/p2"]


def test_a_sitemap_past_fifty_thousand_urls_is_truncated_not_refused():
    entries = b"".join(b"<url><loc>https://a.test/p%d</loc></url>" % i for i in range(50_005))
    sitemap = parse_sitemap(b"<urlset>" + entries + b"</urlset>")
    assert len(sitemap.locs) == 50_000 and sitemap.truncated


def test_a_page_gives_at_most_the_capped_number_of_links():
    html = "<html><body>" + "".join(f'<a href="/p{i}">p</a>' for i in range(20_000)) + "</body></html>"
    page = extract_links(html, "https://a.test/", max_links=100)
    assert len(page.links) == 100 and page.truncated and page.links[-1] == "https://a.test/p99"
