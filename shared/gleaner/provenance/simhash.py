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
import sys
import unicodedata
from array import array

SHINGLE_WORDS = 3
NEAR_DISTANCE = 3
BANDS = 4
_WORD = re.compile(r"\w+")
_MASK = (1 << 64) - 1
# Per byte: an ASCII word character (\w on ASCII) lower-cased, anything else a space.
_ASCII_WORDS = bytes((b | 0x20 if chr(b).isalpha() else b) if b < 128 and (chr(b).isalnum() or b == 0x5F) else 0x20
                     for b in range(256))


def words_of(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower())


def simhash(text: str) -> int:
    """The unsigned 64-bit SimHash of the text's word 3-shingles (0 for a text with no words)."""
    packed = _word_hashes(text)
    if not packed:
        return 0
    if len(packed) < SHINGLE_WORDS:
        packed.extend([0] * (SHINGLE_WORDS - len(packed)))  # a missing word hashes to 0
    # Shingle i's hash is word i's hash XOR word i+1's and word i+2's, each byte-substituted by its
    # position's table (so order matters), computed for all shingles at once on big integers.
    if sys.byteorder != "little":
        packed.byteswap()
    raw = packed.tobytes()
    n = len(packed) - SHINGLE_WORDS + 1
    first = int.from_bytes(raw[:8 * n], "little")
    second = int.from_bytes(raw[8:8 * (n + 1)].translate(_POSITION[0]), "little")
    third = int.from_bytes(raw[16:8 * (n + 2)].translate(_POSITION[1]), "little")
    return _majority(first ^ second ^ third, n)


def _word_hashes(text: str) -> array[int]:
    """The 64-bit hash of each word in order: BLAKE2b of its UTF-8.

    A text whose words are all ASCII is split without the regex: NFKC leaves ASCII alone and ``\\w``
    on ASCII is [A-Za-z0-9_], so one byte translation (lower-casing letters, blanking the rest, and
    every byte of a UTF-8 sequence) and a split find the same words, already encoded. That holds for
    an ASCII text (a generated page) and for one whose other characters all separate words (most real
    pages: a dash, curly quotes, a pilcrow, a copyright sign), where it is several times faster than
    the regex. Each distinct word is hashed once per process: a site's pages share most of their
    words, and a dictionary lookup is a fraction of a BLAKE2b call.
    """
    if text.isascii():
        words = text.encode("ascii").translate(_ASCII_WORDS).split()
    elif all(map(_separates, set(_NON_ASCII.findall(text)))):
        words = text.encode("utf-8").translate(_ASCII_WORDS).split()
    else:
        words = [w.encode("utf-8") for w in words_of(text)]
    known = _KNOWN_WORDS
    if len(known) > _KNOWN_WORDS_LIMIT:
        known.clear()  # a bounded memory, not an LRU: refilled from the next pages' words
    hashes: dict[bytes, int] = {}
    for word in set(words):
        value = known.get(word)
        if value is None:
            value = known[word] = int.from_bytes(hashlib.blake2b(word, digest_size=8).digest(), "little")
        hashes[word] = value
    return array("Q", map(hashes.__getitem__, words))


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


@functools.lru_cache(maxsize=4096)
def _separates(char: str) -> bool:
    """Whether a non-ASCII character is, for words_of, a separator whatever surrounds it: no word character
    itself or once NFKC-folded (as the ligature fi and the trade mark sign are), and no mark (which NFKC
    may compose with its neighbour)."""
    return (not _WORD.match(char) and not unicodedata.category(char).startswith("M")
            and not _WORD.search(unicodedata.normalize("NFKC", char)))


# Word -> its hash, shared by every text this process fingerprints (see _word_hashes).
_KNOWN_WORDS: dict[bytes, int] = {}
_KNOWN_WORDS_LIMIT = 50_000


def _majority(shingles: int, n: int) -> int:
    """Bit k is set where more than half of the n 64-bit words of ``shingles`` have bit k set.

    Counted a column at a time on big integers (their arithmetic runs in C): bit k of every word is
    moved to the low bit of a byte lane, then the words are summed lane-wise by folding the integer's
    upper half onto its lower half until one word is left, widening the lanes before a count could
    overflow one. That is a few passes over the words per column instead of one per bit.
    """
    low_bits = int.from_bytes(b"\x01" * (8 * n), "little")
    fingerprint = 0
    for k in range(8):  # byte lane j of column k counts bit 8j + k
        fingerprint |= _fold(shingles >> k & low_bits, n, 8, 1, list(range(k, 64, 8)), n)
    return fingerprint


def _fold(lanes: int, words: int, width: int, peak: int, bits: list[int], n: int) -> int:
    """Sum ``words`` 64-bit words of ``width``-bit lanes (each at most ``peak``) lane-wise, then vote:
    the fingerprint bits (``bits`` names the one each lane of a word counts) that more than half of the
    n shingles have set."""
    while words > 1:
        if 2 * peak >= 1 << width:  # one more fold could overflow a lane: split into even and odd, twice as wide
            mask = int.from_bytes(((1 << width) - 1).to_bytes(width // 4, "little") * (32 // width * words), "little")
            return (_fold(lanes & mask, words, 2 * width, peak, bits[0::2], n)
                    | _fold(lanes >> width & mask, words, 2 * width, peak, bits[1::2], n))
        half = words // 2
        lanes = (lanes & ((1 << 64 * half) - 1)) + (lanes >> 64 * half)
        words -= half
        peak *= 2
    lane = (1 << width) - 1
    return sum(1 << bit for i, bit in enumerate(bits) if 2 * (lanes >> i * width & lane) > n)


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
