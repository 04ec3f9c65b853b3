"""Feeds parsed from bytes: the three families, and hostile or broken feeds recorded, never crashing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gleaner.discover.feeds import MAX_FEED_BYTES, parse_feed
from gleaner.errors import InvalidInput
from gleaner.urls import canonicalize
from tests.feed_site import feed_pages

BASE = "http://news.test"
PAGES = feed_pages(BASE)


def parse(path: str, content_type: str | None = "application/xml"):
    return parse_feed(PAGES[path].data, BASE + path, content_type)


def test_rss2_entries_become_links_as_the_feed_spells_them_with_dates():
    feed = parse("/feeds/rss2.xml")
    assert feed.kind == "rss20" and feed.problems == ()
    # Fetched as spelled; map canonicalises them for identity (tracking parameters dropped there).
    assert [e.link for e in feed.entries] == [BASE + "/articles/sea-ice?utm_source=rss",
                                              BASE + "/articles/solar-cells?utm_source=rss"]
    assert feed.entries[0].published_at == datetime(2026, 6, 1, 8, 0, tzinfo=UTC)


def test_rss1_rss090_and_atom_are_read():
    assert [e.link for e in parse("/feeds/rss1.rdf").entries] == [BASE + "/articles/solar-cells",
                                                                   BASE + "/articles/tidal-power"]
    assert parse("/feeds/rss1.rdf").kind == "rss10"
    assert parse("/feeds/rss090.rdf").kind == "rss090"
    atom = parse("/feeds/atom.xml")
    assert atom.kind == "atom10"
    assert [e.link for e in atom.entries] == [BASE + "/articles/tidal-power"]  # relative href resolved


def test_a_feed_that_is_not_well_formed_yields_what_it_can_and_records_the_problem():
    feed = parse("/feeds/bad.xml")
    assert [canonicalize(e.link) for e in feed.entries][:2] == [BASE + "/articles/sea-ice",
                                                                BASE + "/articles/solar-cells"]
    assert any("not well-formed" in p for p in feed.problems)


def test_a_feed_in_the_wrong_encoding_is_read_and_flagged():
    feed = parse("/feeds/latin1.xml")
    assert feed.entries[0].title == "Arctic café sea ice hits a record low"
    assert any("encoding" in p.lower() or "parsed as" in p for p in feed.problems)


def test_an_entity_bomb_is_refused_before_parsing():
    with pytest.raises(InvalidInput, match="entities"):
        parse("/feeds/bomb.xml")


def test_a_feed_over_the_size_cap_is_refused_before_parsing():
    assert len(PAGES["/feeds/huge.xml"].data) > MAX_FEED_BYTES
    with pytest.raises(InvalidInput, match="cap"):
        parse("/feeds/huge.xml")


def test_html_is_not_a_feed():
    with pytest.raises(InvalidInput, match="not an RSS or Atom feed"):
        parse("/feeds/not-a-feed.xml")


def test_a_feed_body_naming_a_local_file_is_parsed_as_text_not_opened():
    # feedparser opens a filename given as bytes; Gleaner hands it a stream, so nothing is read from disk.
    with pytest.raises(InvalidInput):
        parse_feed(b"/etc/hostname", BASE + "/feed", "application/xml")
