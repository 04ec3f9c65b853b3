"""Retrieval chunks cut along a canonical text's span ledger: pure functions of bytes and spans.

A chunk is a byte range ``[start, end)`` of the canonical text's UTF-8 bytes, so every search hit
is a verbatim slice (``gleaner slice TEXT_HASH START END``). Chunks follow the ledger's blocks:

- a heading starts a new chunk and stays with the blocks under it (it is the section's name);
- following blocks join the chunk while it stays within :data:`MAX_TOKENS`;
- a block larger than the bound alone is cut between words into pieces within the bound.

Tokens are counted as words and punctuation marks (:func:`count_tokens`), a cheap stand-in for the
model's word pieces: English text runs at about 1.2 word pieces a word, so the bound keeps a chunk
under the embedder's 256-piece window, which truncates anything longer. Each chunk carries the
nearest heading above it (``heading``) so a paragraph deep in a section is embedded with the
section's name; that heading is context, not part of the chunk's bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAX_TOKENS = 200  # words and marks: under the model's 256 word pieces for English prose
MAX_HEADING_CHARS = 200

# UTF-8 lead and continuation bytes count as word characters, so a word with accents is one token
# and a cut between tokens always falls on ASCII whitespace (never inside a character).
_TOKEN = re.compile(rb"[A-Za-z0-9_\x80-\xff]+|[^\sA-Za-z0-9_\x80-\xff]")
_HEADING_MARK = re.compile(rb"^#{1,6}\s+")
# count_tokens counts what _TOKEN matches without a match object per token (ingest's largest Python cost
# of a page): the runs of word bytes once punctuation is blanked, plus one per punctuation byte.
_SPACE = b" \t\n\r\x0b\x0c"  # what \s matches in a bytes pattern, and what bytes.split() splits on
_WORD = re.compile(rb"[A-Za-z0-9_\x80-\xff]")
_PUNCTUATION = bytes(c for c in range(256) if c not in _SPACE and not _WORD.fullmatch(bytes([c])))
_BLANK_PUNCTUATION = bytes.maketrans(_PUNCTUATION, b" " * len(_PUNCTUATION))


@dataclass(frozen=True, slots=True)
class Chunk:
    ordinal: int
    start: int
    end: int
    heading: str  # the nearest heading above the chunk (context for embedding and full text), or ""


def count_tokens(data: bytes) -> int:
    """How many tokens _TOKEN finds in data."""
    return len(data.translate(_BLANK_PUNCTUATION).split()) + len(data) - len(data.translate(None, _PUNCTUATION))


def _heading_text(block: bytes) -> str:
    line = block.split(b"\n", 1)[0]
    return _HEADING_MARK.sub(b"", line).decode("utf-8", "replace").strip()[:MAX_HEADING_CHARS]


def _split_block(text: bytes, start: int, end: int, bound: int) -> list[tuple[int, int]]:
    """[start, end) cut between tokens into pieces of at most ``bound`` tokens."""
    pieces: list[tuple[int, int]] = []
    piece_start = None
    last_end = start
    count = 0
    for match in _TOKEN.finditer(text, start, end):
        if piece_start is None:
            piece_start = match.start()
        if count == bound:
            pieces.append((piece_start, last_end))
            piece_start, count = match.start(), 0
        count += 1
        last_end = match.end()
    if piece_start is not None:
        pieces.append((piece_start, last_end))
    return pieces


def chunk_text(text: bytes, spans: Iterable[Sequence[object]], max_tokens: int = MAX_TOKENS) -> list[Chunk]:
    """The chunks of a canonical text; ``spans`` are its ledger entries ``(start, end, kind)`` in order."""
    chunks: list[Chunk] = []
    heading = ""  # the section the current chunk is in
    current: tuple[int, int, int, str] | None = None  # start, end, tokens, heading

    def close() -> None:
        nonlocal current
        if current is not None:
            chunks.append(Chunk(len(chunks), current[0], current[1], current[3]))
            current = None

    for span in spans:
        start, end, kind = int(span[0]), int(span[1]), str(span[2])  # type: ignore[call-overload]
        tokens = count_tokens(text[start:end])
        if tokens == 0:
            continue
        if kind == "heading":
            close()
            heading = _heading_text(text[start:end])
            current = (start, end, tokens, "")
            continue
        if current is not None and current[2] + tokens <= max_tokens:
            current = (current[0], end, current[2] + tokens, current[3])
            continue
        close()
        if tokens <= max_tokens:
            current = (start, end, tokens, heading)
            continue
        for piece_start, piece_end in _split_block(text, start, end, max_tokens):
            chunks.append(Chunk(len(chunks), piece_start, piece_end, heading))
    close()
    return chunks


def embedding_input(text: bytes, chunk: Chunk) -> str:
    """What the model reads for a chunk: its section heading, then its own text."""
    return model_reading(chunk.heading, text[chunk.start:chunk.end].decode("utf-8", "replace"))


def model_reading(heading: str, body: str) -> str:
    """A chunk as a model reads it, from its heading and its own text (see embedding_input)."""
    return f"{heading}\n{body}" if heading else body
