"""Citations and canonical-text reads: cite a quote, re-verify it, check it for drift, slice stored text.

A citation's id is derived from what it binds (snapshot and byte range), so
citing the same words of the same version twice gives the same citation.
Canonical text is read as the exact UTF-8 bytes stored (``convert_to``), the
bytes its BLAKE3 text hash names.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from gleaner.errors import InvalidInput
from gleaner.provenance.citations import Citation, find
from gleaner.provenance.quotes import QuoteRefusal
from gleaner.provenance.verification import (
    CitedSpan,
    CurrentText,
    DocumentNow,
    Drift,
    SnapshotLink,
    Verdict,
    drift,
    verify,
)
from gleaner.store.backends.sqlstore import SqlStore

_CITATION_NAMESPACE = uuid.UUID("5b0f5d2e-3c1f-4f57-9a51-6c1e1d3a0c15")
_CITATION_COLUMNS = ("id, site_domain, document_id, snapshot_id, version, text_hash, span_start, span_end, quote,"
                     " erased_at IS NOT NULL")


class AmbiguousUrl(InvalidInput):
    """A URL known under several sites and no --site-domain to choose (exit 2 in the CLI)."""

    def __init__(self, url: str, sites: list[str]) -> None:
        super().__init__(f"{url} is known under several sites: {', '.join(sites)}; name one with --site-domain")
        self.sites = sites


@dataclass(frozen=True, slots=True)
class Refused:
    """A quote that cannot be cited, and why."""

    refusal: QuoteRefusal


class CitationStore(SqlStore):
    def document_at(self, canonical_url: str, site_domain: str | None = None) -> dict[str, Any] | None:
        """The document at a URL (in the given site); AmbiguousUrl when several sites know it."""
        rows = self._all(
            "SELECT id, site_domain, current_snapshot_id, is_deleted FROM knowledge.documents"
            " WHERE canonical_url = :u AND (CAST(:s AS text) IS NULL OR site_domain = :s)"
            " ORDER BY site_domain",
            {"u": canonical_url, "s": site_domain},
        )
        if len(rows) > 1:
            raise AmbiguousUrl(canonical_url, [str(r[1]) for r in rows])
        if not rows:
            return None
        r = rows[0]
        return {"id": str(r[0]), "site_domain": r[1], "current_snapshot_id": str(r[2]) if r[2] else None,
                "is_deleted": bool(r[3])}

    def current_text(self, document_id: str) -> CurrentText | None:
        """The canonical text of the document's current version, if ingest made it."""
        row = self._first(
            "SELECT s.id, s.version, t.text_hash, convert_to(c.body, 'UTF8')"
            " FROM knowledge.documents d"
            " JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
            " JOIN knowledge.snapshot_texts t ON t.snapshot_id = s.id"
            " JOIN knowledge.canonical_texts c ON c.text_hash = t.text_hash WHERE d.id = :d",
            {"d": document_id},
        )
        if row is None:
            return None
        return CurrentText(str(row[0]), int(row[1]), str(row[2]), bytes(row[3]))

    def cite(self, document: dict[str, Any], quote: str) -> CitedSpan | Refused:
        """Bind a quote to the exact bytes of the document's current version, or say why not."""
        current = None if document["is_deleted"] else self.current_text(document["id"])
        if current is None:
            return Refused(QuoteRefusal.NOT_IN_TEXT)
        found = find(current.body.decode("utf-8"), quote)
        if not isinstance(found, Citation):
            return Refused(found)
        citation_id = str(uuid.uuid5(_CITATION_NAMESPACE, f"{current.snapshot_id}:{found.start}:{found.end}"))
        self._run(
            "INSERT INTO knowledge.citations (id, site_domain, document_id, snapshot_id, version,"
            " text_hash, span_start, span_end, quote) VALUES (:i, :s, :d, :sn, :v, :h, :a, :b, :q)"
            " ON CONFLICT (id) DO NOTHING",
            {"i": citation_id, "s": document["site_domain"], "d": document["id"], "sn": current.snapshot_id,
             "v": current.version, "h": current.text_hash, "a": found.start, "b": found.end, "q": found.text},
        )
        stored = self.citation(citation_id)
        assert stored is not None
        return stored

    def citation(self, citation_id: str) -> CitedSpan | None:
        try:
            uuid.UUID(citation_id)
        except ValueError:
            return None
        row = self._first(
            f"SELECT {_CITATION_COLUMNS} FROM knowledge.citations WHERE id = :i",
            {"i": citation_id},
        )
        if row is None:
            return None
        return CitedSpan(str(row[0]), row[1], str(row[2]), str(row[3]) if row[3] else None, int(row[4]), row[5],
                         int(row[6]), int(row[7]), row[8], bool(row[9]))

    def text_bytes(self, text_hash: str) -> bytes | None:
        body = self._scalar(
            "SELECT convert_to(body, 'UTF8') FROM knowledge.canonical_texts"
            " WHERE text_hash = :h",
            {"h": text_hash},
        )
        return None if body is None else bytes(body)

    def workspace_text_bytes(self, text_hash: str, workspace_id: str) -> bytes | None:
        """A canonical text of a reference its workspace's feed brought (any version of that page), else None."""
        body = self._scalar(
            "SELECT convert_to(c.body, 'UTF8') FROM knowledge.canonical_texts c WHERE c.text_hash = :h"
            " AND EXISTS (SELECT 1 FROM knowledge.snapshot_texts t"
            "  JOIN knowledge.document_snapshots s ON s.id = t.snapshot_id"
            "  JOIN knowledge.reference_items ri ON ri.source_document_id = s.document_id"
            "  JOIN knowledge.feed_articles fa ON fa.reference_item_id = ri.id"
            "  WHERE t.text_hash = c.text_hash AND fa.workspace_id = :w)",
            {"h": text_hash, "w": workspace_id},
        )
        return None if body is None else bytes(body)

    def verify_citation(self, cited: CitedSpan) -> Verdict:
        link = None
        if cited.snapshot_id is not None:
            row = self._first(
                "SELECT s.document_id, t.text_hash FROM knowledge.document_snapshots s"
                " LEFT JOIN knowledge.snapshot_texts t ON t.snapshot_id = s.id WHERE s.id = :s",
                {"s": cited.snapshot_id},
            )
            link = SnapshotLink(str(row[0]), row[1]) if row is not None else None
        body = self.text_bytes(cited.text_hash) if cited.text_hash else None
        return verify(cited, link, body)

    def drift_of(self, cited: CitedSpan) -> tuple[Verdict, Drift]:
        verdict = self.verify_citation(cited)
        row = self._first(
            "SELECT d.is_deleted, d.status::text,"
            " (SELECT c.fetch_status FROM knowledge.crawl_page_decisions c"
            "   WHERE c.document_id = d.id AND c.fetch_outcome IS NOT NULL"
            "   AND c.fetch_outcome <> 'not-modified' ORDER BY c.fetched_at DESC NULLS LAST LIMIT 1)"
            " FROM knowledge.documents d WHERE d.id = :d",
            {"d": cited.document_id},
        )
        now = DocumentNow(bool(row[0]), str(row[1]), row[2]) if row is not None else None
        current = self.current_text(cited.document_id) if now is not None and not now.deleted else None
        return verdict, drift(cited, verdict, now, current)
