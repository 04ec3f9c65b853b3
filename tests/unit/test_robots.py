"""robots.txt parsing and matching (RFC 9309), as a table: robots text, path, may Gleaner fetch it?

Gleaner's product token is ``gleaner``. Each case is named for the rule it pins down.
"""

from __future__ import annotations

import pytest

from gleaner.fetch.robots import RobotsRules, parse_robots, pattern_matches

UA_STAR_ADMIN = "User-agent: *\nDisallow: /admin\n"

CASES: list[tuple[str, str, str, bool]] = [
    # (name, robots.txt, path?query, allowed)
    ("empty file allows everything", "", "/anything", True),
    ("only comments allow everything", "# nothing here\n# at all\n", "/x", True),
    ("star group disallows a prefix", UA_STAR_ADMIN, "/admin/users", False),
    ("star group leaves other paths", UA_STAR_ADMIN, "/about", True),
    ("a prefix match needs the prefix", UA_STAR_ADMIN, "/administrator", False),
    ("root disallow blocks everything", "User-agent: *\nDisallow: /\n", "/", False),
    ("empty disallow allows everything", "User-agent: *\nDisallow:\n", "/private", True),
    ("robots.txt itself is always allowed", "User-agent: *\nDisallow: /\n", "/robots.txt", True),
    ("our group wins over star",
     "User-agent: *\nDisallow: /\n\nUser-agent: gleaner\nAllow: /\n", "/page", True),
    ("our group alone decides, star rules ignored",
     "User-agent: *\nDisallow: /blog\n\nUser-agent: gleaner\nDisallow: /shop\n", "/blog/post", True),
    ("our group's rules apply",
     "User-agent: *\nDisallow: /blog\n\nUser-agent: gleaner\nDisallow: /shop\n", "/shop/cart", False),
    ("agent names compare case-insensitively", "User-agent: GLEANER\nDisallow: /x\n", "/x", False),
    ("the product token is cut at a space", "User-agent: gleaner bot\nDisallow: /x\n", "/x", False),
    ("the product token is cut at a slash", "User-agent: Gleaner/2.0\nDisallow: /x\n", "/x", False),
    ("a name that is our prefix is not us", "User-agent: glean\nDisallow: /\n", "/x", True),
    ("a longer name that starts with ours is not us", "User-agent: gleanerbot\nDisallow: /\n", "/x", True),
    ("another bot's group does not apply", "User-agent: otherbot\nDisallow: /\n", "/x", True),
    ("groups naming us merge",
     "User-agent: gleaner\nDisallow: /a\n\nUser-agent: other\nDisallow: /b\n\nUser-agent: gleaner\nDisallow: /c\n",
     "/c/1", False),
    ("merged groups keep the first group's rules",
     "User-agent: gleaner\nDisallow: /a\n\nUser-agent: gleaner\nDisallow: /c\n", "/a/1", False),
    ("star groups merge too", "User-agent: *\nDisallow: /a\n\nUser-agent: *\nDisallow: /b\n", "/b", False),
    ("consecutive user-agent lines share a group",
     "User-agent: other\nUser-agent: gleaner\nDisallow: /shared\n", "/shared", False),
    ("a user-agent after rules starts a new group",
     "User-agent: gleaner\nDisallow: /a\nUser-agent: other\nDisallow: /b\n", "/b", True),
    ("an unknown line does not end a group",
     "User-agent: gleaner\nFoo: bar\nDisallow: /secret\n", "/secret", False),
    ("a sitemap line does not end a group",
     "User-agent: gleaner\nSitemap: https://x.test/s.xml\nDisallow: /secret\n", "/secret", False),
    ("rules before any user-agent are ignored", "Disallow: /\nUser-agent: *\nDisallow: /x\n", "/y", True),
    ("longest match wins: allow deeper", "User-agent: *\nDisallow: /a\nAllow: /a/b\n", "/a/b/c", True),
    ("longest match wins: disallow deeper", "User-agent: *\nAllow: /a\nDisallow: /a/b\n", "/a/b/c", False),
    ("allow wins a tie", "User-agent: *\nDisallow: /page\nAllow: /page\n", "/page", True),
    ("order of lines does not matter", "User-agent: *\nAllow: /a/b\nDisallow: /a\n", "/a/b", True),
    ("star matches any run", "User-agent: *\nDisallow: /*.pdf\n", "/docs/file.pdf", False),
    ("star matches the empty run", "User-agent: *\nDisallow: /a*b\n", "/ab", False),
    ("star in the middle needs the tail", "User-agent: *\nDisallow: /a*z\n", "/abc", True),
    ("dollar anchors the end", "User-agent: *\nDisallow: /*.pdf$\n", "/file.pdf?x=1", True),
    ("dollar anchor matches the exact end", "User-agent: *\nDisallow: /*.pdf$\n", "/file.pdf", False),
    ("dollar alone pins the whole path", "User-agent: *\nDisallow: /$\n", "/", False),
    ("dollar alone spares longer paths", "User-agent: *\nDisallow: /$\n", "/page", True),
    ("query strings are matched", "User-agent: *\nDisallow: /*?session=\n", "/p?session=1", False),
    ("percent-encoded path cannot step around a rule", UA_STAR_ADMIN, "/%61dmin", False),
    ("percent-encoded rule matches the plain path", "User-agent: *\nDisallow: /%61dmin\n", "/admin", False),
    ("escape case does not matter", "User-agent: *\nDisallow: /a%2fb\n", "/a%2Fb", False),
    ("an encoded slash is not a slash", "User-agent: *\nDisallow: /a/b\n", "/a%2Fb", True),
    ("non-ASCII rules match UTF-8 escapes", "User-agent: *\nDisallow: /café\n", "/caf%C3%A9", False),
    ("non-ASCII paths match UTF-8 escaped rules", "User-agent: *\nDisallow: /caf%C3%A9\n", "/café", False),
    ("a literal star in a path is not a wildcard", "User-agent: *\nDisallow: /a%2Ab\n", "/a*b", False),
    ("CRLF line ends", "User-agent: *\r\nDisallow: /x\r\n", "/x", False),
    ("bare CR line ends", "User-agent: *\rDisallow: /x\r", "/x", False),
    ("a BOM does not swallow the first group", "\ufeffUser-agent: *\nDisallow: /x\n", "/x", False),
    ("comments are cut from lines", "User-agent: * # everyone\nDisallow: /x # secret\n", "/x", False),
    ("keys are case-insensitive", "USER-AGENT: *\nDISALLOW: /x\n", "/x", False),
    ("whitespace around values is ignored", "User-agent:    *   \nDisallow:    /x   \n", "/x", False),
    ("lines without a colon are ignored", "User-agent: *\nDisallow /x\nDisallow: /y\n", "/x", True),
    ("a rule without a leading slash is rooted", "User-agent: *\nDisallow: private\n", "/private/x", False),
    ("no group for us or star allows everything", "User-agent: a\nDisallow: /\nUser-agent: b\nDisallow: /\n",
     "/x", True),
]


@pytest.mark.parametrize(("robots", "path", "allowed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_robots_decides_each_case_as_rfc_9309_says(robots: str, path: str, allowed: bool) -> None:
    assert parse_robots(robots, "gleaner").allows(path) is allowed


def test_the_table_is_large_enough_to_mean_something() -> None:
    assert len(CASES) >= 40


def test_rules_read_from_bytes_decode_utf8_with_a_bom() -> None:
    rules = RobotsRules.parse("\ufeffUser-agent: *\nDisallow: /café\n".encode())
    assert not rules.allows("https://x.test/caf%C3%A9")
    assert rules.allows("https://x.test/cafe")


def test_sitemap_lines_are_collected_from_anywhere() -> None:
    rules = RobotsRules.parse(b"Sitemap: https://x.test/a.xml\nUser-agent: *\nDisallow:\nsitemap: https://x.test/b.xml\n")
    assert rules.sitemaps == ("https://x.test/a.xml", "https://x.test/b.xml")


def test_crawl_delay_comes_from_the_group_that_applies() -> None:
    text = "User-agent: *\nCrawl-delay: 9\n\nUser-agent: gleaner\nCrawl-delay: 2.5\nDisallow:\n"
    assert parse_robots(text, "gleaner").crawl_delay == 2.5
    assert parse_robots("User-agent: *\nCrawl-delay: 3\n", "gleaner").crawl_delay == 3.0
    assert parse_robots("User-agent: *\nCrawl-delay: soon\n", "gleaner").crawl_delay is None


def test_unknown_rules_allow_nothing_and_no_rules_allow_everything() -> None:
    assert not RobotsRules.unknown("5xx").allows("https://x.test/")
    assert RobotsRules.allow_all("404").allows("https://x.test/anything")


def test_a_hostile_wildcard_pattern_matches_in_linear_time() -> None:
    # A backtracking regex would take exponential time here; greedy segments do not.
    pattern = "/" + "*a" * 40 + "*b"
    assert not pattern_matches(pattern, False, "/" + "a" * 20_000)
    assert pattern_matches(pattern, False, "/" + "a" * 20_000 + "b")
