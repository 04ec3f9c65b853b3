"""The document tree, derived from ``path`` alone (seed 003): no stored parents, no folder rows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any


def render_tree(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """Rows sorted by path -> indented lines; intermediate folders are synthesised from segments."""
    printed: set[tuple[str, ...]] = set()
    for row in sorted(rows, key=lambda r: r["path"]):
        segments = tuple(s for s in row["path"].split("/") if s)
        for depth in range(len(segments) - 1):
            folder = segments[: depth + 1]
            if folder not in printed:
                printed.add(folder)
                yield "  " * depth + folder[-1] + "/"
        printed.add(segments)
        label = segments[-1] if segments else "/"
        state = f"{row['status']}, {row['scrape_policy']}"
        if row.get("version"):
            state += f", v{row['version']}"
        if row.get("skip_reason"):
            state += f" ({row['skip_reason']})"
        yield "  " * max(len(segments) - 1, 0) + f"{label}  [{state}]"
