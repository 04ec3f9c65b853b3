"""The snapshot stage's writes: a new document version where the content hash changed, in one transaction.

Versions are immutable and keyed by (document, content hash): content that goes
back to an earlier version points at that snapshot again. Each new current version
records its change event (document.new / document.changed) in the same transaction. The run's ledger row
records the outcome once, so a redelivered message is reported as a duplicate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from gleaner.changes.events import Change, EventType
from gleaner.store.backends.sqlstore import SqlStore, json_rows, text
from gleaner.store.ledger.records import SnapshotInput, SnapshotResult
from gleaner.store.notifications.events import record_changes


class SnapshotStore(SqlStore):
    def apply_snapshots(self, run_id: str | None, pages: Sequence[SnapshotInput],
                        meta: dict[str, Any]) -> list[SnapshotResult]:
        """Version each page whose content hash differs from its current snapshot, in one transaction.

        Documents are locked in id order (no deadlock between racing deliveries or concurrent runs of a
        site), then read afresh; a page whose ledger row
        already has a snapshot outcome for this run is reported as a duplicate and left alone.
        """
        if not pages:
            return []
        ids = sorted({p.document_id for p in pages})
        results: list[SnapshotResult] = []
        with self._tx() as conn:
            # Lock first, read second: a statement that waited for the lock sees the locked row as the
            # other delivery left it but its joined rows as they were when it started (FACTS.md), and
            # would take a version the other delivery just wrote for a change to make again.
            conn.execute(text("SELECT 1 FROM knowledge.documents WHERE id = ANY(CAST(:ids AS uuid[]))"
                                 " ORDER BY id FOR UPDATE"), {"ids": ids})
            state = {
                str(r[0]): (r[1], r[2], r[3], r[4])
                for r in conn.execute(
                    text(
                        "SELECT d.id, s.content_hash, d.current_snapshot_id, c.snapshot_outcome::text,"
                        " c.produced_snapshot_id"
                        " FROM knowledge.documents d"
                        " LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
                        " LEFT JOIN knowledge.crawl_page_decisions c ON c.document_id = d.id AND c.run_id = :r"
                        " WHERE d.id = ANY(CAST(:ids AS uuid[]))"
                    ),
                    {"ids": ids, "r": run_id},
                ).all()
            }
            unchanged: list[str] = []
            versioned: list[tuple[SnapshotInput, str]] = []
            for page in pages:
                current_hash, current_id, done, produced = state.get(page.document_id, (None, None, None, None))
                if run_id is not None and done is not None:
                    # Already settled by an earlier delivery; report what it produced so a lost
                    # snapshots-written message is sent again (ingest is idempotent).
                    results.append(SnapshotResult(page.document_id, "duplicate", str(produced) if produced else None))
                    continue
                if current_hash == page.content_hash or (page.same_as is not None and page.same_as == current_hash):
                    unchanged.append(page.document_id)
                    results.append(SnapshotResult(page.document_id, "unchanged", str(current_id)))
                    continue
                outcome = "new" if current_id is None else "changed"
                versioned.append((page, outcome))
                results.append(SnapshotResult(page.document_id, outcome, None))
            if len({page.document_id for page, _ in versioned}) == len(versioned):
                ids_by_doc = self._insert_snapshots(conn, run_id, versioned, meta)
            else:  # one document twice in one message: versions must follow each other, one at a time
                ids_by_doc = {}
                for one in versioned:
                    ids_by_doc.update(self._insert_snapshots(conn, run_id, [one], meta))
            results = [SnapshotResult(r.document_id, r.outcome, ids_by_doc[r.document_id])
                       if r.outcome in ("new", "changed") else r for r in results]
            changed = [r for r in results if r.outcome in ("new", "changed")]
            files = [p.document_id for p, _ in versioned if p.original_key is not None]
            if files:  # a document (a PDF) is a file in the ADR's document kinds
                conn.execute(text("UPDATE knowledge.documents SET kind = 'file' WHERE id = ANY(CAST(:d AS uuid[]))"
                                     " AND kind <> 'file'"), {"d": files})
            if changed:
                # A first version makes the page active; other statuses (failed, stale, superseded, blocked)
                # are the lifecycle's (gleaner.changes.lifecycle), settled when the page was fetched.
                # The validators the fetch answered with belong to this version: they move with it.
                conn.execute(
                    text(
                        "UPDATE knowledge.documents d SET current_snapshot_id = t.s,"
                        " status = CASE WHEN d.status IN ('discovered', 'failed') THEN 'active'"
                        "   ELSE d.status END,"
                        " status_reason = CASE WHEN d.status IN ('discovered', 'failed') THEN NULL"
                        "   ELSE d.status_reason END,"
                        " last_seen_at = now(), last_fetched_at = now(), updated_at = now(),"
                        " http_etag = CASE WHEN c.document_id IS NULL THEN d.http_etag ELSE c.fetched_etag END,"
                        " http_last_modified = CASE WHEN c.document_id IS NULL THEN d.http_last_modified"
                        "   ELSE c.fetched_last_modified END"
                        " FROM unnest(CAST(:d AS uuid[]), CAST(:s AS uuid[])) AS t(d, s)"
                        " LEFT JOIN knowledge.crawl_page_decisions c ON c.run_id = CAST(:r AS uuid)"
                        "   AND c.document_id = t.d AND c.fetch_outcome = 'fetched'"
                        " WHERE d.id = t.d"
                    ),
                    {"d": [r.document_id for r in changed], "s": [r.snapshot_id for r in changed], "r": run_id},
                )
                previous = {doc: str(st[1]) if st[1] else None for doc, st in state.items()}
                # Gate 2: a blocked document is versioned but never announced as changed (operator/rules.py).
                blocked = {str(d) for d in conn.execute(
                    text("SELECT id FROM knowledge.documents WHERE id = ANY(CAST(:d AS uuid[]))"
                            " AND status = 'blocked'"), {"d": [r.document_id for r in changed]}).scalars()}
                record_changes(conn, [
                    Change(document_id=r.document_id, type=EventType.NEW if r.outcome == "new" else EventType.CHANGED,
                           run_id=run_id, snapshot_id=r.snapshot_id, previous_snapshot_id=previous.get(r.document_id))
                    for r in changed if r.document_id not in blocked])
            if unchanged:
                conn.execute(
                    text("UPDATE knowledge.documents SET last_seen_at = now() WHERE id = ANY(CAST(:d AS uuid[]))"),
                    {"d": unchanged},
                )
            settled = [r for r in results if r.outcome != "duplicate"]
            if run_id is not None and settled:
                conn.execute(
                    text(
                        "UPDATE knowledge.crawl_page_decisions c"
                        " SET snapshot_outcome = CAST(t.o AS knowledge.snapshot_outcome),"
                        " produced_snapshot_id = CASE WHEN t.o = 'unchanged' THEN NULL ELSE t.s END"
                        " FROM unnest(CAST(:d AS uuid[]), CAST(:o AS text[]), CAST(:s AS uuid[])) AS t(d, o, s)"
                        " WHERE c.run_id = :r AND c.document_id = t.d AND c.snapshot_outcome IS NULL"
                    ),
                    {"r": run_id, "d": [r.document_id for r in settled], "o": [r.outcome for r in settled],
                     "s": [r.snapshot_id for r in settled]},
                )
        return results

    def current_for_ignore(self, document_ids: Sequence[str]) -> dict[str, tuple[str, str | None, str | None,
                                                                               dict[str, Any] | None]]:
        """document id -> (path, current content hash, its content.md key, its ``ignored`` record)."""
        with self.engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT d.id, d.path, s.content_hash, s.processed_markdown_ref, s.extraction_metadata->'ignored'"
                " FROM knowledge.documents d LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
                " WHERE d.id = ANY(CAST(:ids AS uuid[]))"), {"ids": list(document_ids)}).all()
        return {str(r[0]): (r[1], r[2], r[3], r[4]) for r in rows}

    @staticmethod
    def _insert_snapshots(conn: Connection, run_id: str | None, pages: Sequence[tuple[SnapshotInput, str]],
                          meta: dict[str, Any]) -> dict[str, str]:
        """One INSERT for every new version of a message (each document at most once); document id -> snapshot id.

        The documents are locked by the caller, so max(version) + 1 cannot race.
        """
        if not pages:
            return {}
        rows = [{"d": page.document_id, "h": page.content_hash, "ck": page.content_key, "rk": page.raw_key,
                 "ok": page.original_key, "m": _metadata(page, meta),
                 "fs": page.fetch_status, "ft": page.fetch_time_ms, "bs": page.byte_size,
                 "cs": "hash_changed" if outcome == "changed" else None, "sb": page.source_blake3,
                 "rm": page.render_mode}
                for page, outcome in pages]
        params = {"rows": json_rows(rows), "r": run_id}
        inserted = {str(d): str(i) for i, d in conn.execute(
            text(
                "INSERT INTO knowledge.document_snapshots (document_id, version, content_hash,"
                " processed_markdown_ref, raw_markdown_ref, original_ref, extraction_metadata, render_mode,"
                " fetch_status, fetch_time_ms, byte_size, change_signal, produced_by_run_id, source_blake3)"
                " SELECT t.d, COALESCE((SELECT max(s.version) FROM knowledge.document_snapshots s"
                "   WHERE s.document_id = t.d), 0) + 1, t.h, t.ck, t.rk, t.ok, t.m,"
                " CAST(t.rm AS knowledge.render_mode), t.fs, t.ft, t.bs,"
                " CAST(t.cs AS knowledge.change_signal), CAST(:r AS uuid), t.sb"
                " FROM json_to_recordset(CAST(:rows AS json))"
                "   AS t(d uuid, h text, ck text, rk text, ok text, m jsonb, fs int, ft int, bs int, cs text, sb text,"
                " rm text)"
                " ON CONFLICT (document_id, content_hash) DO NOTHING RETURNING id, document_id"
            ),
            params,
        )}
        if len(inserted) < len(rows):
            # Content back to an earlier version: point at that snapshot again (bodies are immutable).
            inserted.update({str(d): str(i) for i, d in conn.execute(
                text(
                    "SELECT s.id, s.document_id FROM knowledge.document_snapshots s"
                    " JOIN json_to_recordset(CAST(:rows AS json)) AS t(d uuid, h text)"
                    " ON s.document_id = t.d AND s.content_hash = t.h"
                ),
                {"rows": json_rows([{"d": r["d"], "h": r["h"]} for r in rows if r["d"] not in inserted])},
            )})
        return inserted


def _metadata(page: SnapshotInput, meta: dict[str, Any]) -> dict[str, Any]:
    """A version's extraction_metadata: the run's, the raw.md hash, the extractor, a document's mime type,
    and the ignore rules it was compared under."""
    metadata = {**meta, "raw_content_hash": page.raw_hash, "extractor": page.extractor}
    if page.mime_type:
        metadata["mime_type"] = page.mime_type
    if page.ignored:
        metadata["ignored"] = page.ignored
    return metadata
