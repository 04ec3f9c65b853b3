"""Codes in words: the one reviewed table the back office and the CLI's human output read."""

from __future__ import annotations

from gleaner.display.humanize import day, plural
from gleaner.display.vocabulary import cannot_resume_because, explain_error, words


def test_stored_codes_read_as_words():
    assert words("hash_changed") == "its text changed"
    assert words("false_positive") == "not a conflict"
    assert words("prod") == "in production"
    assert words("unlabeled") == "not decided yet"
    assert words("not-fetched (exclude)") == "not fetched (excluded)"
    assert words("some_new_code") == "some new code"  # never hidden, never raw
    assert words(None) == ""


def test_counts_agree_with_their_nouns_and_days_read_as_dates():
    assert (plural(1, "document"), plural(2, "version"), plural(0, "run")) == ("1 document", "2 versions", "0 runs")
    assert day("2026-12-05T03:14:00+00:00") == "5 Dec 2026"


def test_a_dns_failure_is_explained_and_resuming_it_is_not_offered():
    error = "[Errno -2] Name or service not known"
    assert explain_error(error).startswith("the host name could not be found")
    assert cannot_resume_because(error)
    assert cannot_resume_because("stopped while scraping") is None
    assert explain_error("something else") == "something else"
