from gleaner.provenance.canonical import canonical_text, slice_text, spans_of
from gleaner.provenance.citations import locate

TEXT = canonical_text("# Prices\n\nThe “Pro” plan costs 20 €\n per month — billed yearly.\n\n- Free tier: 3 sites\n")


def test_a_quote_verifies_to_the_exact_bytes_and_its_block():
    spans = [(s.start, s.end, s.kind) for s in spans_of(TEXT)]
    cite = locate(TEXT, 'The "Pro" plan costs 20 € per month - billed', spans)
    assert cite is not None
    assert slice_text(TEXT, cite.start, cite.end) == cite.text == "The “Pro” plan costs 20 €\n per month — billed"
    assert spans[cite.span_ordinal][2] == "paragraph"


def test_a_quote_that_is_not_in_the_text_does_not_verify():
    assert locate(TEXT, "costs 30 € per month") is None
    assert locate(TEXT, "   ") is None
