"""Two versions' lines aligned for a side-by-side view: which lines were kept, changed, removed or added."""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass
from enum import StrEnum


class LineChange(StrEnum):
    SAME = "same"
    CHANGED = "changed"
    REMOVED = "removed"
    ADDED = "added"


@dataclass(frozen=True, slots=True)
class Row:
    kind: LineChange
    old_no: int | None
    old: str | None
    new_no: int | None
    new: str | None

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "kind": self.kind.value}


def side_by_side(old: str, new: str, context: int | None = 3) -> list[Row]:
    """Aligned rows; unchanged runs longer than ``2 * context`` lines are cut to their edges
    (``context=None`` keeps every line). A cut is one row of kind SAME with no text on either side."""
    before, after = old.splitlines(), new.splitlines()
    rows: list[Row] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            span = list(range(i2 - i1))
            if context is not None and len(span) > 2 * context:
                head = span[:context] if i1 > 0 else []
                tail = span[-context:] if i2 < len(before) else []
                keep = [*head, -1, *tail]
            else:
                keep = span
            for k in keep:
                if k < 0:
                    rows.append(Row(LineChange.SAME, None, None, None, None))
                else:
                    rows.append(Row(LineChange.SAME, i1 + k + 1, before[i1 + k], j1 + k + 1, after[j1 + k]))
        elif tag == "replace":
            for k in range(max(i2 - i1, j2 - j1)):
                o = i1 + k if i1 + k < i2 else None
                n = j1 + k if j1 + k < j2 else None
                kind = LineChange.CHANGED if o is not None and n is not None else (
                    LineChange.REMOVED if o is not None else LineChange.ADDED)
                rows.append(Row(kind, o + 1 if o is not None else None, before[o] if o is not None else None,
                                n + 1 if n is not None else None, after[n] if n is not None else None))
        elif tag == "delete":
            rows.extend(Row(LineChange.REMOVED, i + 1, before[i], None, None) for i in range(i1, i2))
        else:
            rows.extend(Row(LineChange.ADDED, None, None, j + 1, after[j]) for j in range(j1, j2))
    return rows
