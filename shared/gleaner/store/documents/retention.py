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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from gleaner.store.backends.blobs import BlobStore
from gleaner.store.backends.sqlstore import SqlStore
from gleaner.store.documents.versiondrop import drop_snapshots, table_exists

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
            pinned = _PINNED + (_COMPOSITE_PIN if table_exists(conn, "knowledge.composite_document_sources") else "")
            rows = conn.execute(
                sa.text(
                    "SELECT s.id, s.processed_markdown_ref, s.raw_markdown_ref, s.original_ref FROM ("
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
        keys = [k for r in rows for k in (r[1], r[2], r[3]) if k]
        return keys, len(ids), len(removed)

    def run_site(self, run_id: str) -> tuple[str, str] | None:
        """(site, status) of a run, or None."""
        row = self._first("SELECT site_domain, status::text FROM knowledge.crawl_runs WHERE id = :r", {"r": run_id})
        return (str(row[0]), str(row[1])) if row else None

    def run_holding_bodies(self, run_id: str) -> tuple[str, str] | None:
        """(site, status) of a run whose fetched bodies were not discarded yet, or None."""
        row = self._first("SELECT site_domain, status::text FROM knowledge.crawl_runs WHERE id = :r"
                          " AND bodies_discarded_at IS NULL", {"r": run_id})
        return (str(row[0]), str(row[1])) if row else None

    def runs_holding_bodies(self, settled: Sequence[str], limit: int = 500) -> list[tuple[str, str]]:
        """Settled runs whose fetched bodies were not discarded yet: (run id, site)."""
        rows = self._all("SELECT id, site_domain FROM knowledge.crawl_runs WHERE bodies_discarded_at IS NULL"
                         " AND status::text = ANY(CAST(:st AS text[])) ORDER BY created_at LIMIT :n",
                         {"st": list(settled), "n": limit})
        return [(str(r[0]), str(r[1])) for r in rows]

    def mark_bodies_discarded(self, run_id: str) -> None:
        self._run("UPDATE knowledge.crawl_runs SET bodies_discarded_at = now() WHERE id = :r", {"r": run_id})

    def expired_runs(self, terminal: Sequence[str], days: int, limit: int = 500) -> list[tuple[str, str]]:
        """Ended runs older than ``days`` whose artefacts are still kept: (run id, site)."""
        rows = self._all("SELECT id, site_domain FROM knowledge.crawl_runs WHERE artefacts_expired_at IS NULL"
                         " AND status::text = ANY(CAST(:st AS text[]))"
                         " AND coalesce(finished_at, created_at) < now() - make_interval(days => :d)"
                         " ORDER BY created_at LIMIT :n",
                         {"st": list(terminal), "d": days, "n": limit})
        return [(str(r[0]), str(r[1])) for r in rows]

    def mark_artefacts_expired(self, run_id: str) -> None:
        self._run("UPDATE knowledge.crawl_runs SET artefacts_expired_at = now(), bodies_discarded_at ="
                  " coalesce(bodies_discarded_at, now()), raw_map_uri = NULL WHERE id = :r", {"r": run_id})


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
