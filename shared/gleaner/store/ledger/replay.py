"""A replay run in PostgreSQL: what a past run's pages were stored as, and the replay's own run and ledger.

What a replay takes and leaves is :mod:`gleaner.stages.replay`'s decision; this reads the inputs
and opens the run in one transaction, already ``scraping`` with every page it replays settled as
read from the store, so the snapshot stage's writes and ``try_finish_run`` end it as any run ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from gleaner.store.backends.sqlstore import SqlStore, json_rows, json_value


class ReplayStore(SqlStore):
    def replay_inputs(self, run_id: str) -> list[dict[str, Any]]:
        """Each page the run got a body for (fetched or not modified), with the version it saw: the one it
        produced, else the one with the content hash it fetched, else the newest one kept at its end."""
        rows = self._all(
            "SELECT c.document_id, d.canonical_url, d.current_snapshot_id, d.is_deleted, s.id, s.version,"
            " s.content_hash, s.processed_markdown_ref, s.original_ref,"
            " s.extraction_metadata->>'raw_content_hash', s.extraction_metadata->>'extractor',"
            " s.extraction_metadata->>'mime_type'"
            " FROM knowledge.crawl_page_decisions c JOIN knowledge.crawl_runs r ON r.id = c.run_id"
            " JOIN knowledge.documents d ON d.id = c.document_id"
            " LEFT JOIN LATERAL (SELECT * FROM knowledge.document_snapshots s WHERE s.document_id = c.document_id"
            "   AND (s.id = c.produced_snapshot_id OR (c.produced_snapshot_id IS NULL AND ("
            "     (c.fetched_content_hash IS NOT NULL AND s.content_hash = c.fetched_content_hash)"
            "     OR (c.fetched_content_hash IS NULL AND s.created_at <= COALESCE(r.finished_at, now())))))"
            "   ORDER BY s.version DESC LIMIT 1) s ON TRUE"
            " WHERE c.run_id = :r AND c.fetch_outcome IN ('fetched', 'not-modified') ORDER BY d.canonical_url",
            {"r": run_id},
        )
        keys = ("document_id", "url", "current_snapshot_id", "deleted", "snapshot_id", "version", "content_hash",
                "content_ref", "original_ref", "raw_hash", "extractor", "mime_type")
        return [{k: (str(v) if k.endswith("_id") and v is not None else v) for k, v in zip(keys, r, strict=True)}
                for r in rows]

    def open_replay_run(self, run_id: str, source_run_id: str, site: str, source_host_id: str | None,
                        target_url: str, triggered_by: str, pages: Sequence[dict[str, Any]],
                        left_out: Sequence[dict[str, str]], worker: str | None) -> None:
        """The replay's run (``reprocess_from_snapshot``) and a ledger row per replayed page, read from the store."""
        options = {"replay_of": source_run_id, "left_out": list(left_out)}
        with self._tx() as conn:
            conn.execute(
                sa.text("INSERT INTO knowledge.crawl_runs (id, site_domain, source_host_id, target_url, options, mode,"
                        " triggered_by, status, started_at, heartbeat_at, worker, batches_total, urls_discovered,"
                        " urls_included)"
                        " VALUES (:id, :s, :h, :t, CAST(:o AS jsonb), 'reprocess_from_snapshot',"
                        " CAST(:tb AS knowledge.crawl_trigger), 'scraping', now(), now(), :w, :b, :n, :n)"),
                {"id": run_id, "s": site, "h": source_host_id, "t": target_url, "o": json_value(options),
                 "tb": triggered_by, "w": worker, "b": 1 if pages else 0, "n": len(pages)})
            if pages:
                conn.execute(
                    sa.text(
                        "INSERT INTO knowledge.crawl_page_decisions (run_id, document_id, decision, decision_source,"
                        " decision_reason, depth, discovered_via, batch_no, fetch_outcome, fetch_reason, fetched_at,"
                        " fetched_content_hash, fetched_raw_hash, extractor, fetch_status)"
                        " SELECT :r, t.d, 'include', 'system', :why, 0, 'replay', 0, 'fetched', t.reason, now(),"
                        " t.h, t.rh, t.ex, 200"
                        " FROM json_to_recordset(CAST(:rows AS json))"
                        " AS t(d uuid, reason text, h text, rh text, ex text)"
                    ),
                    {"r": run_id, "why": f"replay of run {source_run_id}",
                     "rows": json_rows([{"d": p["document_id"], "reason": p["reason"], "h": p["content_hash"],
                                         "rh": p["raw_hash"], "ex": p["extractor"]} for p in pages])})
