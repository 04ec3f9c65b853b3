"""Retention: keep each document's newest versions, drop older ones with their bodies and texts.

A version is kept when it is among the document's ``keep`` newest, is the
document's current version, or is pinned: by a citation, by a reference item
made from it, or by a composite document's source row (``composite_document_sources``,
when that table exists). Pins are checked again in the statement that deletes,
so a citation made while pruning keeps its version.

Rows go first (one transaction, returning the blob keys they held), then the
blobs: a version is never left pointing at a body that is gone; an interrupted
prune can leave an unreferenced blob behind, never a broken version.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from gleaner.store.blobs import BlobStore
from gleaner.store.erasure import _table_exists, drop_snapshots
from gleaner.store.sqlstore import SqlStore

log = logging.getLogger(__name__)

_PINNED = (
    " AND NOT EXISTS (SELECT 1 FROM knowledge.citations c WHERE c.snapshot_id = s.id)"
    " AND NOT EXISTS (SELECT 1 FROM knowledge.reference_items ri WHERE ri.source_snapshot_id = s.id)"
)
_COMPOSITE_PIN = (" AND NOT EXISTS (SELECT 1 FROM knowledge.composite_document_sources cs"
                  " WHERE cs.source_snapshot_id = s.id)")


@dataclass
class PruneReport:
    site_domain: str | None
    keep_versions: int
    versions_removed: int = 0
    texts_removed: int = 0
    blobs_deleted: int = 0
    blobs_failed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class RetentionStore(SqlStore):
    def prune_rows(self, site: str | None, keep: int) -> tuple[list[str], int, int]:
        """Delete prunable versions; (their blob keys, versions removed, texts removed)."""
        with self._tx() as conn:
            pinned = _PINNED + (_COMPOSITE_PIN if _table_exists(conn, "knowledge.composite_document_sources") else "")
            rows = conn.execute(
                sa.text(
                    "SELECT s.id, s.processed_markdown_ref, s.raw_markdown_ref FROM ("
                    "  SELECT s.id, row_number() OVER (PARTITION BY s.document_id ORDER BY s.version DESC) AS n"
                    "  FROM knowledge.document_snapshots s JOIN knowledge.documents d ON d.id = s.document_id"
                    "  WHERE CAST(:site AS text) IS NULL OR d.site_domain = :site"
                    " ) ranked JOIN knowledge.document_snapshots s ON s.id = ranked.id"
                    " JOIN knowledge.documents d ON d.id = s.document_id"
                    " WHERE ranked.n > :keep AND s.id IS DISTINCT FROM d.current_snapshot_id" + pinned +
                    " ORDER BY s.id FOR UPDATE OF s"
                ),
                {"site": site, "keep": keep},
            ).all()
            ids = [str(r[0]) for r in rows]
            removed, _kept = drop_snapshots(conn, ids)
        keys = [k for r in rows for k in (r[1], r[2]) if k]
        return keys, len(ids), len(removed)


def prune(store: RetentionStore, blobs: BlobStore, site: str | None, keep: int) -> PruneReport:
    """Drop every document's versions beyond the newest ``keep``, except the current and pinned ones."""
    report = PruneReport(site, keep)
    keys, report.versions_removed, report.texts_removed = store.prune_rows(site, keep)
    for key in keys:
        try:
            if blobs.delete(key):
                report.blobs_deleted += 1
        except Exception:  # the row is gone already: a leftover blob is reported, the rest still go
            log.warning("could not delete blob %s", key, exc_info=True)
            report.blobs_failed.append(key)
    return report
