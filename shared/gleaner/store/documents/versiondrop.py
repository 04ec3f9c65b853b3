"""Deleting versions and the canonical texts no other version uses: an erasure's last step and
retention's (gleaner/store/documents/erasure.py, gleaner/store/documents/retention.py) alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gleaner.store.access.rls import across_tenants


def drop_snapshots(conn: Connection, snapshot_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """Delete versions and the canonical texts no other version uses; (texts removed, texts kept)."""
    if not snapshot_ids:
        return [], []
    ids = list(snapshot_ids)
    hashes = conn.execute(
        sa.text("SELECT DISTINCT text_hash FROM knowledge.snapshot_texts WHERE snapshot_id = ANY(CAST(:i AS uuid[]))"),
        {"i": ids},
    ).scalars().all()
    conn.execute(sa.text("UPDATE knowledge.crawl_page_decisions SET produced_snapshot_id = NULL"
                         " WHERE produced_snapshot_id = ANY(CAST(:i AS uuid[]))"), {"i": ids})
    conn.execute(sa.text("UPDATE knowledge.document_snapshots SET superseded_by = NULL"
                         " WHERE superseded_by = ANY(CAST(:i AS uuid[]))"), {"i": ids})
    if table_exists(conn, "knowledge.composite_document_sources"):
        conn.execute(sa.text("UPDATE knowledge.composite_document_sources SET source_snapshot_id = NULL"
                             " WHERE source_snapshot_id = ANY(CAST(:i AS uuid[]))"), {"i": ids})
    conn.execute(sa.text("DELETE FROM knowledge.document_snapshots WHERE id = ANY(CAST(:i AS uuid[]))"), {"i": ids})
    # A canonical text is content-addressed, shared by every document (of any tenant) with the same text:
    # whether another one still uses it is asked across tenants, for this statement only.
    with across_tenants(conn):
        removed = conn.execute(
            sa.text("DELETE FROM knowledge.canonical_texts c WHERE c.text_hash = ANY(CAST(:h AS text[]))"
                    " AND NOT EXISTS (SELECT 1 FROM knowledge.snapshot_texts t WHERE t.text_hash = c.text_hash)"
                    " AND NOT EXISTS (SELECT 1 FROM knowledge.citations x WHERE x.text_hash = c.text_hash)"
                    " RETURNING c.text_hash"),
            {"h": list(hashes)},
        ).scalars().all()
        if removed:  # a text's spans and retrieval chunks go with it (no foreign key cascades: migration 0019)
            conn.execute(sa.text("DELETE FROM knowledge.text_spans WHERE text_hash = ANY(CAST(:h AS text[]))"),
                         {"h": list(removed)})
            conn.execute(sa.text("DELETE FROM knowledge.text_chunks WHERE text_hash = ANY(CAST(:h AS text[]))"),
                         {"h": list(removed)})
    kept = sorted(set(hashes) - set(removed))
    return sorted(removed), kept


def table_exists(conn: Connection, name: str) -> bool:
    return conn.execute(sa.text("SELECT to_regclass(:n) IS NOT NULL"), {"n": name}).scalar_one()
