"""Sitemap ``<lastmod>`` on the run's ledger (``crawl_page_decisions.sitemap_lastmod``); see
:mod:`gleaner.operator.lastmod` for what it means and how a sitemap's text is read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from gleaner.store.sqlstore import SqlStore, json_rows


class LastmodStore(SqlStore):
    def record_lastmods(self, run_id: str, site: str, lastmods: Mapping[str, datetime]) -> None:
        """canonical url -> its sitemap lastmod, onto the run's ledger rows."""
        if not lastmods:
            return
        self._run(
            "UPDATE knowledge.crawl_page_decisions c SET sitemap_lastmod = t.lm"
            " FROM knowledge.documents d, json_to_recordset(CAST(:rows AS json)) AS t(u text, lm timestamptz)"
            " WHERE c.run_id = :r AND d.id = c.document_id AND d.site_domain = :s AND d.canonical_url = t.u",
            {"r": run_id, "s": site, "rows": json_rows([{"u": u, "lm": lm.isoformat()} for u, lm in lastmods.items()])},
        )

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
