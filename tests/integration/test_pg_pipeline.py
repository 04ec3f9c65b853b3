"""A statement goes to PostgreSQL in one exchange and the connection stays in step after errors (store/pgdriver.py)."""

from __future__ import annotations

from typing import Any

import pg8000.core
import pytest
import sqlalchemy as sa


class Exchanges:
    """Counts the connection's socket flushes: each one is a message batch the server answers."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        flush = pg8000.core._flush

        def counted(sock: Any) -> None:
            self.count += 1
            flush(sock)

        monkeypatch.setattr(pg8000.core, "_flush", counted)


def test_a_transaction_of_one_statement_costs_four_exchanges_not_ten(deps: Any, monkeypatch: pytest.MonkeyPatch
                                                                     ) -> None:
    engine = deps.metadata.engine
    with engine.begin() as conn:  # a pooled connection, warmed (its first use pings it)
        conn.execute(sa.text("SELECT 1")).all()
    exchanges = Exchanges(monkeypatch)
    with engine.begin() as conn:
        rows = conn.execute(sa.text("SELECT CAST(:a AS int) + 1, 'x'"), {"a": 41}).all()
    # BEGIN, the tenant guard, the statement, COMMIT: pg8000 alone made the guard, the statement and
    # COMMIT three exchanges each.
    assert exchanges.count == 4
    assert [tuple(r) for r in rows] == [(42, "x")]


def test_statements_without_rows_and_with_many_rows_read_back_as_before(deps: Any) -> None:
    with deps.metadata.engine.begin() as conn:
        conn.execute(sa.text("CREATE TEMP TABLE t (n int, s text) ON COMMIT DROP"))
        inserted = conn.execute(sa.text("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, :n) g"), {"n": 500})
        returned = conn.execute(sa.text("UPDATE t SET s = NULL WHERE n <= :k RETURNING n"), {"k": 3}).scalars().all()
        rows = conn.execute(sa.text("SELECT n, s FROM t ORDER BY n")).all()
    assert inserted.rowcount == 500
    assert sorted(returned) == [1, 2, 3]
    assert len(rows) == 500 and tuple(rows[0]) == (1, None) and tuple(rows[-1]) == (500, "v500")


def test_an_error_in_any_step_leaves_the_connection_usable(deps: Any) -> None:
    engine = deps.metadata.engine
    failing = [
        ("SELECT * FROM no_such_table WHERE x = :a", {"a": 1}, "no_such_table"),  # fails at Parse
        ("SELECT CAST(:a AS int)", {"a": "not a number"}, "invalid input syntax"),  # fails at Bind/Execute
        ("SELECT 1 / (CAST(:a AS int) - 1)", {"a": 1}, "division by zero"),  # fails at Execute
    ]
    with engine.connect() as conn:
        for query, params, why in failing:
            with pytest.raises(Exception, match=why):
                conn.execute(sa.text(query), params)
            conn.rollback()
            # The same connection answers the next statement with its own result, not a leftover.
            assert conn.execute(sa.text("SELECT CAST(:b AS text)"), {"b": query[:10]}).scalar_one() == query[:10]
            conn.rollback()
