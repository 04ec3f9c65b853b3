"""robots.txt for one host (RFC 9309): a small parser of our own, and the per-host decision.

Why not protego (Scrapy's parser, a dependency until now)? It disagrees with
RFC 9309 where it matters to a site owner (FACTS.md): an unknown line ends a
group, ``User-agent: Foo Bar`` is not cut at the space, a group name that is a
prefix of ours matches (``glean`` would apply to ``gleaner``), and a leading BOM
drops the first group. Working around each by rewriting the text first would
still leave its matching rules in charge, so the rules are implemented here,
in about a hundred lines, as pure functions of strings:

* Lines end at CR, LF or CRLF; ``#`` starts a comment; keys are case-insensitive.
* A group is one or more consecutive ``User-agent`` lines and the rules after them;
  ``Sitemap`` and unknown lines do not end a group. Rules before any group are ignored.
* The product token of a ``User-agent`` value is its leading run of letters, ``-``
  and ``_`` (``Foo Bar`` is ``Foo``, ``gleaner/1.0`` is ``gleaner``) and must equal
  ours exactly, ignoring case. Every group naming us is merged; ``*`` groups apply
  (merged) only when none does; with neither, everything is allowed.
* Paths and rules compare in one canonical form (RFC 9309 §2.2.2): percent-encoded
  unreserved characters decoded, other escapes upper-cased, non-ASCII as UTF-8
  escapes, and a path's literal ``*`` and ``$`` as ``%2A`` / ``%24``, so
  ``/%61dmin`` cannot step around ``Disallow: /admin``.
* ``*`` matches any run of characters, a final ``$`` anchors the end; the longest
  matching rule (in canonical octets) wins, and ``Allow`` wins a tie. Matching is
  greedy per segment, so a hostile pattern cannot make it backtrack exponentially.
* ``/robots.txt`` is always allowed; an empty ``Disallow`` allows everything.
* ``Crawl-delay`` (not in the RFC, widely used) is read from the groups that apply;
  the largest valid value counts. ``Sitemap`` lines are collected wherever they are.

The per-host state is ``rules`` (parsed), ``none`` (a 4xx answer: no rules) or
``unknown`` (5xx, 429, timeout, network error, redirect loop, oversized: nothing
on that host is fetched this run). The fetcher decides which; this module only
parses and matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

from gleaner.settings.config import ROBOTS_TOKEN
from gleaner.urls import PERCENT_ESCAPE, canonical_escape

_TOKEN = re.compile(r"[A-Za-z_-]+")
_LINES = re.compile(r"\r\n|\r|\n")
_AGENT_KEYS = frozenset({"user-agent", "useragent", "user agent"})
_ALLOW_KEYS = frozenset({"allow"})
_DISALLOW_KEYS = frozenset({"disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"})


# Text _encode leaves as it is: printable ASCII without '%' (nor '*' and '$' where they are encoded).
_PLAIN_PATH = re.compile(r"[!-#&-)+-~]*")
_PLAIN_PATTERN = re.compile(r"[!-$&-~]*")


def _encode(text: str, *, keep_wildcards: bool) -> str:
    """The RFC 9309 §2.2.2 canonical form of a path or a rule pattern."""
    if (_PLAIN_PATTERN if keep_wildcards else _PLAIN_PATH).fullmatch(text):
        return text  # every page of a recrawl asks: most paths need no escape at all
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        match = PERCENT_ESCAPE.match(text, i)
        if match:
            out.append(canonical_escape(match.group(1)))
            i += 3
            continue
        if char in "*$" and not keep_wildcards:
            out.append("%2A" if char == "*" else "%24")
        elif char == "%" or ord(char) > 0x7E or ord(char) < 0x21:
            out.extend(f"%{b:02X}" for b in char.encode("utf-8"))
        else:
            out.append(char)
        i += 1
    return "".join(out)


def normalise_path(path: str) -> str:
    """A URL's path (and query) in canonical form, ready to match against rules."""
    return _encode(path or "/", keep_wildcards=False)


def _normalise_pattern(value: str) -> tuple[str, bool]:
    """(pattern in canonical form with ``*`` kept, anchored at the end?)."""
    anchored = value.endswith("$")
    if anchored:
        value = value[:-1]
    # A '$' inside a pattern is an ordinary character: encode it like a path's.
    value = value.replace("$", "%24")
    pattern = _encode(value, keep_wildcards=True)
    if not pattern.startswith(("/", "*")):
        pattern = "/" + pattern
    return pattern, anchored


def pattern_matches(pattern: str, anchored: bool, path: str) -> bool:
    """Does a canonical pattern (``*`` wildcards, optional end anchor) match a canonical path?

    Greedy leftmost matching of each ``*``-separated segment is exact for patterns whose
    only wildcard is ``*``, and runs in O(len(path) * len(pattern)): no backtracking.
    """
    segments = pattern.split("*")
    first, rest = segments[0], segments[1:]
    if not path.startswith(first):
        return False
    if not rest:
        return not anchored or len(path) == len(first)
    pos = len(first)
    for segment in rest[:-1]:
        found = path.find(segment, pos)
        if found < 0:
            return False
        pos = found + len(segment)
    last = rest[-1]
    if anchored:
        return len(path) - len(last) >= pos and path.endswith(last)
    return path.find(last, pos) >= 0


@dataclass(frozen=True, slots=True)
class Rule:
    allow: bool
    pattern: str
    anchored: bool

    @property
    def priority(self) -> int:
        # Longest match in canonical octets; the end anchor counts, as in Google's parser.
        return len(self.pattern) + (1 if self.anchored else 0)


@dataclass(frozen=True, slots=True)
class RobotsPolicy:
    """What one robots.txt says to one product token."""

    rules: tuple[Rule, ...] = ()
    crawl_delay: float | None = None
    sitemaps: tuple[str, ...] = ()

    def allows(self, path_and_query: str) -> bool:
        path = normalise_path(path_and_query)
        if path == "/robots.txt":
            return True
        best: Rule | None = None
        for rule in self.rules:
            if not pattern_matches(rule.pattern, rule.anchored, path):
                continue
            if best is None or rule.priority > best.priority or (rule.priority == best.priority and rule.allow):
                best = rule
        return best is None or best.allow


def parse_robots(text: str, token: str = ROBOTS_TOKEN) -> RobotsPolicy:
    """Parse robots.txt text (already decoded) for ``token``, a bare product token."""
    token = token.lower()
    text = text.lstrip("\ufeff")
    mine: list[Rule] = []
    star: list[Rule] = []
    delays: dict[str, list[float]] = {"mine": [], "star": []}
    named_me = named_star = False
    sitemaps: list[str] = []
    agents: list[str] = []  # the agents of the current group
    in_rules = False  # a rule line was seen since the last user-agent line
    for raw in _LINES.split(text):
        line = raw.split("#", 1)[0].strip()
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = " ".join(key.strip().lower().split())
        value = value.strip()
        if key in _AGENT_KEYS:
            if in_rules:
                agents, in_rules = [], False
            match = _TOKEN.match(value)
            agent = "*" if value.startswith("*") else (match.group(0).lower() if match else "")
            agents.append(agent)
            named_me = named_me or agent == token
            named_star = named_star or agent == "*"
        elif key in _ALLOW_KEYS or key in _DISALLOW_KEYS:
            in_rules = True
            if not agents or not value:
                continue  # a rule outside any group, or an empty rule (which allows everything)
            pattern, anchored = _normalise_pattern(value)
            rule = Rule(key in _ALLOW_KEYS, pattern, anchored)
            if token in agents:
                mine.append(rule)
            if "*" in agents:
                star.append(rule)
        elif key == "crawl-delay":
            in_rules = True
            try:
                delay = float(value)
            except ValueError:
                continue
            if delay >= 0 and delay == delay and delay != float("inf"):
                if token in agents:
                    delays["mine"].append(delay)
                if "*" in agents:
                    delays["star"].append(delay)
        elif key in ("sitemap", "site-map") and value:
            sitemaps.append(value)
        # Unknown keys (and Sitemap) neither end a group nor start one (RFC 9309 §2.2.4).
    if named_me:
        rules, delay_values = mine, delays["mine"]
    elif named_star:
        rules, delay_values = star, delays["star"]
    else:
        rules, delay_values = [], []
    return RobotsPolicy(tuple(rules), max(delay_values) if delay_values else None, tuple(sitemaps))


def decode_robots(body: bytes) -> str:
    """robots.txt is UTF-8 (RFC 9309); a BOM is dropped, invalid bytes cannot match anything real."""
    return body.decode("utf-8-sig", errors="replace")


class RobotsState(StrEnum):
    """What robots.txt said for a host this run (stored as its value in ``crawl_run_robots``)."""

    RULES = "rules"  # parsed: obey them
    NONE = "none"  # a 4xx answer: no rules, everything allowed
    UNKNOWN = "unknown"  # 5xx, network error, oversized, …: fetch nothing on that host this run


@dataclass(slots=True)
class RobotsRules:
    """The robots decision for one host, with the rules when there are some."""

    state: RobotsState
    reason: str = ""
    sitemaps: tuple[str, ...] = ()
    crawl_delay: float | None = None
    policy: RobotsPolicy = field(default_factory=RobotsPolicy, repr=False)
    # The run's budget ran out before robots.txt could be read: not the site's answer, never cached.
    exhausted: bool = False
    # The bytes the rules were parsed from, so another process of the run can rebuild the same rules.
    body: bytes | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, body: bytes, token: str = ROBOTS_TOKEN) -> RobotsRules:
        policy = parse_robots(decode_robots(body), token)
        return cls(state=RobotsState.RULES, sitemaps=policy.sitemaps, crawl_delay=policy.crawl_delay, policy=policy,
                   body=body)

    @classmethod
    def allow_all(cls, reason: str = "") -> RobotsRules:
        return cls(state=RobotsState.NONE, reason=reason)

    @classmethod
    def unknown(cls, reason: str) -> RobotsRules:
        return cls(state=RobotsState.UNKNOWN, reason=reason)

    def allows(self, url: str) -> bool:
        """May ``url`` (on this host) be fetched? Never while the rules are unknown."""
        if self.state is RobotsState.UNKNOWN:
            return False
        parts = urlsplit(url)
        if parts.path == "/robots.txt":
            return True
        return self.policy.allows((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
