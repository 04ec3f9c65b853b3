"""Volatile text left out of change detection: the pure part of ``rules add SITE GLOB --ignore-text REGEX``.

A page's markdown is compared line by line with the lines that match any of its ignore patterns
removed (``re.search``: a pattern matches anywhere in a line; anchor it with ``^``/``$`` to be strict).
Two versions whose masked texts are equal are the same page: the snapshot stage writes no version and
raises no event. Each new version records the rules it was compared under (``extraction_metadata``
``"ignored"``: rule ids, patterns and the masked hash), so the decision can be audited.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gleaner.errors import InvalidInput

MAX_PATTERN = 500  # an operator's pattern for a line, not a program


@dataclass(frozen=True, slots=True)
class IgnorePattern:
    rule_id: str
    pattern: str


def validate_pattern(pattern: str) -> str:
    """The pattern if it compiles and is sane; InvalidInput saying why otherwise."""
    if not pattern or len(pattern) > MAX_PATTERN:
        raise InvalidInput(f"an ignore pattern is 1 to {MAX_PATTERN} characters")
    if "\x00" in pattern or any(0xD800 <= ord(c) <= 0xDFFF for c in pattern):
        raise InvalidInput("an ignore pattern may not contain NUL or lone surrogates")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise InvalidInput(f"{pattern!r} is not a regular expression: {exc}") from exc
    if compiled.search(""):
        raise InvalidInput(f"{pattern!r} matches an empty line, so it would ignore every line")
    return pattern


def masked(text: str, patterns: Sequence[IgnorePattern]) -> str:
    """``text`` without the lines any pattern matches (line ends kept on the lines that stay)."""
    compiled = [re.compile(p.pattern) for p in patterns]
    return "".join(line for line in text.splitlines(keepends=True)
                   if not any(c.search(line) for c in compiled))


def masked_hash(body: bytes, patterns: Sequence[IgnorePattern]) -> str:
    """SHA1 of the masked text: what two versions are compared by under these patterns."""
    text = masked(body.decode("utf-8", errors="replace"), patterns)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def fingerprint(patterns: Sequence[IgnorePattern]) -> str:
    """Names a set of patterns, so a stored masked hash is reused only under the same patterns."""
    joined = "\x00".join(sorted(p.pattern for p in patterns))
    return hashlib.sha1(joined.encode("utf-8")).hexdigest()
