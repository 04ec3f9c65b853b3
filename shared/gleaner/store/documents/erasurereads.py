"""When, why and by whom a page was erased (``knowledge.erasures``), for the pages that show it.

The erased document keeps only its erased form (store/documents/erasure.py); the erasure record is what a reader
is told instead: "erased on DATE: REASON".
"""

from __future__ import annotations

from typing import Any

from gleaner.store.backends.sqlstore import SqlStore


class ErasureReadStore(SqlStore):
    def erasure_of(self, document_id: str) -> dict[str, Any] | None:
        """The document's latest erasure: ``{"erased_at", "reason", "requested_by"}``, or None."""
        row = self._first("SELECT erased_at, reason, requested_by FROM knowledge.erasures"
                          " WHERE document_id = CAST(:d AS uuid) ORDER BY erased_at DESC LIMIT 1", {"d": document_id})
        if row is None:
            return None
        return {"erased_at": row[0].isoformat(), "reason": row[1], "requested_by": row[2]}
