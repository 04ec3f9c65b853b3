"""The document lifecycle in PostgreSQL: lock, read, move ``documents.status`` and record the events.

The decisions are :mod:`gleaner.changes.lifecycle`'s, on values; these functions run inside the
caller's transaction (the one that records the fetches, or the mapping run's end), so a status
change and its event commit together with what caused them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gleaner.changes.lifecycle import (
    MISSING_RUNS_TO_STALE,
    UNAVAILABLE_RUNS_TO_FAIL,
    DocumentState,
    FetchFacts,
    Move,
    Status,
    changes_for,
    moves_for,
    stale_moves,
)
from gleaner.store.backends.sqlstore import json_rows
from gleaner.store.notifications.events import record_changes


def settle_fetches(conn: Connection, run_id: str | None, facts: Sequence[FetchFacts]) -> int:
    """Apply the lifecycle to documents a batch just fetched (each settled once per run by the caller's
    ledger guard); returns how many documents changed status."""
    if not facts:
        return 0
    ids = sorted({f.document_id for f in facts})
    # Lock first, read second (a read that waited for the lock would see other rows as they were).
    conn.execute(sa.text("SELECT 1 FROM knowledge.documents WHERE id = ANY(CAST(:ids AS uuid[])) ORDER BY id"
                         " FOR UPDATE"), {"ids": ids})
    rows = conn.execute(
        sa.text(
            "SELECT d.id, d.status::text, d.current_snapshot_id IS NOT NULL,"
            " (SELECT count(*) FROM (SELECT c.fetch_outcome FROM knowledge.crawl_page_decisions c"
            "   WHERE c.document_id = d.id AND c.fetch_outcome IS NOT NULL"
            "   AND c.fetch_outcome NOT IN ('exhausted', 'robots-unknown', 'store-failed')"
            "   ORDER BY c.fetched_at DESC NULLS LAST LIMIT :n) w WHERE w.fetch_outcome = 'unavailable')"
            " FROM knowledge.documents d WHERE d.id = ANY(CAST(:ids AS uuid[]))"
        ),
        {"ids": ids, "n": UNAVAILABLE_RUNS_TO_FAIL},
    ).all()
    states = [DocumentState(str(d), Status(status), bool(has_snapshot), int(streak))
              for d, status, has_snapshot, streak in rows]
    return _apply(conn, run_id, moves_for(states, facts))


def mark_unmapped_stale(conn: Connection, run_id: str, site: str, complete: bool) -> int:
    """Record whether this mapping run was complete; if it was, active pages that it and the complete
    run before it both missed become stale. Returns how many did.

    Only pages mapped before those runs qualify (a page landed by a feed webhook was never in a map).
    """
    conn.execute(sa.text("UPDATE knowledge.crawl_runs SET mapped_complete = :c WHERE id = :r"),
                 {"c": complete, "r": run_id})
    if not complete:
        return 0
    rows = conn.execute(
        sa.text(
            "WITH recent AS (SELECT id, created_at FROM knowledge.crawl_runs"
            "   WHERE site_domain = :s AND mapped_complete ORDER BY created_at DESC LIMIT :n)"
            " SELECT d.id FROM knowledge.documents d"
            " WHERE d.site_domain = :s AND d.status = 'active' AND NOT d.is_deleted"
            " AND (SELECT count(*) FROM recent) = :n"
            " AND NOT EXISTS (SELECT 1 FROM knowledge.crawl_page_decisions c"
            "   WHERE c.document_id = d.id AND c.run_id IN (SELECT id FROM recent))"
            " AND EXISTS (SELECT 1 FROM knowledge.crawl_page_decisions c JOIN knowledge.crawl_runs r ON r.id = c.run_id"
            "   WHERE c.document_id = d.id AND r.created_at < (SELECT min(created_at) FROM recent))"
            " ORDER BY d.id FOR UPDATE OF d"
        ),
        {"s": site, "n": MISSING_RUNS_TO_STALE},
    ).all()
    return _apply(conn, run_id, stale_moves([str(r[0]) for r in rows]))


def _apply(conn: Connection, run_id: str | None, moves: Sequence[Move]) -> int:
    """Update the documents the caller locked and record their events; how many moved."""
    if not moves:
        return 0
    conn.execute(
        sa.text(
            "UPDATE knowledge.documents d SET status = CAST(t.st AS knowledge.document_status),"
            " status_reason = t.why, status_changed_at = now(), updated_at = now()"
            " FROM json_to_recordset(CAST(:rows AS json)) AS t(d uuid, st text, why text) WHERE d.id = t.d"
        ),
        {"rows": json_rows([{"d": m.document_id, "st": str(m.to), "why": m.reason} for m in moves])},
    )
    record_changes(conn, changes_for(moves, run_id))
    return len(moves)
