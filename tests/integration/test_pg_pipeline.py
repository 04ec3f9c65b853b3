"""A statement goes to PostgreSQL in one exchange and the connection stays in step after errors
(store/backends/pgdriver.py)."""

from __future__ import annotations

import time
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


def test_a_transaction_of_one_statement_costs_three_exchanges_not_ten(deps: Any, monkeypatch: pytest.MonkeyPatch
                                                                     ) -> None:
    engine = deps.metadata.engine
    with engine.begin() as conn:  # a pooled connection, warmed (its first use pings it)
        conn.execute(sa.text("SELECT 1")).all()
    exchanges = Exchanges(monkeypatch)
    with engine.begin() as conn:
        rows = conn.execute(sa.text("SELECT CAST(:a AS int) + 1, 'x'"), {"a": 41}).all()
    # BEGIN with the tenant guard, the statement, COMMIT: pg8000 alone sent BEGIN on its own and made the
    # guard, the statement and COMMIT three exchanges each.
    assert exchanges.count == 3
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


def test_a_transaction_opens_with_its_first_statement_whichever_way_that_statement_goes(deps: Any) -> None:
    engine = deps.metadata.engine
    with engine.connect() as conn:
        # The first statement without parameters (pg8000's simple query), the next with: one transaction.
        started = conn.execute(sa.text("SELECT now()")).scalar_one()
        time.sleep(0.01)
        assert conn.execute(sa.text("SELECT now() + CAST(:z AS interval)"), {"z": "0 s"}).scalar_one() == started
        conn.rollback()
        conn.execute(sa.text("CREATE TEMP TABLE seen (n int)"))
        conn.execute(sa.text("INSERT INTO seen VALUES (:n)"), {"n": 1})
        conn.rollback()  # everything since the first statement goes: it was one transaction
        assert conn.execute(sa.text("SELECT to_regclass('pg_temp.seen') IS NULL")).scalar_one() is True
        conn.rollback()
        conn.execute(sa.text("CREATE TEMP TABLE kept (n int)"))
        conn.execute(sa.text("INSERT INTO kept VALUES (:n)"), {"n": 2})
        conn.commit()
        assert conn.execute(sa.text("SELECT n FROM kept")).scalar_one() == 2
        conn.commit()


def test_autocommit_statements_open_no_transaction(deps: Any) -> None:
    with deps.metadata.engine.connect().execution_options(isolation_level="AUTOCOMMIT", gleaner_admin=True) as conn:
        conn.execute(sa.text("CREATE TEMP TABLE auto (n int)"))
        conn.execute(sa.text("INSERT INTO auto VALUES (:n)"), {"n": 3})
        # Outside a transaction block: no BEGIN went with the statements.
        assert conn.execute(sa.text("SELECT count(*) FROM auto WHERE n = :n"), {"n": 3}).scalar_one() == 1
        assert conn.exec_driver_sql("SHOW transaction_isolation").scalar_one()
        assert conn.connection.dbapi_connection._in_transaction is False


def test_a_connection_whose_answers_were_cut_short_is_never_used_again(deps: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    engine = deps.metadata.engine
    with engine.begin() as conn:  # warm: every later transaction takes a pooled connection
        conn.execute(sa.text("SELECT 1")).all()
    read = pg8000.core._read
    reads = {"left": 3}

    def interrupted(sock: Any, size: int) -> bytes:
        reads["left"] -= 1
        if reads["left"] == 0:
            raise KeyboardInterrupt  # Ctrl-C once the server's first answer of the transaction was read
        return read(sock, size)

    monkeypatch.setattr(pg8000.core, "_read", interrupted)
    with pytest.raises(KeyboardInterrupt), engine.begin() as conn:  # cut short in the tenant guard
        conn.execute(sa.text("SELECT CAST(:a AS text)"), {"a": "first"}).all()
    # Whichever connection the pool hands out next answers this statement, not the interrupted one.
    for n in range(3):
        with engine.begin() as conn:
            assert conn.execute(sa.text("SELECT CAST(:a AS text), 2"), {"a": f"next {n}"}).one() == (f"next {n}", 2)


def test_a_copy_that_opens_a_transaction_is_undone_by_its_rollback(deps: Any) -> None:
    raw = deps.metadata.engine.raw_connection()  # the driver's own cursor: COPY needs its stream
    try:
        cursor = raw.cursor()
        cursor.execute("CREATE TEMP TABLE copied (n int)")
        raw.commit()
        # The COPY is the transaction's first statement: the BEGIN waiting for it must go before it.
        cursor.execute("COPY copied (n) FROM STDIN", stream=[b"1\n2\n"])
        raw.rollback()
        cursor.execute("SELECT count(*) FROM copied")
        assert cursor.fetchone()[0] == 0  # rolled back with its transaction, not committed on its own
        raw.rollback()
    finally:
        raw.close()
