"""The scrape stage's ledger write for pages that answered 304 Not Modified.

On an unchanged recrawl every page of every batch answers 304, so this is the
whole per-batch write of such a run: each page is settled (``fetch_outcome``
not-modified, ``snapshot_outcome`` unchanged, once: a redelivered task finds its
rows set) and its document's ``last_fetched_at`` / ``last_seen_at`` move, in one
statement whose rows travel as one JSON parameter. ``record_fetches`` sent twelve
``text[]`` columns, mostly NULL for a 304, which pg8000 escapes character by
character in Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.changes.lifecycle import FetchFacts
from gleaner.store.backends.sqlstore import json_rows
from gleaner.store.documents.lifecycle import settle_fetches
from gleaner.store.ledger.records import FetchRecord


def record_not_modified(engine: Engine, run_id: str, records: Sequence[FetchRecord]) -> None:
    """Settle the run's pages that answered 304 (records of other outcomes go to ``record_fetches``)."""
    if not records:
        return
    rows = [{"d": r.document_id, "why": r.reason, "st": r.status, "ms": r.time_ms, "sz": r.byte_size}
            for r in records]
    with engine.begin() as conn:
        fresh = conn.execute(
            sa.text(
                "WITH t AS (SELECT * FROM json_to_recordset(CAST(:rows AS json))"
                "   AS t(d uuid, why text, st int, ms int, sz int)),"
                " fresh AS (UPDATE knowledge.crawl_page_decisions c"
                "   SET fetch_outcome = 'not-modified', fetch_reason = t.why, fetch_status = t.st,"
                "   fetch_time_ms = t.ms, byte_size = t.sz, fetched_at = now(), fetched_content_hash = NULL,"
                "   fetched_raw_hash = NULL, extractor = NULL, snapshot_outcome = 'unchanged'"
                "   FROM t WHERE c.run_id = :r AND c.document_id = t.d AND c.fetch_outcome IS NULL"
                "   RETURNING c.document_id)"
                " UPDATE knowledge.documents d SET last_fetched_at = now(), last_seen_at = now(), updated_at = now()"
                " FROM fresh WHERE d.id = fresh.document_id RETURNING d.id, d.status::text"
            ),
            {"r": run_id, "rows": json_rows(rows)},
        ).all()
        # A 304 counts as answering: a failed or stale page that answers is active again.
        returning = [str(doc) for doc, status in fresh if status in ("failed", "stale", "superseded")]
        settle_fetches(conn, run_id, [FetchFacts(doc, "not-modified", 304) for doc in returning])
