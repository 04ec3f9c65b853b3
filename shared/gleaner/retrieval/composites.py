"""Composite documents in search: their index rows, and their hits beside the documents' hits.

Folding pages into a composite (gleaner.operator.routing) moves the pages' ``rag`` routing to the
composite, so the composite's current text answers for them. A composite is searchable when:

- its current version was indexed by ingest (``composite_search_index`` names that snapshot);
- it has an enabled ``rag`` routing, is not deleted, and is neither ``stale`` (a source moved on
  since it was made: its text no longer says what the pages say, as a stale document's does not)
  nor ``superseded``;
- none of its sources is blocked (gate 2: a blocked page is never ingested, alone or combined) or
  erased.

Each condition is read when searching, so the change that breaks one (a routing disabled, a move
to stale, a block rule, an erasure) takes the composite out in its own transaction, as for documents.

A hit has the document hit's keys (gleaner.retrieval.ranking) plus ``composite_id``: ``url`` is
``gleaner://composites/{id}``, ``document_id`` is null, ``version`` the composite's version, and
``(text_hash, start, end)`` a verbatim slice of the composite's canonical text, like any hit.
Search (gleaner.retrieval.ranking) ranks composites with the documents: ``SEARCHABLE`` lists
the caller's searchable ones, and their texts' candidates come from the same owner-read functions as
the documents', narrowed to those texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection

if TYPE_CHECKING:
    from gleaner.app import Deps

URI = "gleaner://composites/{id}"

# The batch's composite versions that qualify (current, routed, live, no blocked or erased source).
_QUALIFIES = (
    " NOT c.is_deleted AND c.status NOT IN ('stale', 'superseded')"
    " AND EXISTS (SELECT 1 FROM knowledge.document_routings r WHERE r.composite_document_id = c.id"
    "   AND r.destination = 'rag' AND r.enabled)"
    " AND NOT EXISTS (SELECT 1 FROM knowledge.composite_document_sources cs"
    "   JOIN knowledge.documents d ON d.id = cs.document_id"
    "   WHERE cs.composite_document_id = c.id AND (d.status = 'blocked' OR d.is_deleted))"
)
_ENTER = sa.text(
    "INSERT INTO knowledge.composite_search_index (composite_document_id, site_domain, snapshot_id, text_hash)"
    " SELECT c.id, c.site_domain, s.id, st.text_hash"
    " FROM knowledge.document_snapshots s"
    " JOIN knowledge.composite_documents c ON c.id = s.composite_document_id AND c.current_snapshot_id = s.id"
    " JOIN knowledge.snapshot_texts st ON st.snapshot_id = s.id"
    " WHERE s.id = ANY(CAST(:ids AS uuid[])) AND" + _QUALIFIES +
    " ORDER BY c.id"
    " ON CONFLICT (composite_document_id) DO UPDATE SET snapshot_id = EXCLUDED.snapshot_id,"
    "   text_hash = EXCLUDED.text_hash, indexed_at = now()"
    " RETURNING composite_document_id, text_hash"
)
_LEAVE = sa.text(
    "DELETE FROM knowledge.composite_search_index i USING knowledge.document_snapshots s"
    " WHERE s.id = ANY(CAST(:ids AS uuid[])) AND i.composite_document_id = s.composite_document_id"
    " AND i.composite_document_id <> ALL(CAST(:kept AS uuid[]))"
)
_VISIBLE = (
    " FROM knowledge.composite_search_index i"
    " JOIN knowledge.composite_documents c ON c.id = i.composite_document_id AND c.current_snapshot_id = i.snapshot_id"
    " WHERE (CAST(:site AS text) IS NULL OR c.site_domain = CAST(:site AS text)) AND" + _QUALIFIES
)


def index_composites(conn: Connection, snapshot_ids: Sequence[str]) -> list[tuple[str, str]]:
    """Inside ingest's indexing transaction: the batch's qualifying composite versions enter the index
    (replacing their composite's earlier row), the batch's others leave it. Returns (composite, text hash)."""
    entered = [(str(r[0]), str(r[1])) for r in conn.execute(_ENTER, {"ids": list(snapshot_ids)})]
    conn.execute(_LEAVE, {"ids": list(snapshot_ids), "kept": [c for c, _h in entered]})
    return entered


def index_unindexed_composites(deps: Deps) -> int:
    """Index the searchable composites whose current version ingest did not index (made before migration
    0036): their texts are chunked as ingest would have (``gleaner index`` runs this). Returns how many."""
    from gleaner.store.documents.texts import STORED_TEXT, stored_text

    with deps.engine.connect() as conn:
        missing = conn.execute(sa.text(
            f"SELECT {STORED_TEXT}, CAST(s.id AS text)"
            " FROM knowledge.composite_documents c"
            " JOIN knowledge.document_snapshots s ON s.id = c.current_snapshot_id"
            " JOIN knowledge.snapshot_texts st ON st.snapshot_id = s.id"
            " JOIN knowledge.canonical_texts t ON t.text_hash = st.text_hash"
            " WHERE NOT EXISTS (SELECT 1 FROM knowledge.composite_search_index i"
            "   WHERE i.composite_document_id = c.id AND i.snapshot_id = s.id) AND" + _QUALIFIES)).all()
    items = [(r[3], stored_text(r)) for r in missing]
    deps.search_index.index_snapshots(items)
    return len(items)


# The caller's searchable composites (row-level security decides): id, title, site, text, snapshot.
# Search reads them in its candidates' statement (gleaner.retrieval.hybrid).
# An index row's text length in bytes, a column of a hit (fusion weighs a long page's best chunk by it).
TEXT_BYTES = "(SELECT t.byte_length FROM knowledge.canonical_texts t WHERE t.text_hash = i.text_hash) AS byte_length"
SEARCHABLE = ("SELECT CAST(c.id AS text) AS composite_id, c.title, c.site_domain, i.text_hash,"
              " CAST(i.snapshot_id AS text) AS snapshot_id, " + TEXT_BYTES + _VISIBLE)
