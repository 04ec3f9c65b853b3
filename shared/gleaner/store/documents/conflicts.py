"""document_conflicts (seed 003): finding candidates by fingerprint, recording findings, the operator's triage.

Candidates for a text are the current versions of the site's other documents
with the same text hash or a SimHash band in common: four indexed 16-bit bands
find every fingerprint within Hamming distance 3 without scanning the site.
A finding is recorded once per (a, b, detector_version); recording it again
changes nothing, whatever the conflict's status became meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from gleaner.changes.events import Change, EventType
from gleaner.errors import InvalidInput
from gleaner.provenance.conflicts import ConflictStatus, Finding, TextFingerprint
from gleaner.provenance.simhash import bands, from_signed
from gleaner.store.backends.sqlstore import SqlStore, json_rows, json_value
from gleaner.store.notifications.events import record_changes

_NO_BAND = -1  # a text with no words has SimHash 0: it matches nothing by band


class ConflictStore(SqlStore):
    def fingerprints(self, snapshot_ids: Sequence[str]) -> list[tuple[str, TextFingerprint]]:
        """(site, fingerprint) of each document whose *current* version is one of these snapshots."""
        if not snapshot_ids:
            return []
        rows = self._all(
            # From the snapshots to their documents by primary key: documents.current_snapshot_id has no
            # index, and matching on it read the whole site once per batch.
            "SELECT d.site_domain, d.id, d.canonical_url, t.text_hash, c.simhash, d.created_at"
            " FROM unnest(CAST(:s AS uuid[])) AS q(id)"
            " JOIN knowledge.document_snapshots s ON s.id = q.id"
            " JOIN knowledge.documents d ON d.id = s.document_id AND d.current_snapshot_id = s.id"
            " JOIN knowledge.snapshot_texts t ON t.snapshot_id = s.id"
            " JOIN knowledge.canonical_texts c ON c.text_hash = t.text_hash"
            " WHERE NOT d.is_deleted ORDER BY d.id",
            {"s": list(snapshot_ids)},
        )
        return [(r[0], _fingerprint(r[1:])) for r in rows]

    def candidates(self, site: str, subjects: Sequence[TextFingerprint]) -> dict[str, list[TextFingerprint]]:
        """For each subject (by document id): the site's other current texts sharing its hash or a SimHash band."""
        if not subjects:
            return {}
        rows = []
        for s in subjects:
            b = bands(s.simhash) if s.simhash else (_NO_BAND,) * 4
            rows.append({"d": s.document_id, "h": s.text_hash, "b0": b[0], "b1": b[1], "b2": b[2], "b3": b[3]})
        # Two steps, each fenced so the planner cannot reorder it: the texts matching each subject (its
        # hash or a band: one BitmapOr over five indexes), then the current documents holding each of those
        # texts (three index lookups). Joined freely, the planner walks the whole site per subject
        # whenever its estimates are off, as they are on tables a first crawl is still filling.
        found = self._all(
            "WITH m AS MATERIALIZED ("
            "  SELECT q.d AS subject, c.text_hash, c.simhash"
            "  FROM json_to_recordset(CAST(:rows AS json)) AS q(d uuid, h text, b0 int, b1 int, b2 int, b3 int)"
            "  JOIN knowledge.canonical_texts c ON c.text_hash = q.h OR c.simhash_b0 = q.b0"
            "    OR c.simhash_b1 = q.b1 OR c.simhash_b2 = q.b2 OR c.simhash_b3 = q.b3)"
            " SELECT m.subject, x.id, x.canonical_url, m.text_hash, m.simhash, x.created_at"
            " FROM m CROSS JOIN LATERAL ("
            "  SELECT d.id, d.site_domain, d.canonical_url, d.created_at, d.is_deleted"
            "  FROM knowledge.snapshot_texts t"
            "  JOIN knowledge.document_snapshots s ON s.id = t.snapshot_id"
            "  JOIN knowledge.documents d ON d.id = s.document_id AND d.current_snapshot_id = s.id"
            "  WHERE t.text_hash = m.text_hash OFFSET 0) x"  # OFFSET 0: the filters below stay outside
            " WHERE x.site_domain = :site AND x.id <> m.subject AND NOT x.is_deleted",
            {"rows": json_rows(rows), "site": site},
        )
        out: dict[str, list[TextFingerprint]] = {s.document_id: [] for s in subjects}
        for r in found:
            out[str(r[0])].append(_fingerprint(r[1:]))
        return out

    def record_conflicts(self, site: str, findings: Sequence[Finding]) -> list[str]:
        """Record each finding once; the ids of the conflicts this call opened."""
        if not findings:
            return []
        rows = []
        for f in findings:
            a, b = f.ordered()
            rows.append({"a": a.document_id, "b": b.document_id, "t": str(f.conflict_type), "sev": str(f.severity),
                         "ea": f"{a.url} (text {a.text_hash})", "eb": f"{b.url} (text {b.text_hash})",
                         "det": json_value(f.details), "by": str(f.detected_by), "v": f.detector_version})
        subjects = {tuple(sorted((f.subject.document_id, f.other.document_id))): f.subject.document_id
                    for f in findings}
        with self._tx() as conn:
            opened = conn.execute(
                sa.text(
                    "INSERT INTO knowledge.document_conflicts (site_domain, entity_a_type, entity_a_id, entity_b_type,"
                    " entity_b_id, conflict_type, severity, evidence_a, evidence_b, details, detected_by,"
                    " detector_version)"
                    " SELECT :site, 'document', r.a, 'document', r.b, CAST(r.t AS knowledge.conflict_type),"
                    " CAST(r.sev AS knowledge.conflict_severity), r.ea, r.eb, CAST(r.det AS jsonb),"
                    " CAST(r.by AS knowledge.conflict_detector), r.v"
                    " FROM json_to_recordset(CAST(:rows AS json))"
                    "   AS r(a uuid, b uuid, t text, sev text, ea text, eb text, det text, by text, v text)"
                    " ORDER BY r.a, r.b ON CONFLICT DO NOTHING RETURNING id, entity_a_id, entity_b_id"
                ),
                {"site": site, "rows": json_rows(rows)},
            ).all()
            # One conflict.opened change event each, committed with the conflict (the outbox publishes it).
            record_changes(conn, [Change(document_id=subjects[(str(a), str(b))], type=EventType.CONFLICT_OPENED,
                                         cause=f"conflict:{i}") for i, a, b in opened])
        return [str(i) for i, _a, _b in opened]

    def list_conflicts(self, site: str, status: ConflictStatus | None = None) -> list[dict[str, Any]]:
        rows = self._all(
            "SELECT c.id, c.conflict_type::text, c.status::text, c.severity::text, c.detected_by::text,"
            " c.detector_version, c.entity_a_id, da.canonical_url, c.entity_b_id, db.canonical_url,"
            " c.details, c.created_at, c.updated_at, c.a_text_hash, c.a_start, c.a_end, c.b_text_hash, c.b_start,"
            " c.b_end, c.evidence_a, c.evidence_b, da.origin::text, db.origin::text"
            " FROM knowledge.document_conflicts c"
            " LEFT JOIN knowledge.documents da ON da.id = c.entity_a_id"
            " LEFT JOIN knowledge.documents db ON db.id = c.entity_b_id"
            " WHERE c.site_domain = :s AND (CAST(:st AS text) IS NULL OR c.status::text = :st)"
            " ORDER BY c.created_at, c.id",
            {"s": site, "st": str(status) if status else None},
        )
        # Each side's passage (a contradiction's: its text hash, byte range and quote; a duplicate has none).
        return [{"id": str(r[0]), "conflict_type": r[1], "status": r[2], "severity": r[3], "detected_by": r[4],
                 "detector_version": r[5],
                 "a": {"document_id": str(r[6]) if r[6] else None, "url": r[7], "origin": r[21],
                       **_passage(r[13], r[14], r[15], r[19])},
                 "b": {"document_id": str(r[8]) if r[8] else None, "url": r[9], "origin": r[22],
                       **_passage(r[16], r[17], r[18], r[20])},
                 "details": r[10], "created_at": r[11].isoformat(), "updated_at": r[12].isoformat()} for r in rows]

    def set_conflict_status(self, conflict_id: str, status: ConflictStatus) -> bool:
        """Move a conflict to the operator's status; False if there is no such conflict."""
        if status is ConflictStatus.OPEN:
            raise InvalidInput("a conflict is set to acknowledged, resolved or false_positive")
        row = self._write_first(
            "UPDATE knowledge.document_conflicts SET status = CAST(:st AS knowledge.conflict_status),"
            " updated_at = now(), resolved_at = CASE WHEN :st IN ('resolved', 'false_positive')"
            "   THEN now() ELSE NULL END WHERE id = CAST(:i AS uuid) RETURNING id",
            {"i": conflict_id, "st": str(status)},
        )
        return row is not None


def _passage(text_hash: str | None, start: int | None, end: int | None, quote: str | None) -> dict[str, Any]:
    if text_hash is None:
        return {}
    return {"text_hash": text_hash, "start": start, "end": end, "quote": quote}


def _fingerprint(row: Sequence[Any]) -> TextFingerprint:
    document_id, url, text_hash, simhash, created = row
    return TextFingerprint(str(document_id), url or "", str(text_hash),
                           from_signed(int(simhash)) if simhash is not None else None, created)
