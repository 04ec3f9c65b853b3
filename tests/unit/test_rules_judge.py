"""The rules judge: which pairs of passages contradict, and which sentences say so."""

from __future__ import annotations

from gleaner.origins.judge import Relation, RulesJudge, worth_judging

PAGE = ("# Pricing\n\nThe Pro plan price is 22 euros per month, billed yearly. Support is included in every plan.\n\n"
        "| limit | 1000 |\n\n    gleaner crawl https://example.com --limit 10\n")


def _judge(a: str, b: str = PAGE) -> tuple[Relation, str, str]:
    found = RulesJudge().judge_pair(a, b)
    quote_a = a[found.a_range[0]:found.a_range[1]] if found.a_range else ""
    quote_b = b[found.b_range[0]:found.b_range[1]] if found.b_range else ""
    return found.relation, quote_a, quote_b


def test_a_correction_that_denies_the_pages_price_contradicts_it_and_names_both_sentences():
    assert _judge("The price is 24, not 22.") == (
        Relation.CONTRADICTION, "The price is 24, not 22.", "The Pro plan price is 22 euros per month, billed yearly.")


def test_a_different_price_for_the_same_thing_contradicts_and_the_same_price_in_other_words_does_not():
    assert _judge("The Pro plan costs 19 euros a month.")[0] is Relation.CONTRADICTION
    assert _judge("Confirmed: the Pro plan costs 22 euros a month when billed yearly.")[0] is Relation.UNRELATED


def test_a_negation_of_what_the_page_states_contradicts_it():
    relation, _mine, theirs = _judge("Support is not included in every plan.")
    assert relation is Relation.CONTRADICTION and theirs == "Support is included in every plan."


def test_dates_percentages_and_decimals_are_compared_as_values():
    assert _judge("The office opens on 1 March 2026.", "The office opens on 2026-04-15.")[0] is Relation.CONTRADICTION
    assert _judge("The office opens on March 1, 2026.", "The office opens on 2026-03-01.")[0] is Relation.UNRELATED
    assert _judge("The fee is 2.5 euros per parcel.", "The fee is 2.5 euros per parcel, always.")[0] \
        is Relation.UNRELATED
    assert _judge("Discount is 10% this week.", "Discount is 10 euros this week.")[0] is Relation.UNRELATED


def test_table_cells_commands_and_sentences_about_other_things_are_never_judged():
    assert _judge("Run it with --limit 10 every night.")[0] is Relation.UNRELATED
    assert _judge("| limit | 500 |")[0] is Relation.UNRELATED
    assert _judge("Our office opened in 1999 by the harbour.")[0] is Relation.UNRELATED
    assert _judge(PAGE)[0] is Relation.DUPLICATE


def test_only_pairs_that_say_something_of_the_same_thing_in_other_words_are_worth_a_models_question():
    assert worth_judging("The ferry leaves at 9:00 every day.", "The ferry leaves at 10:30 on weekdays.")
    assert worth_judging("Support costs extra on the Pro plan.", PAGE)
    # The same sentence repeated (a site's boilerplate), or sentences about other things: nothing to decide.
    assert not worth_judging("Intro. The Pro plan price is 22 euros per month, billed yearly.", PAGE)
    assert not worth_judging("The office opens in the harbour building soon.", PAGE)
