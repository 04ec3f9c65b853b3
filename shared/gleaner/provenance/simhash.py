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

import hashlib
import re
import sys
import unicodedata
from array import array

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
    # Each distinct word is hashed once.
    hashes = {w: int.from_bytes(hashlib.blake2b(w.encode("utf-8"), digest_size=8).digest(), "little")
              for w in set(words)}
    if len(words) < SHINGLE_WORDS:
        words = words + [""] * (SHINGLE_WORDS - len(words))
        hashes[""] = 0
    # Shingle i's hash is word i's hash XOR word i+1's and word i+2's, each byte-substituted by its
    # position's table (so order matters), computed for all shingles at once on big integers.
    packed = array("Q", [hashes[w] for w in words])
    if sys.byteorder != "little":
        packed.byteswap()
    raw = packed.tobytes()
    n = len(words) - SHINGLE_WORDS + 1
    first = int.from_bytes(raw[:8 * n], "little")
    second = int.from_bytes(raw[8:8 * (n + 1)].translate(_POSITION[0]), "little")
    third = int.from_bytes(raw[16:8 * (n + 2)].translate(_POSITION[1]), "little")
    shingles = first ^ second ^ third
    # Bit k of every shingle at once: mask the big integer with bit k of each 64-bit word and count
    # the ones (int.bit_count runs in C over machine words).
    every = int.from_bytes(b"\x01\x00\x00\x00\x00\x00\x00\x00" * n, "little")
    fingerprint = 0
    for bit in range(64):
        if 2 * (shingles >> bit & every).bit_count() > n:
            fingerprint |= 1 << bit
    return fingerprint


# Two fixed byte permutations (x -> m*x + c mod 256, m odd), one per shingle position after the first;
# written out, not drawn from a generator, so fingerprints stay comparable across Python versions.
_POSITION = tuple(bytes((m * x + c) & 0xFF for x in range(256)) for m, c in ((0x9D, 0x3B), (0x2F, 0xC5)))


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
