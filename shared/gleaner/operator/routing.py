"""Routings and composites (the ADR's gates 2 and 3): where each document goes, and what folds several into one.

- Ingest routes every active, unblocked document it ingests to ``rag`` by default
  (:func:`route_ingested`, idempotent). A blocked document is never ingested (:func:`ingestible`)
  and never routed.
- ``create_composite`` folds documents into a composite with its own snapshot (owner
  ``composite_document_id``), pinning each source's current snapshot in ``composite_document_sources``;
  the composite is routed to ``rag`` and its sources lose their own ``rag`` routing (subsumption).
  The composite's body is the sources' content.md under a heading each: a deterministic stand-in for
  the Knowledge Agent's distillation, which would write the same rows with a generated body.
- When a pinned source gets a new version, its composites go ``stale`` (:func:`route_ingested`).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.errors import InvalidInput
from gleaner.messages import SnapshotsWritten
from gleaner.operator.sites import site_key
from gleaner.store.blobs import snapshot_content_key
from gleaner.store.sqlstore import json_value
from gleaner.urls import canonicalize

if TYPE_CHECKING:
    from gleaner.app import Deps

GENERATOR = "gleaner.concatenate/1"


class Destination(StrEnum):
    RAG = "rag"
    SKILL = "skill"
    CONFIG = "config"


@dataclass(frozen=True, slots=True)
class Composite:
    id: str
    site_domain: str
    title: str
    status: str
    snapshot_id: str | None
    sources: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "sources": list(self.sources)}


def ingestible(engine: Engine, snapshot_ids: Iterable[str]) -> list[str]:
    """The snapshots ingest may take: a composite's, or an unblocked, undeleted document's (gate 2)."""
    ids = list(snapshot_ids)
    if not ids:
        return []
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT s.id FROM knowledge.document_snapshots s"
                " LEFT JOIN knowledge.documents d ON d.id = s.document_id"
                " WHERE s.id = ANY(CAST(:ids AS uuid[]))"
                " AND (s.composite_document_id IS NOT NULL OR (d.status <> 'blocked' AND NOT d.is_deleted))"
            ),
            {"ids": ids},
        ).scalars().all()
    keep = {str(r) for r in rows}
    return [i for i in ids if i in keep]


def route_ingested(engine: Engine, snapshot_ids: Sequence[str]) -> int:
    """After ingest: composites whose pinned source moved on go stale; active, unblocked documents not folded
    into a composite get their default ``rag`` routing (kept if it exists). Returns routings created."""
    if not snapshot_ids:
        return 0
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE knowledge.composite_documents c SET status = 'stale', updated_at = now()"
                " FROM knowledge.composite_document_sources cs"
                " JOIN knowledge.documents d ON d.id = cs.document_id"
                " JOIN knowledge.document_snapshots n ON n.document_id = d.id"
                " WHERE cs.composite_document_id = c.id AND n.id = ANY(CAST(:ids AS uuid[]))"
                " AND d.current_snapshot_id IS DISTINCT FROM cs.source_snapshot_id AND c.status <> 'stale'"
            ),
            {"ids": list(snapshot_ids)},
        )
        created = conn.execute(
            sa.text(
                "INSERT INTO knowledge.document_routings (site_domain, document_id, destination)"
                " SELECT DISTINCT d.site_domain, d.id, 'rag'::knowledge.routing_destination"
                " FROM knowledge.document_snapshots s JOIN knowledge.documents d ON d.id = s.document_id"
                " WHERE s.id = ANY(CAST(:ids AS uuid[])) AND d.status = 'active' AND NOT d.is_deleted"
                " AND NOT EXISTS (SELECT 1 FROM knowledge.composite_document_sources cs WHERE cs.document_id = d.id)"
                " ON CONFLICT DO NOTHING"
            ),
            {"ids": list(snapshot_ids)},
        )
    return int(created.rowcount or 0)


def routings_of(engine: Engine, owner_id: str) -> list[dict[str, Any]]:
    """A document's or a composite's routings."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT destination::text, target_ref, priority, enabled FROM knowledge.document_routings"
                " WHERE document_id = CAST(:o AS uuid) OR composite_document_id = CAST(:o AS uuid)"
                " ORDER BY destination, target_ref"
            ),
            {"o": owner_id},
        ).all()
    return [{"destination": r[0], "target_ref": r[1], "priority": r[2], "enabled": r[3]} for r in rows]


def create_composite(deps: Deps, site: str, title: str, urls: Sequence[str], *, kind: str | None = None,
                     ) -> Composite:
    """Fold the documents at ``urls`` (each with a current version, none blocked) into a new composite."""
    site = site_key(site)
    if not title.strip():
        raise InvalidInput("a composite needs a title")
    wanted = list(dict.fromkeys(canonicalize(u) for u in urls))
    if not wanted:
        raise InvalidInput("a composite needs at least one --from URL")
    engine = deps.metadata.engine
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT d.canonical_url, d.id, d.status::text, d.title, s.id, s.version, s.processed_markdown_ref"
                " FROM knowledge.documents d LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
                " WHERE d.site_domain = :s AND d.canonical_url = ANY(CAST(:u AS text[])) AND NOT d.is_deleted"
            ),
            {"s": site, "u": wanted},
        ).all()
    found = {r[0]: r for r in rows}
    for url in wanted:
        row = found.get(url)
        if row is None:
            raise InvalidInput(f"no document {url} in site {site}")
        if row[4] is None:
            raise InvalidInput(f"{url} has no version yet: crawl it first")
        if row[2] == "blocked":
            raise InvalidInput(f"{url} is blocked (gate 2): a blocked page is never ingested, alone or combined")
    composite_id = str(uuid.uuid4())
    parts = [f"# {title.strip()}\n"]
    sources = []
    for url in wanted:
        _url, doc_id, _status, doc_title, snap_id, version, ref = found[url]
        body = deps.blobs.get(ref).decode("utf-8")
        parts.append(f"\n## {doc_title or url}\n\nSource: {url} (version {version})\n\n{body.strip()}\n")
        sources.append({"document_id": str(doc_id), "url": url, "snapshot_id": str(snap_id), "version": version})
    content = "".join(parts).encode("utf-8")
    content_hash = hashlib.sha1(content).hexdigest()
    key = snapshot_content_key(site, composite_id, content_hash)
    deps.blobs.put(key, content)  # a fresh composite id: nothing can be there yet
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO knowledge.composite_documents (id, site_domain, title, composite_kind, status)"
                    " VALUES (:i, :s, :t, :k, 'generated')"),
            {"i": composite_id, "s": site, "t": title.strip(), "k": kind},
        )
        snapshot_id = str(conn.execute(
            sa.text("INSERT INTO knowledge.document_snapshots (composite_document_id, version, content_hash,"
                    " processed_markdown_ref, extraction_metadata) VALUES (:i, 1, :h, :k, CAST(:m AS jsonb))"
                    " RETURNING id"),
            {"i": composite_id, "h": content_hash, "k": key,
             "m": json_value({"generator": GENERATOR, "sources": sources})},
        ).scalar_one())
        conn.execute(sa.text("UPDATE knowledge.composite_documents SET current_snapshot_id = :s WHERE id = :i"),
                     {"s": snapshot_id, "i": composite_id})
        for source in sources:
            conn.execute(
                sa.text("INSERT INTO knowledge.composite_document_sources (composite_document_id, document_id,"
                        " source_snapshot_id, site_domain) VALUES (:c, :d, :s, :site)"),
                {"c": composite_id, "d": source["document_id"], "s": source["snapshot_id"], "site": site},
            )
        # Subsumption: a combined source is ingested through the composite only.
        conn.execute(
            sa.text("DELETE FROM knowledge.document_routings WHERE destination = 'rag'"
                    " AND document_id = ANY(CAST(:d AS uuid[]))"),
            {"d": [s["document_id"] for s in sources]},
        )
        conn.execute(
            sa.text("INSERT INTO knowledge.document_routings (site_domain, composite_document_id, destination)"
                    " VALUES (:s, :c, 'rag') ON CONFLICT DO NOTHING"),
            {"s": site, "c": composite_id},
        )
    deps.bus.publish(SnapshotsWritten(run_id=None, site_domain=site, snapshot_ids=(snapshot_id,)), ordering_key=site)
    return Composite(composite_id, site, title.strip(), "generated", snapshot_id, tuple(sources))


def list_composites(deps: Deps, site: str) -> list[Composite]:
    with deps.metadata.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT c.id, c.site_domain, c.title, c.status::text, c.current_snapshot_id,"
                " COALESCE(json_agg(json_build_object('document_id', cs.document_id, 'url', d.canonical_url,"
                "   'snapshot_id', cs.source_snapshot_id, 'version', ps.version, 'current_version', cur.version)"
                "   ORDER BY d.canonical_url) FILTER (WHERE cs.document_id IS NOT NULL), '[]')"
                " FROM knowledge.composite_documents c"
                " LEFT JOIN knowledge.composite_document_sources cs ON cs.composite_document_id = c.id"
                " LEFT JOIN knowledge.documents d ON d.id = cs.document_id"
                " LEFT JOIN knowledge.document_snapshots ps ON ps.id = cs.source_snapshot_id"
                " LEFT JOIN knowledge.document_snapshots cur ON cur.id = d.current_snapshot_id"
                " WHERE c.site_domain = :s AND NOT c.is_deleted GROUP BY c.id ORDER BY c.created_at"
            ),
            {"s": site_key(site)},
        ).all()
    return [Composite(str(r[0]), r[1], r[2], r[3], str(r[4]) if r[4] else None, tuple(r[5])) for r in rows]
