"""What changed between two versions of a page: a unified diff of their content.md (difflib)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TextDiff:
    from_version: int | None
    to_version: int
    added: int
    removed: int
    diff: str

    def to_dict(self) -> dict[str, object]:
        """DESIGN.md's ``diff --json`` shape."""
        return {"from": self.from_version, "to": self.to_version, "added": self.added, "removed": self.removed,
                "diff": self.diff}


def diff_versions(url: str, old: str, new: str, from_version: int | None, to_version: int) -> TextDiff:
    """Unified diff of two bodies; ``from_version`` None compares with nothing (a page's first version)."""
    before = old.splitlines(keepends=True)
    after = new.splitlines(keepends=True)
    lines = list(difflib.unified_diff(before, after, fromfile=f"{url} v{from_version}" if from_version else "/dev/null",
                                      tofile=f"{url} v{to_version}"))
    # A last line without a newline would run into the next header line.
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return TextDiff(from_version, to_version, added, removed, text)


def previous_version(versions: list[dict[str, object]], current_id: str | None) -> int | None:
    """The version the current one replaced: the most recently created other version (after a revert
    v1 -> v2 -> v1 that is v2, not a lower number)."""
    others = [v for v in versions if v["id"] != current_id]
    if not others:
        return None
    latest = max(others, key=lambda v: (str(v["created_at"]), int(str(v["version"]))))
    return int(str(latest["version"]))
