"""The rows uploads and feedback own: their documents (identity by site and path) and ingest jobs.

A document is found or created by (site, canonical URL), the same unique key a page has; an
upload's "URL" is ``upload://{site}{path}`` and a feedback's ``feedback://{site}/{id}``
(gleaner.origins.identity), so every command that finds a page by its URL finds them too.
A job row says what was sent and what it became; it is written before the work and settled
after it, so a job that failed says why and one still running says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gleaner.store.backends.sqlstore import SqlStore, json_value
from gleaner.urls import url_hash


@dataclass(frozen=True, slots=True)
class DocumentIdentity:
    site_domain: str
    canonical_url: str
    path: str
    origin: str  # upload | feedback
    knowledge_type: str = "generic"
    tags: tuple[str, ...] = ()
    title: str | None = None
    source_url: str | None = None
    created_by: str | None = None


class ErasedDocument(Exception):
    """The document at this identity was erased: it is not brought back."""


class OriginStore(SqlStore):
    def ensure_document(self, ident: DocumentIdentity) -> str:
        """The document's id, created as ``discovered`` the first time (kind file for uploads)."""
        row = self._write_first(
            "INSERT INTO knowledge.documents (site_domain, kind, path, origin, knowledge_type, tags, source_url,"
            " canonical_url, url_hash, title, status, created_by)"
            " VALUES (:s, CAST(:k AS knowledge.document_kind), :p, CAST(:o AS knowledge.document_origin),"
            " CAST(:kt AS knowledge.knowledge_type), CAST(:tags AS text[]), :su, :cu, :uh, :t, 'discovered', :by)"
            " ON CONFLICT (site_domain, canonical_url) WHERE canonical_url IS NOT NULL"
            " DO UPDATE SET updated_at = now(), title = COALESCE(EXCLUDED.title, knowledge.documents.title),"
            "   source_url = COALESCE(EXCLUDED.source_url, knowledge.documents.source_url)"
            " RETURNING id, is_deleted",
            {"s": ident.site_domain, "k": "file" if ident.origin == "upload" else "page", "p": ident.path,
             "o": ident.origin, "kt": ident.knowledge_type, "tags": list(ident.tags), "su": ident.source_url,
             "cu": ident.canonical_url, "uh": url_hash(ident.canonical_url), "t": ident.title,
             "by": ident.created_by},
        )
        if row[1]:
            raise ErasedDocument(ident.canonical_url)
        return str(row[0])

    def document_version(self, document_id: str) -> tuple[int | None, str | None]:
        """(current version, current snapshot id) of a document."""
        row = self._first(
            "SELECT s.version, s.id FROM knowledge.documents d"
            " LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id WHERE d.id = :d",
            {"d": document_id})
        return (int(row[0]), str(row[1])) if row and row[0] is not None else (None, None)

    def document_site(self, document_id: str) -> str | None:
        """The site of a document the caller may see (row-level security), or None."""
        value = self._scalar("SELECT site_domain FROM knowledge.documents WHERE id = CAST(:d AS uuid)"
                             " AND NOT is_deleted", {"d": document_id})
        return str(value) if value is not None else None

    def text_site(self, text_hash: str) -> str | None:
        """A site holding this canonical text in a version the caller may see, or None."""
        value = self._scalar(
            "SELECT d.site_domain FROM knowledge.snapshot_texts t"
            " JOIN knowledge.document_snapshots s ON s.id = t.snapshot_id"
            " JOIN knowledge.documents d ON d.id = s.document_id WHERE t.text_hash = :h AND NOT d.is_deleted"
            " LIMIT 1", {"h": text_hash})
        return str(value) if value is not None else None

    # -- jobs -----------------------------------------------------------------------------------

    def create_job(self, site: str, fmt: str, path: str, source_name: str | None, byte_size: int,
                   requested_by: str) -> str:
        return str(self._write_scalar(
            "INSERT INTO knowledge.ingest_jobs (site_domain, format, path, source_name, byte_size, requested_by)"
            " VALUES (:s, :f, :p, :n, :b, :by) RETURNING id",
            {"s": site, "f": fmt, "p": path, "n": source_name, "b": byte_size, "by": requested_by}))

    def set_job_original(self, job_id: str, ref: str) -> None:
        self._run("UPDATE knowledge.ingest_jobs SET original_ref = :r WHERE id = CAST(:j AS uuid)",
                  {"r": ref, "j": job_id})

    def claim_job(self, job_id: str) -> bool:
        """Move a queued job to running; False if it is not queued (another worker has it, or it ended)."""
        return self._write_first(
            "UPDATE knowledge.ingest_jobs SET status = 'running' WHERE id = CAST(:j AS uuid) AND status = 'queued'"
            " RETURNING id", {"j": job_id}) is not None

    def finish_job(self, job_id: str, *, document_id: str | None = None, version: int | None = None,
                   outcome: str | None = None, conflicts: list[dict[str, Any]] | None = None,
                   error: str | None = None) -> None:
        self._run(
            "UPDATE knowledge.ingest_jobs SET status = CAST(:st AS knowledge.ingest_job_status),"
            " document_id = CAST(:d AS uuid), version = :v, outcome = :o, conflicts = CAST(:c AS jsonb),"
            " error = :e, finished_at = now() WHERE id = CAST(:j AS uuid)",
            {"st": "failed" if error else "succeeded", "d": document_id, "v": version, "o": outcome,
             "c": json_value(conflicts or []), "e": error[:2000] if error else None, "j": job_id})

    def job(self, job_id: str) -> dict[str, Any] | None:
        """The job as ``GET /v1/ingest/{job}`` answers it, or None (absent, or another tenant's)."""
        row = self._first(
            "SELECT id, site_domain, status::text, format, path, source_name, original_ref, byte_size,"
            " requested_by, document_id, version, outcome, conflicts, error, created_at, finished_at"
            " FROM knowledge.ingest_jobs WHERE id = CAST(:j AS uuid)", {"j": job_id})
        if row is None:
            return None
        return {"job_id": str(row[0]), "site_domain": row[1], "status": row[2], "format": row[3], "path": row[4],
                "source_name": row[5], "original_ref": row[6], "byte_size": int(row[7]), "requested_by": row[8],
                "document_id": str(row[9]) if row[9] else None, "version": row[10], "outcome": row[11],
                "conflicts": row[12] or [], "error": row[13], "created_at": row[14].isoformat(),
                "finished_at": row[15].isoformat() if row[15] else None}
