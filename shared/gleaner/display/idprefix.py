"""Ids as people type them: the 8 characters the back office and the CLI show stand for the whole id.

One resolver for every command and page that takes an id (runs, subscriptions, deliveries, documents,
composites, tokens, conflicts, citations, references, rules): a full id is taken as it is, a unique
prefix of at least :data:`MIN_PREFIX` hex digits is expanded, and anything else is a clear error that
names the matches when there are several. Which ids exist is the store's (``store/idprefix.py``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gleaner.errors import InvalidInput

MIN_PREFIX = 4
# Matches listed in an ambiguity error; one more is asked for, to say "and more".
SHOWN_MATCHES = 10

_HEX_PREFIX = re.compile(rf"[0-9a-f]{{{MIN_PREFIX},32}}")


@dataclass(frozen=True, slots=True)
class IdKind:
    """A kind of id: what it is called in messages, and the command that lists them."""

    noun: str
    listing: str


KINDS: dict[str, IdKind] = {
    "run": IdKind("run", "gleaner runs"),
    "subscription": IdKind("subscription", "gleaner notify list"),
    "delivery": IdKind("delivery", "gleaner notify deliveries"),
    "document": IdKind("document", "gleaner docs SITE"),
    "composite": IdKind("composite", "gleaner composite list SITE"),
    "token": IdKind("token", "gleaner tokens list"),
    "conflict": IdKind("conflict", "gleaner conflicts list"),
    "citation": IdKind("citation", "gleaner cite URL QUOTE"),
    "reference": IdKind("reference", "gleaner refs search QUERY"),
    "rule": IdKind("rule", "gleaner rules list SITE"),
}


class UnknownId(InvalidInput):
    """No id of that kind is (or starts with) what was given."""


class AmbiguousId(InvalidInput):
    """Several ids of that kind start with what was given."""

    def __init__(self, message: str, matches: Sequence[str]) -> None:
        super().__init__(message)
        self.matches = tuple(matches)


def full_id(value: str) -> str | None:
    """The canonical form of a complete id, or None when ``value`` is not one."""
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        return None


def hex_prefix(value: str) -> str | None:
    """The hex digits of an id's beginning as typed (dashes ignored, any case), or None if it cannot be one."""
    digits = value.strip().lower().replace("-", "")
    return digits if _HEX_PREFIX.fullmatch(digits) else None


def bounds(prefix: str) -> tuple[str, str]:
    """The smallest and largest ids starting with ``prefix`` (hex digits): an index range, not a text scan."""
    low, high = prefix.ljust(32, "0"), prefix.ljust(32, "f")
    return str(uuid.UUID(low)), str(uuid.UUID(high))


# The store's answer: up to ``limit`` ids of a kind between two bounds, in order.
Lookup = Callable[[str, str, str, int], Sequence[str]]


def resolve(kind: str, value: str, lookup: Lookup) -> str:
    """The one id of ``kind`` that ``value`` is or starts with; UnknownId or AmbiguousId otherwise."""
    what = KINDS[kind]
    given = value.strip()
    whole = full_id(given)
    prefix = whole.replace("-", "") if whole else hex_prefix(given)
    if prefix is None:
        raise UnknownId(f"no {what.noun} {given!r}: give its id or the first {MIN_PREFIX}+ characters of it"
                        f" (see `{what.listing}`)")
    low, high = bounds(prefix)
    matches = list(lookup(kind, low, high, SHOWN_MATCHES + 1))
    if not matches:
        raise UnknownId(f"no {what.noun} {given} (see `{what.listing}`)")
    if len(matches) > 1:
        shown = ", ".join(matches[:SHOWN_MATCHES]) + (" and more" if len(matches) > SHOWN_MATCHES else "")
        raise AmbiguousId(f"{len(matches) if len(matches) <= SHOWN_MATCHES else 'several'} {what.noun}s start"
                          f" with {given}: {shown}; give more characters", matches[:SHOWN_MATCHES])
    return str(matches[0])
