"""robots.txt rules for one host (RFC 9309), on top of protego.

The decision per host is one of three: rules (parsed), no rules (4xx: allow
all), or unknown (5xx, network error, oversized: fetch nothing this run).
Paths are matched with percent-encoded unreserved characters decoded first, so
``/%61dmin`` cannot step around ``Disallow: /admin`` (FACTS.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from protego import Protego

from gleaner.config import ROBOTS_TOKEN

_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def normalise_path(path: str) -> str:
    def fix(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()

    return _PCT.sub(fix, path)


def _normalise_rules(text: str) -> str:
    """Apply the same percent normalisation to Allow/Disallow values."""
    out = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("allow", "disallow"):
            line = f"{key}:{normalise_path(value)}"
        out.append(line)
    return "\n".join(out)


@dataclass(slots=True)
class RobotsRules:
    """The robots decision for one host."""

    state: str  # "rules" | "none" | "unknown"
    reason: str = ""
    sitemaps: tuple[str, ...] = ()
    crawl_delay: float | None = None
    _parser: Protego | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, body: bytes) -> RobotsRules:
        text = body.decode("utf-8-sig", errors="replace")  # a BOM must not swallow the first group
        parser = Protego.parse(_normalise_rules(text))
        delay = parser.crawl_delay(ROBOTS_TOKEN)
        return cls(
            state="rules",
            sitemaps=tuple(parser.sitemaps),
            crawl_delay=float(delay) if delay is not None else None,
            _parser=parser,
        )

    @classmethod
    def allow_all(cls, reason: str = "") -> RobotsRules:
        return cls(state="none", reason=reason)

    @classmethod
    def unknown(cls, reason: str) -> RobotsRules:
        return cls(state="unknown", reason=reason)

    def allows(self, url: str) -> bool:
        if self.state == "unknown":
            return False
        parts = urlsplit(url)
        if parts.path == "/robots.txt":
            return True
        if self._parser is None:
            return True
        target = normalise_path(parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return bool(self._parser.can_fetch(target, ROBOTS_TOKEN))
