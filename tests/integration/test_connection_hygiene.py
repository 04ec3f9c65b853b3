"""A failed transaction leaves nothing behind: the pooled connection is clean for the next caller."""

from __future__ import annotations

import pytest

from gleaner.store.backends.dberrors import DatabaseRefused, is_permanent, sqlstate
from gleaner.store.feeds.references import ArticleRow


def row(title: str, url: str) -> ArticleRow:
    return ArticleRow(workspace_id="w", external_url=url, normalised_url=url, title=title, summary=None,
                      published_at=None, feed_source=None)


def test_a_value_the_driver_cannot_encode_does_not_poison_the_pool(make_deps):
    deps = make_deps()
    refs = deps.references
    with pytest.raises(UnicodeEncodeError):
        refs.record_articles([row("\ud800", "https://n.test/bad")])
    for i in range(8):  # more than the pool holds: every pooled connection is tried
        (new,) = refs.record_articles([row("fine", f"https://n.test/{i}")])
        assert new is not None
    assert refs.counts()["feed_articles"] == 8


def test_a_value_the_server_refuses_is_a_permanent_error_and_rolls_back(make_deps):
    deps = make_deps()
    refs = deps.references
    with pytest.raises(DatabaseRefused) as refused:  # translated at the engine, the driver's error its cause
        refs.record_articles([row("fine", "https://n.test/a"), row("a\x00b", "https://n.test/nul")])
    assert sqlstate(refused.value) == "22021" and is_permanent(refused.value)
    assert refs.record_articles([row("fine", "https://n.test/a")]) != [None]  # the batch left no row
    assert refs.counts()["feed_articles"] == 1


def test_a_connection_lost_while_idle_is_replaced_and_a_busy_one_is_not_pinged(make_deps, monkeypatch):
    """The pool pings a connection only after it sat idle: a killed one is replaced unseen, a busy pool's
    connections go back to work without a round trip each."""
    import time

    import sqlalchemy as sa

    from gleaner.store.access.rls import ADMIN_OPTION
    from gleaner.store.backends import db

    monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 0.3)
    engine = make_deps().engine
    pings = []
    ping = engine.dialect.do_ping
    monkeypatch.setattr(engine.dialect, "do_ping", lambda conn: pings.append(1) or ping(conn))

    def backend_pid() -> int:
        with engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
            return int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())

    first = backend_pid()
    pings.clear()
    assert backend_pid() == first and pings == []  # given back a moment ago: no ping
    admin = {ADMIN_OPTION: True}
    with engine.connect().execution_options(**admin) as victim, engine.connect().execution_options(**admin) as other:
        assert victim.execute(sa.text("SELECT pg_backend_pid()")).scalar_one() == first
        victim.commit()  # given back clean, so the pool keeps it
        assert other.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": first}).scalar_one()
    time.sleep(0.4)
    for _ in range(3):  # every pooled connection, the killed one among them, taken after its idle time
        assert backend_pid() != first
    assert pings


def test_threads_beyond_the_pool_wait_their_turn_and_one_alone_keeps_one_connection(make_deps):
    """A many-site tick's threads outnumber the local pool: they share its connections (the server runs no
    more processes than the pool's bound, each planning every statement again), and a thread alone takes
    the connection given back last, whose statements are prepared already, not the next idle one in turn."""
    import threading

    import sqlalchemy as sa

    from gleaner.store.access.rls import ADMIN_OPTION
    from gleaner.store.backends import db

    engine = make_deps().engine
    pids: set[int] = set()
    errors: list[BaseException] = []

    def backend_pid(pause: float = 0.0) -> int:
        with engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
            return int(conn.execute(sa.text("SELECT pg_backend_pid() FROM pg_sleep(:s)"), {"s": pause}).scalar_one())

    def work() -> None:
        try:
            pids.add(backend_pid(0.05))
        except BaseException as exc:  # reported below, with the thread's own error
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3 * db.LOCAL_POOL_SIZE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert 1 < len(pids) <= db.LOCAL_POOL_SIZE  # side by side, within the bound
    assert len({backend_pid() for _ in range(6)}) == 1
