"""What the operator's values share: ``to_dict``, the plain shape the CLI's ``--json`` and the HTTP API print.

Enums become their strings, tuples lists, nested values their own ``to_dict``; a value that adds to or
reshapes that (a site's ``every``, a rule application's counts) says so in its own ``to_dict``.
"""

from __future__ import annotations

from dataclasses import fields
from enum import Enum
from typing import Any


def plain(value: Any) -> Any:
    if isinstance(value, Plain):
        return value.to_dict()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class Plain:
    """A base for frozen dataclasses: ``to_dict`` gives every field as a plain value, in field order."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        target: Any = self  # a dataclass: every subclass is one
        return {f.name: plain(getattr(self, f.name)) for f in fields(target)}
