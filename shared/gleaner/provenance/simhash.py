"""64-bit SimHash over word shingles: near-duplicate texts have fingerprints a few bits apart (seed 002).

The text is NFKC-folded and lower-cased, split into runs of word characters (so
case, punctuation, spacing and markup change nothing), and every three
consecutive words (a shingle) vote on each of the 64 bits with their hash. Two
texts within Hamming distance 3 are near-duplicates.

Lookups need no scan: a 64-bit fingerprint is cut into four 16-bit bands, and
two fingerprints within distance 3 agree on at least one whole band (pigeonhole:
three differing bits touch at most three bands), so an index per band finds
every candidate.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata

SHINGLE_WORDS = 3
NEAR_DISTANCE = 3
BANDS = 4
_WORD = re.compile(r"\w+")
_MASK = (1 << 64) - 1


def words_of(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower())


def simhash(text: str) -> int:
    """The unsigned 64-bit SimHash of the text's word 3-shingles (0 for a text with no words)."""
    words = words_of(text)
    if not words:
        return 0
    if len(words) < SHINGLE_WORDS:
        shingles = [" ".join(words)]
    else:
        shingles = [" ".join(words[i:i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)]
    # Bit votes are counted in 64 lanes of one big integer: one C-level addition per byte of each
    # shingle's hash instead of a Python loop over its 64 bits.
    table = _lanes()
    total = 0
    for shingle in shingles:
        digest = hashlib.blake2b(shingle.encode("utf-8"), digest_size=8).digest()
        for position, byte in enumerate(digest):
            total += table[position][byte]
    lane = (1 << _LANE_BITS) - 1
    half = len(shingles)
    return sum(1 << bit for bit in range(64) if 2 * (total >> bit * _LANE_BITS & lane) > half)


_LANE_BITS = 32  # a lane counts up to 2**32 shingles


@functools.cache
def _lanes() -> tuple[tuple[int, ...], ...]:
    """For each byte position of a hash and each byte value: the value's bits spread one to a lane."""
    return tuple(
        tuple(sum(1 << (position * 8 + bit) * _LANE_BITS for bit in range(8) if value >> bit & 1)
              for value in range(256))
        for position in range(8)
    )


def hamming(a: int, b: int) -> int:
    return ((a ^ b) & _MASK).bit_count()


def bands(fingerprint: int) -> tuple[int, int, int, int]:
    """The four 16-bit bands of a fingerprint, low to high."""
    return (fingerprint & 0xFFFF, fingerprint >> 16 & 0xFFFF, fingerprint >> 32 & 0xFFFF, fingerprint >> 48 & 0xFFFF)


def to_signed(fingerprint: int) -> int:
    """The fingerprint as PostgreSQL's signed bigint holds it."""
    return fingerprint - (1 << 64) if fingerprint >= 1 << 63 else fingerprint


def from_signed(value: int) -> int:
    return value & _MASK
