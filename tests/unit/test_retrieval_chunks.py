"""Retrieval chunks are byte ranges along the span ledger: headings lead, blocks stay whole where they fit."""

from __future__ import annotations

from gleaner.provenance.canonical import canonicalise
from gleaner.retrieval.chunks import chunk_text, count_tokens, embedding_input


def _chunks(markdown: str, bound: int = 200):
    text = canonicalise(markdown.encode())
    return text.text, chunk_text(text.text, [(s.start, s.end, s.kind) for s in text.spans()], bound)


def test_a_heading_starts_a_chunk_that_keeps_the_paragraphs_under_it():
    body, chunks = _chunks("# Tea\n\nGreen tea is steamed.\n\nBlack tea is oxidised.\n\n"
                           "## Coffee\n\nBeans are roasted.\n")
    assert [body[c.start:c.end].decode() for c in chunks] == [
        "# Tea\n\nGreen tea is steamed.\n\nBlack tea is oxidised.", "## Coffee\n\nBeans are roasted."]


def test_blocks_past_the_bound_start_a_new_chunk_that_remembers_its_section():
    body, chunks = _chunks("# Tea\n\n" + "\n\n".join(f"Paragraph {i} about leaves and water." for i in range(6)), 20)
    assert len(chunks) > 2
    assert all(count_tokens(body[c.start:c.end]) <= 20 for c in chunks)
    assert chunks[1].heading == "Tea"
    assert embedding_input(body, chunks[1]).startswith("Tea\n")


def test_a_block_larger_than_the_bound_is_cut_between_words_into_verbatim_slices():
    words = " ".join(f"wörd{i}" for i in range(50))
    body, chunks = _chunks(words + "\n", 12)
    assert len(chunks) == 5
    for c in chunks:
        piece = body[c.start:c.end].decode()  # never cut inside a character
        assert piece == piece.strip() and count_tokens(piece.encode()) <= 12
    assert b" ".join(body[c.start:c.end] for c in chunks) == body.strip()


def test_an_empty_text_has_no_chunks():
    assert _chunks("")[1] == []


def test_token_counts_match_the_token_pattern_on_any_bytes():
    """count_tokens counts without matching each token; it must agree with the pattern chunks are cut by."""
    import random

    from gleaner.retrieval.chunks import _TOKEN

    rng = random.Random(27)
    pieces = [b"a", b"Z9_", b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b".", b"-", b"\x1c", b"\x00", b"\xc3\xa9",
              b"\x7f", b"#"]
    samples = [b"", b"   ", "Caf\u00e9, na\u00efve: \u201cquoted\u201d \u2014 ok!".encode(), bytes(range(256))]
    samples += [b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 80))) for _ in range(3000)]
    for data in samples:
        assert count_tokens(data) == len(_TOKEN.findall(data)), data
