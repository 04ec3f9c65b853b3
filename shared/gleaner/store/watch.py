"""What the watch view reads: each site's and each page's last check and last change.

"Checked" is when Gleaner last fetched (or was told "not modified" about) a page, or last ran over a
site; "changed" is when a new version was last kept. Erased pages are left out: they are watched no more.
"""

from __future__ import annotations

from typing import Any

from gleaner.store.backends.sqlstore import SqlStore


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


class WatchStore(SqlStore):
    def watched_sites(self) -> list[dict[str, Any]]:
        rows = self._all(
            "SELECT d.site_domain, count(*), max(d.last_fetched_at), max(s.created_at),"
            " (SELECT max(COALESCE(r.finished_at, r.started_at)) FROM knowledge.crawl_runs r"
            "   WHERE r.site_domain = d.site_domain)"
            " FROM knowledge.documents d"
            " LEFT JOIN knowledge.document_snapshots s ON s.document_id = d.id"
            " WHERE NOT d.is_deleted GROUP BY d.site_domain ORDER BY d.site_domain")
        return [{"site_domain": r[0], "pages": int(r[1]), "last_checked": _iso(r[4] or r[2]),
                 "last_changed": _iso(r[3])} for r in rows]

    def watched_pages(self, site: str | None, since: Any, limit: int) -> list[dict[str, Any]]:
        """Pages with a kept version, the most recently changed first (``since``: changed since then)."""
        rows = self._all(
            "SELECT * FROM (SELECT d.id, d.site_domain, d.canonical_url, d.title, d.last_fetched_at,"
            "  (SELECT max(s.created_at) FROM knowledge.document_snapshots s WHERE s.document_id = d.id) AS changed,"
            "  (SELECT count(*) FROM knowledge.document_snapshots s WHERE s.document_id = d.id) AS versions"
            "  FROM knowledge.documents d WHERE NOT d.is_deleted"
            "  AND (CAST(:s AS text) IS NULL OR d.site_domain = :s)) p"
            " WHERE p.changed IS NOT NULL AND (CAST(:t AS timestamptz) IS NULL OR p.changed >= :t)"
            " ORDER BY p.changed DESC, p.canonical_url LIMIT :n", {"s": site, "t": since, "n": limit})
        return [{"id": str(r[0]), "site_domain": r[1], "url": r[2], "title": r[3], "last_checked": _iso(r[4]),
                 "last_changed": _iso(r[5]), "versions": int(r[6])} for r in rows]
