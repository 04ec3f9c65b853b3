"""Word-level highlighting for a changed line of the side-by-side diff: the words that differ, marked.

The line pair comes from :mod:`gleaner.backoffice.sidebyside`; here the two lines are compared word by
word (whitespace kept), and what was removed is wrapped in ``<del>``, what was added in ``<ins>``. Every
piece of text is escaped before it is marked.
"""

from __future__ import annotations

import difflib
import re

from markupsafe import Markup, escape

_TOKENS = re.compile(r"\s+|[^\s]+")


def marked(old: str, new: str) -> tuple[Markup, Markup]:
    """``old`` and ``new`` as markup, their differing words in ``<del>`` and ``<ins>``."""
    a, b = _TOKENS.findall(old or ""), _TOKENS.findall(new or "")
    left: list[str] = []
    right: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        removed, added = escape("".join(a[i1:i2])), escape("".join(b[j1:j2]))
        if tag == "equal":
            left.append(removed)
            right.append(added)
            continue
        if removed:
            left.append(Markup("<del>{}</del>").format(removed))
        if added:
            right.append(Markup("<ins>{}</ins>").format(added))
    return Markup("").join(left), Markup("").join(right)
