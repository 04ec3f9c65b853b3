"""Canonical text v2 and the quote rules: invisible characters, word boundaries, length, personal data."""

from __future__ import annotations

import pytest

from gleaner.provenance.canonical import CANONICALISER_VERSION, canonical_text, canonicalise
from gleaner.provenance.citations import Citation, check_slice, find, locate
from gleaner.provenance.quotes import MAX_CHARS, QuoteRefusal, quote_refusal, quote_words

PAGE = "# Pricing\n\nThe Pro plan costs 20 € per month, billed yearly.\n\nContact sales for more.\n"


def test_invisible_characters_are_removed_before_composition_and_the_form_is_idempotent():
    hidden = ("# Pri\u00adcing\ufeff\n\nThe Pro\u200b plan\u200d costs\u2060 20 €\u202e per\u2066 month,\u200e"
              " billed e\u0301\ufe0f yearly.\n")
    text = canonical_text(hidden)
    assert text == "# Pricing\n\nThe Pro plan costs 20 € per month, billed é yearly.\n"
    assert canonical_text(text) == text


def test_whitespace_runs_become_one_space_and_blank_lines_one_blank_line_but_indentation_stays():
    text = canonical_text("Para  one\u00a0 with\ttabs   \n\n\n\n- item\n    continued  line\n")
    assert text == "Para one with tabs\n\n- item\n    continued line\n"


def test_a_text_made_by_version_one_is_still_reproducible_with_version_one():
    body = "Zero\u200bwidth  stays in v1\r\n"
    assert canonical_text(body, version=1) == "Zero\u200bwidth  stays in v1\n"
    assert canonicalise(body.encode()).version == CANONICALISER_VERSION == 2


def test_a_quote_across_invisible_characters_is_found_and_cites_the_canonical_bytes():
    text = canonical_text("The Pro\u200b plan co\u00adsts 20 € per month.\n")
    found = find(text, "Pro plan costs 20 €")
    assert isinstance(found, Citation)
    assert text.encode()[found.start:found.end].decode() == found.text == "Pro plan costs 20 €"
    # The quote itself may carry them too: they are invisible to the matcher as to the reader.
    assert isinstance(find(text, "Pro\u200b plan\u2060 costs"), Citation)


def test_a_quote_inside_a_word_is_refused_while_the_whole_word_is_found():
    text = canonical_text(PAGE)
    assert find(text, "ost") is QuoteRefusal.NOT_ON_WORD_BOUNDARIES
    assert locate(text, "ost") is None
    assert isinstance(find(text, "costs"), Citation)
    assert find("I don't know.\n", "don") is QuoteRefusal.NOT_ON_WORD_BOUNDARIES
    assert isinstance(find("I don't know.\n", "don't know"), Citation)


def test_a_word_boundary_occurrence_is_found_after_one_inside_a_word():
    found = find("discount count\n", "count")
    assert isinstance(found, Citation) and found.start == 9


def test_a_quote_not_in_the_text_is_refused_as_such():
    assert find(canonical_text(PAGE), "costs 30 €") is QuoteRefusal.NOT_IN_TEXT


def test_quotes_of_more_than_fifteen_words_are_refused_counting_each_unspaced_character_as_a_word():
    fifteen = " ".join(f"w{i}" for i in range(15))
    assert quote_refusal(fifteen) is None
    assert quote_refusal(fifteen + " more") is QuoteRefusal.TOO_MANY_WORDS
    assert quote_words("sync/export") == 2
    assert quote_words("don't stop") == 2
    assert quote_words("我们的价格每个月二十欧元包括所有功能") == 18
    assert quote_refusal("我们的价格每个月二十欧元包括所有功能") is QuoteRefusal.TOO_MANY_WORDS
    assert quote_refusal("価格は月額です") is None  # seven words in seven characters


def test_a_quote_longer_than_1024_characters_is_refused_even_as_one_word():
    assert quote_refusal("a" * MAX_CHARS) is None
    assert quote_refusal("a" * (MAX_CHARS + 1)) is QuoteRefusal.TOO_LONG


@pytest.mark.parametrize("quote", [
    "write to bob@example.com today",
    "follow @gleaner for news",
    "call +33 6 12 34 56 78 now",
    "call 0612-345-678 now",
    "mail bob\u00ad@example.com",  # a soft hyphen cannot hide the address
    "phone ٠٦١٢٣٤٥٦٧٨",  # digits of any script
])
def test_quotes_holding_personal_data_are_refused(quote):
    assert quote_refusal(quote) is QuoteRefusal.PERSONAL_DATA


def test_dates_and_prices_are_not_personal_data():
    assert quote_refusal("from 2024 to 2026 it costs 20 €") is None


def test_a_citation_checks_against_stored_bytes_alone():
    body = canonicalise(PAGE.encode())
    found = find(body.text.decode(), "costs 20 € per month")
    assert isinstance(found, Citation)
    assert check_slice(body.text, body.text_hash, found.start, found.end, found.text).holds
    assert not check_slice(body.text, body.text_hash, found.start + 1, found.end, found.text).holds
    assert not check_slice(body.text, body.text_hash, found.start, found.end, "costs 30 € per month").holds
    assert not check_slice(body.text + b"x", body.text_hash, found.start, found.end, found.text).intact
