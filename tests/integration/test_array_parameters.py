"""List parameters and placeholders reach PostgreSQL as the same values and statements (store/backends/pgdriver.py)."""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa

AWKWARD = ["plain", "", "NULL", "null", "Null", "two words", ' lead', "trail\t", 'a "quote"', "back\\slash",
           "{braces}", "a,b", "line\nbreak", "\u00a0no-break space", "é", "日本語", "\\", '"']


def test_text_arrays_come_back_exactly_as_sent_including_strings_that_read_as_null_or_hold_quotes(deps: Any) -> None:
    with deps.metadata.engine.connect() as conn:
        back = conn.execute(sa.text("SELECT CAST(:a AS text[])"), {"a": AWKWARD}).scalar_one()
        with_none = conn.execute(sa.text("SELECT CAST(:a AS text[])"), {"a": ["x", None, "NULL"]}).scalar_one()
        numbers = conn.execute(sa.text("SELECT CAST(:a AS int[])"), {"a": [3, -1, None]}).scalar_one()
        flags = conn.execute(sa.text("SELECT CAST(:a AS boolean[])"), {"a": [True, False]}).scalar_one()
    assert back == AWKWARD
    assert with_none == ["x", None, "NULL"]
    assert numbers == [3, -1, None]
    assert flags == [True, False]


def test_ids_sent_as_a_list_select_the_rows_they_name(deps: Any) -> None:
    ids = [str(uuid.uuid4()) for _ in range(3)]
    with deps.metadata.engine.connect() as conn:
        found = conn.execute(sa.text("SELECT x::text FROM unnest(CAST(:ids AS uuid[])) AS x"
                                     " WHERE x = ANY(CAST(:some AS uuid[])) ORDER BY 1"),
                             {"ids": ids, "some": ids[:2]}).scalars().all()
    assert found == sorted(ids[:2])


def test_a_statement_run_again_with_other_values_uses_them_and_keeps_its_literal_percent_signs(deps: Any) -> None:
    query = sa.text("SELECT '50% off: ' || CAST(:x AS text) || ' (' || CAST(:n AS text) || ')'")
    with deps.metadata.engine.connect() as conn:
        first = conn.execute(query, {"x": "shoes", "n": 1}).scalar_one()
        second = conn.execute(query, {"x": "hats", "n": 2}).scalar_one()
    assert (first, second) == ("50% off: shoes (1)", "50% off: hats (2)")
