"""The parity fixture (seed 000 D-8): normalise_url and canonicalize agree with it, case by case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gleaner.errors import InvalidInput
from gleaner.urls import canonicalize, normalise_url

FIXTURE = Path(__file__).parents[1] / "fixtures" / "url_normalisation_parity.json"
CASES = json.loads(FIXTURE.read_text("utf-8"))["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["note"] for c in CASES])
def test_normalise_url_gives_the_expected_form(case):
    assert normalise_url(case["input"]) == case["expected"]


@pytest.mark.parametrize("case", CASES, ids=[c["note"] for c in CASES])
def test_normalising_twice_changes_nothing(case):
    once = normalise_url(case["input"])
    assert normalise_url(once) == once


@pytest.mark.parametrize("case", CASES, ids=[c["note"] for c in CASES])
def test_canonicalize_agrees_or_refuses_what_normalise_url_leaves_unchanged(case):
    if case["canonical"]:
        assert canonicalize(case["input"]) == case["expected"]
    else:
        assert case["expected"] == case["input"]
        with pytest.raises(InvalidInput):
            canonicalize(case["input"])


def test_the_fixture_covers_the_seed_rules():
    notes = " ".join(c["note"] for c in CASES)
    for rule in ("utm_", "ref and source", "trailing slash", "host lowercased", "unparseable"):
        assert rule in notes
