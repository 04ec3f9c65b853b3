"""Sitemap ``<lastmod>`` on the run's ledger (``crawl_page_decisions.sitemap_lastmod``); see
:mod:`gleaner.operator.lastmod` for what it means and how a sitemap's text is read. Map writes it with the
ledger rows' insert (store/ledger/discovery.py)."""

from __future__ import annotations

from collections.abc import Sequence

from gleaner.store.backends.sqlstore import SqlStore


class LastmodStore(SqlStore):
    def unchanged_since_last_fetch(self, run_id: str, document_ids: Sequence[str]) -> set[str]:
        """Of ``document_ids``, those with a version whose sitemap lastmod is not after their last fetch."""
        if not document_ids:
            return set()
        rows = self._all(
            "SELECT c.document_id FROM knowledge.crawl_page_decisions c"
            " JOIN knowledge.documents d ON d.id = c.document_id"
            " WHERE c.run_id = :r AND c.document_id = ANY(CAST(:ids AS uuid[]))"
            " AND c.sitemap_lastmod IS NOT NULL AND d.current_snapshot_id IS NOT NULL"
            " AND d.last_fetched_at IS NOT NULL AND c.sitemap_lastmod <= d.last_fetched_at",
            {"r": run_id, "ids": list(document_ids)},
        )
        return {str(r[0]) for r in rows}
