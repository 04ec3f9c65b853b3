"""Reads for the CLI, the runner and ingest: run summaries, the document tree, snapshots, canonical texts.

Nothing here writes; each method reads on one connection and returns plain
dicts and tuples (what the CLI prints as JSON and ingest iterates).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from gleaner.operator.runwarnings import run_warnings
from gleaner.store.backends.sqlstore import SqlStore

# A URL's status in a run's listing: its fetch outcome; an included URL without one is `pending`
# while the run is active and `not-attempted` once it stopped (its batch never ran: the run failed,
# was cancelled or interrupted first; docs/failures.md). Needs ``c`` (the ledger) and ``r`` (the run).
URL_STATUS = (
    "COALESCE(c.fetch_outcome::text, CASE WHEN c.decision <> 'include' THEN c.decision::text"
    " WHEN r.status IN ('queued', 'mapping', 'mapped', 'sampling', 'scraping') THEN 'pending'"
    " ELSE 'not-attempted' END)"
)
URL_REASON = (
    "COALESCE(c.fetch_reason, CASE WHEN c.decision <> 'include' THEN c.decision_reason"
    " WHEN r.status NOT IN ('queued', 'mapping', 'mapped', 'sampling', 'scraping')"
    " THEN 'the run ended ' || r.status::text || ' before this URL was fetched' END)"
)


class ReadStore(SqlStore):
    # -- runs -----------------------------------------------------------------------------------

    def run_summary(self, run_id: str) -> dict[str, Any] | None:
        row = self._first(
            "SELECT id, site_domain, status::text, urls_discovered, urls_included, urls_excluded,"
            " urls_scraped, urls_not_modified, urls_failed, snapshots_new, snapshots_changed,"
            " snapshots_unchanged, target_url, started_at, finished_at, error, urls_refused, urls_limited,"
            " urls_beyond_limit, options->>'limit', options->>'replay_of'"
            " FROM knowledge.crawl_runs WHERE id = :r",
            {"r": run_id},
        )
        if row is None:
            return None
        return {
            "run_id": str(row[0]),
            "site_domain": row[1],
            "status": row[2],
            "discovered": row[3],
            "included": row[4],
            "excluded": row[5],
            "fetched": row[6],
            "not_modified": row[7],
            "failed": row[8],
            "refused": row[16],
            "limited": row[17],
            "beyond_limit": row[18],
            "limit": int(row[19]) if row[19] is not None else None,
            # A replay (stages/replay.py) fetched nothing: its "fetched" pages were read from the store.
            "replay_of": row[20],
            "snapshots": {"new": row[9], "changed": row[10], "unchanged": row[11]},
            "target_url": row[12],
            "started_at": row[13].isoformat() if row[13] else None,
            "finished_at": row[14].isoformat() if row[14] else None,
            "error": row[15],
            "warnings": run_warnings(row[1], str(row[0]), row[2], row[3] or 0, row[5] or 0,
                                     (row[6] or 0) + (row[7] or 0)),
        }

    def outcome_breakdown(self, run_id: str) -> dict[str, int]:
        rows = self._all(
            "SELECT CASE WHEN c.decision = 'include' OR c.fetch_outcome IS NOT NULL THEN "
            f"{URL_STATUS} ELSE 'not-fetched (' || c.decision::text || ')' END, count(*)"
            " FROM knowledge.crawl_page_decisions c JOIN knowledge.crawl_runs r ON r.id = c.run_id"
            " WHERE c.run_id = :r GROUP BY 1 ORDER BY 1",
            {"r": run_id},
        )
        return {str(k): int(v) for k, v in rows}

    def run_urls(self, run_id: str, status: str | None = None) -> list[dict[str, Any]]:
        """Each URL of a run with its status (the fetch outcome, else why it was not fetched) and reason."""
        rows = self._all(
            f"SELECT * FROM (SELECT d.canonical_url, {URL_STATUS} AS status, {URL_REASON},"
            " c.fetch_status, c.snapshot_outcome::text, c.decision::text"
            " FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id"
            " JOIN knowledge.crawl_runs r ON r.id = c.run_id WHERE c.run_id = :r) u"
            " WHERE CAST(:st AS text) IS NULL OR u.status = :st ORDER BY 2, 1",
            {"r": run_id, "st": status},
        )
        return [{"url": r[0], "status": r[1], "reason": r[2], "http_status": r[3], "snapshot": r[4],
                 "decision": r[5]} for r in rows]

    def recent_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        rows = self._all("SELECT id FROM knowledge.crawl_runs ORDER BY created_at DESC LIMIT :n", {"n": limit})
        return [s for s in (self.run_summary(str(r[0])) for r in rows) if s is not None]

    # -- documents, snapshots and their texts ---------------------------------------------------

    def documents_tree(self, site: str) -> list[dict[str, Any]]:
        rows = self._all(
            # An erased page stays listed, by its erased form (store/documents/erasure.py), as erased.
            "SELECT d.path, CASE WHEN d.is_deleted AND d.skip_reason = 'erased' THEN 'erased'"
            " ELSE d.status::text END, d.scrape_policy::text, d.skip_reason, s.version, d.canonical_url"
            " FROM knowledge.documents d"
            " LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
            " WHERE d.site_domain = :s AND (NOT d.is_deleted OR d.skip_reason = 'erased') ORDER BY d.path",
            {"s": site},
        )
        return [
            {"path": r[0], "status": r[1], "scrape_policy": r[2], "skip_reason": r[3], "version": r[4],
             "url": r[5]}
            for r in rows
        ]

    def document_by_url(self, canonical_url: str) -> dict[str, Any] | None:
        row = self._first(
            "SELECT id, site_domain, canonical_url, path, status::text, scrape_policy::text, title,"
            " current_snapshot_id FROM knowledge.documents WHERE canonical_url = :u"
            " ORDER BY updated_at DESC LIMIT 1",
            {"u": canonical_url},
        )
        if row is None:
            return None
        return dict(zip(("id", "site_domain", "canonical_url", "path", "status", "scrape_policy", "title",
                         "current_snapshot_id"), (str(row[0]), *row[1:7], str(row[7]) if row[7] else None),
                        strict=True))

    def documents_by_url(self, canonical_url: str, site: str | None = None) -> list[dict[str, Any]]:
        """Every document holding this URL (one per site), or the one of ``site``."""
        rows = self._all(
            "SELECT id, site_domain, canonical_url, path, status::text, scrape_policy::text, title,"
            " current_snapshot_id, status_reason FROM knowledge.documents WHERE canonical_url = :u"
            " AND (CAST(:s AS text) IS NULL OR site_domain = :s) ORDER BY site_domain",
            {"u": canonical_url, "s": site},
        )
        keys = ("id", "site_domain", "canonical_url", "path", "status", "scrape_policy", "title",
                "current_snapshot_id", "status_reason")
        return [dict(zip(keys, (str(r[0]), *r[1:7], str(r[7]) if r[7] else None, r[8]), strict=True))
                for r in rows]

    def document_ids_by_url(self, site: str, canonical_urls: list[str]) -> dict[str, str]:
        """canonical URL -> document id for the given URLs known under ``site``."""
        rows = self._all(
            "SELECT canonical_url, id FROM knowledge.documents WHERE site_domain = :s"
            " AND canonical_url = ANY(CAST(:u AS text[]))",
            {"s": site, "u": canonical_urls},
        )
        return {str(r[0]): str(r[1]) for r in rows}

    def current_versions(self, site: str) -> list[dict[str, Any]]:
        """The active documents of a site with their current snapshot (what ``export`` writes)."""
        return self.current_versions_after(site, None, None)

    def current_versions_after(self, site: str, after_url: str | None, limit: int | None) -> list[dict[str, Any]]:
        """``current_versions`` from the first URL past ``after_url``, at most ``limit`` of them: a caller
        walks a large site a page at a time, each page its own short read (keyset, so no offset scan)."""
        rows = self._all(
            "SELECT d.canonical_url, s.version, s.content_hash, s.created_at, s.processed_markdown_ref,"
            " s.raw_markdown_ref, d.id, d.title, t.text_hash FROM knowledge.documents d"
            " JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
            " LEFT JOIN knowledge.snapshot_texts t ON t.snapshot_id = s.id"
            " WHERE d.site_domain = :s AND d.status = 'active' AND NOT d.is_deleted"
            " AND d.canonical_url IS NOT NULL AND (CAST(:after AS text) IS NULL OR d.canonical_url > :after)"
            " ORDER BY d.canonical_url LIMIT :limit",
            {"s": site, "after": after_url, "limit": limit},
        )
        return [{"url": r[0], "version": r[1], "content_hash": r[2], "fetched_at": r[3].isoformat(),
                 "content_ref": r[4], "raw_ref": r[5], "document_id": str(r[6]), "title": r[7],
                 "text_hash": r[8]} for r in rows]

    def spans_of_text(self, text_hash: str) -> list[tuple[int, int, str]]:
        """The span ledger of one canonical text: (start, end, kind) in order."""
        rows = self._all(
            "SELECT span_start, span_end, kind FROM knowledge.text_spans WHERE text_hash = :h ORDER BY ordinal",
            {"h": text_hash},
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def erased_forms_of(self, site: str) -> list[str]:
        """The erased forms (store/documents/erasure.py) of the site's erased pages."""
        rows = self._all("SELECT canonical_url FROM knowledge.documents WHERE site_domain = :s AND is_deleted"
                         " AND skip_reason = 'erased' AND canonical_url IS NOT NULL ORDER BY 1", {"s": site})
        return [str(r[0]) for r in rows]

    def snapshots_of(self, document_id: str) -> list[dict[str, Any]]:
        rows = self._all(
            "SELECT id, version, content_hash, processed_markdown_ref, raw_markdown_ref, change_signal::text,"
            " produced_by_run_id, created_at, fetch_status, byte_size, COALESCE(render_mode::text, 'plain_fetch')"
            " FROM knowledge.document_snapshots WHERE document_id = :d ORDER BY version DESC",
            {"d": document_id},
        )
        keys = ("id", "version", "content_hash", "content_ref", "raw_ref", "change_signal", "run_id", "created_at",
                "fetch_status", "byte_size", "render_mode")
        return [dict(zip(keys, (str(r[0]), *r[1:6], str(r[6]) if r[6] else None, r[7].isoformat(), *r[8:]),
                         strict=True)) for r in rows]

    def ingest_candidates(self, snapshot_ids: Iterable[str]) -> list[tuple[str, str, str]]:
        """(snapshot_id, processed_markdown_ref, content_hash) of the snapshots not yet ingested that ingest
        may take (a composite's, or an unblocked, undeleted document's: gate 2), in one read."""
        ids = list(snapshot_ids)
        if not ids:
            return []
        rows = self._all(
            "SELECT s.id, s.processed_markdown_ref, s.content_hash FROM knowledge.document_snapshots s"
            " LEFT JOIN knowledge.snapshot_texts t ON t.snapshot_id = s.id"
            " LEFT JOIN knowledge.documents d ON d.id = s.document_id"
            " WHERE s.id = ANY(CAST(:ids AS uuid[])) AND t.snapshot_id IS NULL"
            " AND (s.composite_document_id IS NOT NULL OR (d.status <> 'blocked' AND NOT d.is_deleted))"
            " ORDER BY s.id",
            {"ids": ids},
        )
        return [(str(r[0]), r[1], r[2]) for r in rows]

    def texts_of_document(self, document_id: str) -> list[tuple[int, str, str, bool]]:
        """(version, snapshot_id, text_hash, is_current) of every ingested version, newest first."""
        rows = self._all(
            "SELECT s.version, s.id, t.text_hash, s.id = d.current_snapshot_id"
            " FROM knowledge.document_snapshots s JOIN knowledge.snapshot_texts t ON t.snapshot_id = s.id"
            " JOIN knowledge.documents d ON d.id = s.document_id WHERE s.document_id = :d"
            " ORDER BY s.version DESC",
            {"d": document_id},
        )
        return [(int(r[0]), str(r[1]), str(r[2]), bool(r[3])) for r in rows]

    def canonical_text(self, text_hash: str) -> tuple[str, list[tuple[int, int, str]]] | None:
        with self.engine.connect() as conn:
            body = conn.execute(sa.text("SELECT body FROM knowledge.canonical_texts WHERE text_hash = :h"),
                                {"h": text_hash}).scalar()
            if body is None:
                return None
            spans = conn.execute(
                sa.text("SELECT span_start, span_end, kind FROM knowledge.text_spans WHERE text_hash = :h"
                        " ORDER BY ordinal"),
                {"h": text_hash},
            ).all()
        return str(body), [(int(s), int(e), str(k)) for s, e, k in spans]
