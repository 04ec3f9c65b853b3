"""One resolver for every id a person types: whole ids, the 8 characters the pages show, or less."""

from __future__ import annotations

import pytest

from gleaner.display import idprefix

IDS = ["b86e645c-0000-4000-8000-000000000001", "b86e7777-0000-4000-8000-000000000002",
       "3a2b1e02-0000-4000-8000-000000000003"]


def lookup(_kind: str, low: str, high: str, limit: int) -> list[str]:
    return [i for i in sorted(IDS) if low <= i <= high][:limit]


def test_the_eight_characters_shown_stand_for_the_whole_id():
    assert idprefix.resolve("run", "b86e645c", lookup) == IDS[0]
    assert idprefix.resolve("run", "3A2B", lookup) == IDS[2]
    assert idprefix.resolve("run", IDS[1], lookup) == IDS[1]


def test_a_prefix_of_several_ids_is_an_error_naming_them():
    with pytest.raises(idprefix.AmbiguousId) as raised:
        idprefix.resolve("subscription", "b86e", lookup)
    assert IDS[0] in str(raised.value) and IDS[1] in str(raised.value) and "2 subscriptions" in str(raised.value)


def test_an_unknown_or_malformed_id_says_where_ids_are_listed():
    with pytest.raises(idprefix.UnknownId, match=r"no run ffff.*gleaner runs"):
        idprefix.resolve("run", "ffff", lookup)
    with pytest.raises(idprefix.UnknownId, match="first 4"):
        idprefix.resolve("run", "b8", lookup)
    with pytest.raises(idprefix.UnknownId):
        idprefix.resolve("run", "not-an-id", lookup)


def test_the_bounds_of_a_prefix_cover_exactly_the_ids_that_start_with_it():
    assert idprefix.bounds("b86e") == ("b86e0000-0000-0000-0000-000000000000", "b86effff-ffff-ffff-ffff-ffffffffffff")
