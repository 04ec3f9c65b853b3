"""Values in a reader's words: ``-`` not ``None``, ``no`` not ``False``, "3 min ago" not an ISO timestamp.

Shared by the command line and the back office, so neither ever shows a Python repr.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def plain(value: Any) -> str:
    """A value as a reader wants it, never a Python repr (None, True, {'new': 0})."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(plain(v) for v in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k} {plain(v)}" for k, v in value.items()) or "-"
    return str(value)


def plural(count: int, noun: str, many: str | None = None) -> str:
    """"1 document", "3 documents", "0 documents": a count with its noun agreeing."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"


def day(value: str | datetime | None) -> str:
    """The date of a time as people write it: "5 Dec 2026" ("-" for none)."""
    moment = parse_time(value)
    return f"{moment.day} {moment:%b %Y}" if moment else "-"


def parse_time(value: str | datetime | None) -> datetime | None:
    """An ISO 8601 time (as the API gives them) as an aware datetime; None for None or nonsense."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def ago(value: str | datetime | None, now: datetime | None = None) -> str:
    """"just now", "3 min ago", "in 2 h", "5 days ago"; past a month, the date."""
    when = parse_time(value)
    if when is None:
        return "-"
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    future, seconds = seconds < 0, abs(seconds)
    if seconds < 45:
        return "just now" if not future else "in a moment"
    for limit, unit, size in ((3600, "min", 60), (86400, "h", 3600), (30 * 86400, "days", 86400)):
        if seconds < limit:
            n = max(1, round(seconds / size))
            label = "day" if unit == "days" and n == 1 else unit
            return f"in {n} {label}" if future else f"{n} {label} ago"
    return when.strftime("%Y-%m-%d")


def full_time(value: str | datetime | None) -> str:
    """The whole time to the second, in UTC (what a hover shows)."""
    when = parse_time(value)
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if when else "-"
