"""The rules a quote must meet before it can be cited (seed 002): pure functions of strings.

A quote is at most 15 words and 1,024 characters, holds no personal data, and
(checked against the text, in citations.py) begins and ends on word boundaries.

Words are counted strictly: the larger of the whitespace-separated parts and the
runs of word characters, where only an apostrophe inside a word joins it
("sync/export" is two words, "don't" one), and each character of a script
written without spaces (Han, kana, Thai, Lao, Khmer, Myanmar) is a word.

Personal data: an e-mail address or a handle (an ``@`` before a word character,
combining marks allowed between) and a phone number (nine or more digits of any
script, with only spaces and ``+-.()/`` between them). The quote is screened
after invisible characters are removed, so none can hide an address.
"""

from __future__ import annotations

import re
import unicodedata
from enum import StrEnum

from gleaner.provenance.canonical import remove_invisible

MAX_WORDS = 15
MAX_CHARS = 1024

_APOSTROPHES = frozenset("'\u2019")
_HANDLE = re.compile(r"@[\u0300-\u036f\u1ab0-\u1aff\u20d0-\u20ff\ufe20-\ufe2f]*\w")
_PHONE = re.compile(r"\d(?:[\s+\-.()/]*\d){8,}")
_SPACES = re.compile(r"\s+")
_UNSPACED = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)


class QuoteRefusal(StrEnum):
    """Why a quote cannot be cited; the CLI prints the reason."""

    EMPTY = "empty"
    TOO_MANY_WORDS = "too-many-words"
    TOO_LONG = "too-long"
    PERSONAL_DATA = "personal-data"
    NOT_ON_WORD_BOUNDARIES = "not-on-word-boundaries"
    NOT_IN_TEXT = "not-in-text"

    def explain(self) -> str:
        return {
            QuoteRefusal.EMPTY: "the quote is empty",
            QuoteRefusal.TOO_MANY_WORDS: f"the quote is longer than {MAX_WORDS} words",
            QuoteRefusal.TOO_LONG: f"the quote is longer than {MAX_CHARS} characters",
            QuoteRefusal.PERSONAL_DATA: "the quote holds personal data (an e-mail address, phone number or handle)",
            QuoteRefusal.NOT_ON_WORD_BOUNDARIES: "the quote does not begin and end on word boundaries in the text",
            QuoteRefusal.NOT_IN_TEXT: "the quote is not in the current text",
        }[self]


def normalise_quote(quote: str) -> str:
    """Invisible characters removed, NFC, whitespace runs as one space, trimmed."""
    return _SPACES.sub(" ", unicodedata.normalize("NFC", remove_invisible(quote))).strip()


def is_unspaced(char: str) -> bool:
    """A character of a script written without spaces: each one is a word."""
    code = ord(char)
    return any(low <= code <= high for low, high in _UNSPACED)


def is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_" or unicodedata.category(char).startswith("M")


def quote_words(quote: str) -> int:
    """How many words the quote is, counted strictly (module docstring)."""
    text = normalise_quote(quote)
    runs = 0
    in_run = False
    for i, char in enumerate(text):
        if is_unspaced(char):
            runs += 1
            in_run = False
        elif is_word_char(char):
            if not in_run:
                runs += 1
            in_run = True
        elif char in _APOSTROPHES and in_run and i + 1 < len(text) and is_word_char(text[i + 1]) \
                and not is_unspaced(text[i + 1]):
            continue  # an apostrophe inside a word joins it
        else:
            in_run = False
    return max(runs, len(text.split()))


def personal_data_in(quote: str) -> bool:
    text = normalise_quote(quote)
    return bool(_HANDLE.search(text) or _PHONE.search(text))


def quote_refusal(quote: str) -> QuoteRefusal | None:
    """What is wrong with the quote on its own (before it is looked for in a text), or None."""
    text = normalise_quote(quote)
    if not text:
        return QuoteRefusal.EMPTY
    if len(text) > MAX_CHARS:
        return QuoteRefusal.TOO_LONG
    if quote_words(text) > MAX_WORDS:
        return QuoteRefusal.TOO_MANY_WORDS
    if personal_data_in(text):
        return QuoteRefusal.PERSONAL_DATA
    return None


def is_boundary(text: str, index: int) -> bool:
    """Whether a word boundary falls between text[index - 1] and text[index]."""
    if index <= 0 or index >= len(text):
        return True
    before, after = text[index - 1], text[index]
    joined = _joins(before) and _joins(after)
    if not joined and after in _APOSTROPHES and _joins(before):
        joined = index + 1 < len(text) and _joins(text[index + 1])
    if not joined and before in _APOSTROPHES and _joins(after):
        joined = index >= 2 and _joins(text[index - 2])
    return not joined


def _joins(char: str) -> bool:
    return is_word_char(char) and not is_unspaced(char)
