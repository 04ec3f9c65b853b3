from gleaner.provenance.canonical import canonical_text, slice_text, spans_of
from gleaner.provenance.citations import locate, locate_in_versions

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


def test_a_quote_is_looked_for_in_the_current_version_first_even_after_a_revert():
    old, new = canonical_text("The plan costs 20 euros.\n"), canonical_text("The plan costs 30 euros.\n")
    texts = {"h1": (old, [(0, len(old.encode()), "paragraph")]), "h2": (new, []), "h3": (old, [])}
    # v3 reverted to v1's text and is current; v2 is the highest non-current version
    versions = [(1, "s1", "h1", False), (2, "s2", "h2", False), (3, "s3", "h3", True)]
    found = locate_in_versions(versions, "costs 20 euros", texts.get)
    assert found is not None and (found.version, found.current, found.span_kind) == (3, True, None)
    drifted = locate_in_versions([(1, "s1", "h1", False), (2, "s2", "h2", True)], "costs 20 euros", texts.get)
    assert drifted is not None and (drifted.version, drifted.current, drifted.span_kind) == (1, False, "paragraph")
    assert locate_in_versions(versions, "costs 40 euros", texts.get) is None
    assert locate_in_versions([(9, "s9", "gone", True)], "costs 20 euros", texts.get) is None
