"""Read-only queries the tests use to check what landed."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa


def rows(deps: Any, sql: str, **params: Any) -> list[Any]:
    with deps.metadata.engine.connect() as conn:
        return list(conn.execute(sa.text(sql), params).all())


def scalar(deps: Any, sql: str, **params: Any) -> Any:
    with deps.metadata.engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar()


def counts(deps: Any) -> dict[str, int]:
    tables = ("documents", "document_snapshots", "crawl_runs", "crawl_page_decisions", "canonical_texts",
              "text_spans", "snapshot_texts", "source_hosts")
    return {t: int(scalar(deps, f"SELECT count(*) FROM knowledge.{t}")) for t in tables}


def decision_of(deps: Any, run_id: str, path: str) -> dict[str, Any]:
    found = rows(
        deps,
        "SELECT c.decision::text, c.decision_reason, c.fetch_outcome::text, c.fetch_reason, d.scrape_policy::text,"
        " c.snapshot_outcome::text, d.status::text FROM knowledge.crawl_page_decisions c"
        " JOIN knowledge.documents d ON d.id = c.document_id WHERE c.run_id = :r AND d.path = :p",
        r=run_id, p=path,
    )
    assert found, f"{path} is not in run {run_id}"
    keys = ("decision", "reason", "fetch_outcome", "fetch_reason", "scrape_policy", "snapshot_outcome", "status")
    return dict(zip(keys, found[0], strict=True))
