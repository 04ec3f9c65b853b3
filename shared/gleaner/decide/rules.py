"""A deterministic, rule-based page decider.

Rules, in order: operator exclude globs; URL patterns that are never knowledge
(login, cart, search, tag/category archives, pagination, feeds, assets); for
sampled pages, a non-HTML type or near-empty main text. Everything else is
included. Pure: no I/O, same facts in, same decision out.
"""

from __future__ import annotations

import re

from gleaner.decide.port import PageDecision, PageFacts, Verdict
from gleaner.fetch.types import FetchOutcome
from gleaner.urls import glob_matches

# Below this many characters of main text a page is navigation, not knowledge.
MIN_MAIN_TEXT_CHARS = 200

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("login", re.compile(r"/(log-?in|sign-?in|sign-?up|register|logout|account|my-account|auth|password)(/|$)")),
    ("cart", re.compile(r"/(cart|basket|checkout|wishlist)(/|$)")),
    ("search", re.compile(r"/(search|find)(/|$)|[?&](q|s|query|search)=")),
    ("tag", re.compile(r"/(tags?|categor(y|ies)|labels?|topics?|authors?)(/|$)")),
    ("pagination", re.compile(r"/page/\d+(/|$)|[?&](page|p|pg|offset|start)=\d+")),
    ("feed", re.compile(r"/(feed|rss|atom)(/|$)|\.(rss|atom)$|/feed\.xml$|/index\.xml$")),
    ("asset", re.compile(r"\.(css|js|json|png|jpe?g|gif|svg|webp|ico|woff2?|ttf|zip|gz|mp[34]|avi|mov|exe|dmg)$")),
)


class RuleDecider:
    def decide(self, facts: PageFacts, exclude: tuple[str, ...] = ()) -> PageDecision:
        for pattern in exclude:
            if glob_matches(facts.path, pattern):
                return PageDecision(Verdict.EXCLUDE, f"matches exclude glob {pattern}", 1.0, content_kind="excluded",
                                    evidence=(pattern,))
        target = facts.url.lower()
        path_and_query = target.split("://", 1)[-1]
        path_and_query = path_and_query[path_and_query.find("/"):] if "/" in path_and_query else "/"
        for kind, regex in _PATTERNS:
            if regex.search(path_and_query):
                return PageDecision(Verdict.EXCLUDE, f"{kind} page", 0.9, content_kind=kind,
                                    evidence=(regex.pattern,))
        if facts.sampled:
            if facts.fetch_outcome == FetchOutcome.REFUSED_CONTENT:
                return PageDecision(Verdict.EXCLUDE, f"not HTML ({facts.content_type or 'unknown type'})", 0.95,
                                    content_kind="non_html")
            if facts.fetch_outcome not in (None, FetchOutcome.FETCHED, FetchOutcome.NOT_MODIFIED):
                return PageDecision(Verdict.NEEDS_REVIEW, f"sample fetch failed: {facts.fetch_outcome}", 0.3,
                                    content_kind="unknown")
            if facts.main_text_chars is not None and facts.main_text_chars < MIN_MAIN_TEXT_CHARS:
                return PageDecision(Verdict.EXCLUDE, f"near-empty main text ({facts.main_text_chars} chars)", 0.8,
                                    content_kind="thin")
            return PageDecision(Verdict.INCLUDE, "sample has main content", 0.8, content_kind="article")
        return PageDecision(Verdict.INCLUDE, "no exclusion rule matched", 0.7, content_kind="page")
