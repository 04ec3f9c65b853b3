"""A statement is prepared once per connection and reused (store/backends/pgdriver.py): parsed once, row-level
security still decided per transaction, and a statement whose table changed shape prepared afresh."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from gleaner import tenancy
from gleaner.store.access.rls import generic_plans
from gleaner.store.backends import pgdriver
from gleaner.store.backends.dberrors import DatabaseUnavailable
from gleaner.store.ledger.discovery import record_discovery
from gleaner.urls import path_of, url_hash

PREPARED = "SELECT custom_plans + generic_plans FROM pg_prepared_statements WHERE statement = :s"


def seed(deps: Any, site: str) -> str:
    meta = deps.metadata
    run_id = str(uuid.uuid4())
    url = f"https://{site}/page"
    with tenancy.scope(site):
        host_id = meta.upsert_source_host(site, site, own_site=True)
        assert meta.create_run(run_id, site, host_id, f"https://{site}/", {}, "manual", "api")
        record_discovery(meta.engine, run_id, site, host_id, [(url, url_hash(url), path_of(url), "", 0, "link")])
    return url


def test_a_statement_is_parsed_once_per_connection_and_its_plan_reused(deps: Any) -> None:
    query = "SELECT CAST(:a AS int) * 2 AS twice"
    with deps.metadata.engine.connect() as conn:
        results = [conn.execute(sa.text(query), {"a": n}).scalar_one() for n in range(8)]
        conn.commit()
        uses = conn.execute(sa.text(PREPARED), {"s": "SELECT CAST($1 AS int) * 2 AS twice"}).scalars().all()
        conn.commit()
    assert results == [2 * n for n in range(8)]
    assert uses == [8]  # one prepared statement, bound eight times (its plan generic after five)


def test_the_least_recently_used_statements_past_the_bound_are_closed(deps: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgdriver, "_STATEMENTS_KEPT", 2)
    texts = [f"SELECT CAST(:a AS int) + {n}" for n in range(4)]
    mine = sa.text("SELECT statement FROM pg_prepared_statements WHERE statement LIKE :p ORDER BY 1")
    with deps.metadata.engine.connect() as conn:
        answers = [conn.execute(sa.text(t), {"a": 1}).scalar_one() for t in texts]
        kept = conn.execute(mine, {"p": "SELECT CAST($1 AS int) + %"}).scalars().all()
        conn.rollback()
    assert answers == [1, 2, 3, 4]
    # Two kept; the older ones were closed by the server with the exchanges that followed their eviction.
    assert kept == ["SELECT CAST($1 AS int) + 2", "SELECT CAST($1 AS int) + 3"]


@pytest.mark.parametrize("generic", [False, True], ids=["default-plans", "generic-plans"])
def test_row_level_security_holds_for_a_statement_prepared_under_another_tenant(deps: Any, generic: bool) -> None:
    urls = {site: seed(deps, site) for site in ("a.test", "b.test")}
    query = sa.text("SELECT canonical_url FROM knowledge.documents WHERE canonical_url LIKE :p ORDER BY 1")
    seen: list[tuple[str | None, list[str]]] = []
    engine = deps.metadata.engine
    with generic_plans(engine) if generic else contextlib.nullcontext(), engine.connect() as conn:
        # More than five runs of each, so PostgreSQL moves the statement to its generic plan on the way.
        for site in ["a.test", "b.test", None, "a.test"] * 4:
            with tenancy.scope(site) if site else tenancy.all_tenants():
                seen.append((site, conn.execute(query, {"p": "https://%"}).scalars().all()))
                conn.commit()
        with tenancy.scope("b.test"):
            row = conn.execute(query, {"p": urls["a.test"]}).scalars().all()
            conn.commit()
    for site, rows in seen:
        assert rows == ([urls[site]] if site else sorted(urls.values())), site
    assert row == []  # b.test cannot read a.test's document through the prepared statement


def test_the_crawl_engine_s_transactions_use_generic_plans_and_others_the_default(deps: Any) -> None:
    engine = deps.metadata.engine
    setting = sa.text("SELECT current_setting('plan_cache_mode') WHERE CAST(:a AS int) = 1")
    with engine.connect() as conn:
        before = conn.execute(setting, {"a": 1}).scalar_one()
    with generic_plans(engine), engine.connect() as conn:
        inside = conn.execute(setting, {"a": 1}).scalar_one()
    with engine.connect() as conn:
        after = conn.execute(setting, {"a": 1}).scalar_one()
    assert (before, inside, after) == ("auto", "force_generic_plan", "auto")


def test_a_statement_whose_table_changed_shape_is_prepared_afresh(deps: Any) -> None:
    query = sa.text("SELECT * FROM shaped WHERE a > :n ORDER BY a")
    with deps.metadata.engine.connect() as conn:
        conn.execute(sa.text("CREATE TEMP TABLE shaped (a int)"))
        conn.execute(sa.text("INSERT INTO shaped VALUES (1), (2)"))
        conn.commit()
        assert conn.execute(query, {"n": 1}).all() == [(2,)]
        conn.commit()
        conn.execute(sa.text("ALTER TABLE shaped ADD COLUMN b text DEFAULT 'x'"))
        conn.commit()
        # PostgreSQL refuses the old prepared statement once ("cached plan must not change result type"): a
        # retryable error, and the driver forgets it, so the same text is prepared afresh, with the new shape.
        with pytest.raises(DatabaseUnavailable, match="result type"):
            conn.execute(query, {"n": 1}).all()
        conn.rollback()
        assert [tuple(r) for r in conn.execute(query, {"n": 0}).all()] == [(1, "x"), (2, "x")]
        conn.rollback()
