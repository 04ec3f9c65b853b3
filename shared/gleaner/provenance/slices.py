"""Slices of stored canonical text: bytes [start, end) of the text a BLAKE3 hash names (seed 004).

A third party who holds the text can check a slice without Gleaner: the BLAKE3 of
the whole text is the hash, and the slice is those bytes. The HTTP answer gives
the text of the slice as a string, so a range that cuts a UTF-8 character is
refused rather than mangled; the command line prints the bytes as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gleaner.errors import InvalidInput

# An HTTP slice is a quote's context, not a bulk export: bounded like any answer.
MAX_SLICE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class TextSlice:
    text_hash: str
    start: int
    end: int
    data: bytes

    def to_dict(self) -> dict[str, object]:
        return {"text_hash": self.text_hash, "start": self.start, "end": self.end,
                "text": self.data.decode("utf-8")}


def parse_range(query: Mapping[str, str], length: int) -> tuple[int, int]:
    """start and end from a query (defaults: the whole text); InvalidInput says what is wrong."""
    bounds = []
    for name, default in (("start", 0), ("end", length)):
        raw = query.get(name)
        if raw is None or raw == "":
            bounds.append(default)
        elif raw.isascii() and raw.isdigit():
            bounds.append(int(raw))
        else:
            raise InvalidInput(f"{name!r} must be a non-negative integer, got {raw[:40]!r}")
    return bounds[0], bounds[1]


def slice_text_bytes(text_hash: str, body: bytes, start: int, end: int, *, whole_characters: bool) -> TextSlice:
    if start > end:
        raise InvalidInput(f"range [{start}, {end}) is reversed: the start must not be after the end")
    if not 0 <= start <= end <= len(body):
        raise InvalidInput(f"range [{start}, {end}) is outside the text's {len(body)} bytes")
    data = body[start:end]
    if whole_characters:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"range [{start}, {end}) cuts a UTF-8 character") from exc
    return TextSlice(text_hash, start, end, data)
