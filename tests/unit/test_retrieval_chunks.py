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
