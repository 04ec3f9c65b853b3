"""Migration 0017 drops or narrows indexes a crawl wrote for every page and no query read: what they
guaranteed still holds, and the lookups they could serve still find an index."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from gleaner.app import Deps
from gleaner.store.access.rls import ADMIN_OPTION
from gleaner.store.backends import db
from gleaner.store.backends.dberrors import DatabaseRefused


def _composite(conn: sa.Connection) -> str:
    composite = str(uuid.uuid4())
    conn.execute(sa.text("INSERT INTO knowledge.composite_documents (id, site_domain, title, status)"
                         " VALUES (:i, 'example.com', 'Both guides', 'generated')"), {"i": composite})
    return composite


def _version(conn: sa.Connection, composite: str, version: int, content_hash: str) -> None:
    conn.execute(sa.text("INSERT INTO knowledge.document_snapshots (composite_document_id, version, content_hash,"
                         " processed_markdown_ref) VALUES (:c, :v, :h, 'composite.md')"),
                 {"c": composite, "v": version, "h": content_hash})


@pytest.mark.parametrize("version, content_hash", [(1, "b" * 40), (2, "a" * 40)])
def test_a_composite_still_cannot_hold_two_versions_with_one_number_or_one_content(
        deps: Deps, version: int, content_hash: str) -> None:
    with deps.metadata.engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        composite = _composite(conn)
        _version(conn, composite, 1, "a" * 40)
        with pytest.raises(DatabaseRefused, match="duplicate key"):
            _version(conn, composite, version, content_hash)


def test_a_composite_s_versions_are_found_by_index_and_pages_get_none_of_its_entries(deps: Deps) -> None:
    with deps.metadata.engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        composite = _composite(conn)
        _version(conn, composite, 1, "a" * 40)
        conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(str(r[0]) for r in conn.execute(sa.text(
            "EXPLAIN SELECT id FROM knowledge.document_snapshots WHERE composite_document_id = :c"
            " ORDER BY version DESC LIMIT 1"), {"c": composite}))
        assert "document_snapshots_composite_version" in plan
        partial = conn.execute(sa.text(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = 'knowledge' AND tablename = 'document_snapshots'"
            " AND indexdef LIKE '%(composite_document_id%' AND indexdef NOT LIKE '%WHERE%'")).scalar_one()
        assert partial == 0


def _downgrade(engine: sa.Engine, revision: str) -> None:
    from alembic import command

    with engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        cfg = db.alembic_config(engine)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
        conn.commit()


def test_the_migration_goes_down_and_up_again(deps: Deps) -> None:
    engine = deps.metadata.engine
    _downgrade(engine, "0016")
    with engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        assert conn.execute(sa.text("SELECT to_regclass('knowledge.documents_site_url_hash')")).scalar_one()
    db.upgrade(engine)
    with engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        assert conn.execute(sa.text("SELECT to_regclass('knowledge.documents_site_url_hash')")).scalar_one() is None
    assert db.current_revision(engine) == db.head_revision()
