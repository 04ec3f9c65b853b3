"""Routings and composites in PostgreSQL: ``document_routings``, ``composite_documents`` and their sources.

Where each document goes and what a composite is made of are decided in :mod:`gleaner.operator.routing`;
this module reads and writes the rows, each call one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from gleaner.operator.composites import GLEANER_ACTOR
from gleaner.operator.routing import GENERATOR, Composite, CompositeSource
from gleaner.retrieval.index import remove_documents
from gleaner.store.backends.sqlstore import SqlStore, json_value, text

ERASURE_ACTOR = "gleaner: a source was erased"


class RoutingStore(SqlStore):
    def route_ingested(self, snapshot_ids: Sequence[str]) -> int:
        """After ingest: composites whose pinned source moved on go stale; active, unblocked documents not folded
        into a composite get their default ``rag`` routing (kept if it exists). Returns routings created."""
        if not snapshot_ids:
            return 0
        with self._tx() as conn:
            # Each move to stale is recorded in the composite's history (operator/composites.py) with its
            # status before; a superseded composite stays superseded.
            conn.execute(
                text(
                    "WITH moving AS (SELECT DISTINCT c.id, c.site_domain, c.status"
                    "   FROM knowledge.composite_documents c"
                    "   JOIN knowledge.composite_document_sources cs ON cs.composite_document_id = c.id"
                    "   JOIN knowledge.documents d ON d.id = cs.document_id"
                    "   JOIN knowledge.document_snapshots n ON n.document_id = d.id"
                    "   WHERE n.id = ANY(CAST(:ids AS uuid[]))"
                    "   AND d.current_snapshot_id IS DISTINCT FROM cs.source_snapshot_id"
                    "   AND c.status NOT IN ('stale', 'superseded')),"
                    " moved AS (UPDATE knowledge.composite_documents c SET status = 'stale', updated_at = now()"
                    "   FROM moving m WHERE c.id = m.id RETURNING c.id)"
                    " INSERT INTO knowledge.composite_transitions"
                    " (composite_document_id, site_domain, from_status, to_status, actor)"
                    " SELECT m.id, m.site_domain, m.status, 'stale', :actor FROM moving m JOIN moved USING (id)"
                ),
                {"ids": list(snapshot_ids), "actor": GLEANER_ACTOR},
            )
            created = conn.execute(
                text(
                    "INSERT INTO knowledge.document_routings (site_domain, document_id, destination)"
                    " SELECT DISTINCT d.site_domain, d.id, 'rag'::knowledge.routing_destination"
                    " FROM knowledge.document_snapshots s JOIN knowledge.documents d ON d.id = s.document_id"
                    " WHERE s.id = ANY(CAST(:ids AS uuid[])) AND d.status = 'active' AND NOT d.is_deleted"
                    # Gleaner's own tenants (``_references``) are never client knowledge (the feed spec).
                    " AND left(d.site_domain, 1) <> '_'"
                    " AND NOT EXISTS (SELECT 1 FROM knowledge.composite_document_sources cs"
                    "   WHERE cs.document_id = d.id)"
                    " ON CONFLICT DO NOTHING"
                ),
                {"ids": list(snapshot_ids)},
            )
        return int(created.rowcount or 0)

    def routings_of(self, owner_id: str) -> list[dict[str, Any]]:
        """A document's or a composite's routings."""
        rows = self._all(
            "SELECT destination::text, target_ref, priority, enabled FROM knowledge.document_routings"
            " WHERE document_id = CAST(:o AS uuid) OR composite_document_id = CAST(:o AS uuid)"
            " ORDER BY destination, target_ref",
            {"o": owner_id},
        )
        return [{"destination": r[0], "target_ref": r[1], "priority": r[2], "enabled": r[3]} for r in rows]

    def composite_candidates(self, site: str, urls: Sequence[str]) -> dict[str, CompositeSource]:
        """canonical URL -> the undeleted document there with its current version (if any)."""
        rows = self._all(
            "SELECT d.canonical_url, d.id, d.status::text, d.title, s.id, s.version, s.processed_markdown_ref"
            " FROM knowledge.documents d LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
            " WHERE d.site_domain = :s AND d.canonical_url = ANY(CAST(:u AS text[])) AND NOT d.is_deleted",
            {"s": site, "u": list(urls)},
        )
        return {r[0]: CompositeSource(r[0], str(r[1]), r[2], r[3], str(r[4]) if r[4] else None, r[5], r[6])
                for r in rows}

    def save_composite(self, composite_id: str, site: str, title: str, kind: str | None, content_hash: str,
                       content_key: str, sources: Sequence[dict[str, Any]], actor: str = "gleaner") -> str:
        """The composite, its one version, its pinned sources and its ``rag`` routing; the sources lose theirs.

        Returns the composite's snapshot id."""
        with self._tx() as conn:
            conn.execute(
                text("INSERT INTO knowledge.composite_documents (id, site_domain, title, composite_kind, status)"
                        " VALUES (:i, :s, :t, :k, 'generated')"),
                {"i": composite_id, "s": site, "t": title, "k": kind},
            )
            conn.execute(
                text("INSERT INTO knowledge.composite_transitions"
                        " (composite_document_id, site_domain, from_status, to_status, actor)"
                        " VALUES (:i, :s, NULL, 'generated', :a)"),
                {"i": composite_id, "s": site, "a": actor},
            )
            snapshot_id = str(conn.execute(
                text("INSERT INTO knowledge.document_snapshots (composite_document_id, version, content_hash,"
                        " processed_markdown_ref, extraction_metadata) VALUES (:i, 1, :h, :k, CAST(:m AS jsonb))"
                        " RETURNING id"),
                {"i": composite_id, "h": content_hash, "k": content_key,
                 "m": json_value({"generator": GENERATOR, "sources": list(sources)})},
            ).scalar_one())
            conn.execute(text("UPDATE knowledge.composite_documents SET current_snapshot_id = :s WHERE id = :i"),
                         {"s": snapshot_id, "i": composite_id})
            for source in sources:
                conn.execute(
                    text("INSERT INTO knowledge.composite_document_sources (composite_document_id, document_id,"
                            " source_snapshot_id, site_domain) VALUES (:c, :d, :s, :site)"),
                    {"c": composite_id, "d": source["document_id"], "s": source["snapshot_id"], "site": site},
                )
            # Subsumption: a combined source is ingested through the composite only; losing its rag routing
            # takes it out of the search index in this transaction (the composite answers for it).
            conn.execute(
                text("DELETE FROM knowledge.document_routings WHERE destination = 'rag'"
                        " AND document_id = ANY(CAST(:d AS uuid[]))"),
                {"d": [s["document_id"] for s in sources]},
            )
            remove_documents(conn, [s["document_id"] for s in sources])
            conn.execute(
                text("INSERT INTO knowledge.document_routings (site_domain, composite_document_id, destination)"
                        " VALUES (:s, :c, 'rag') ON CONFLICT DO NOTHING"),
                {"s": site, "c": composite_id},
            )
        return snapshot_id

    def composites(self, site: str | None = None, composite_id: str | None = None) -> list[Composite]:
        """A site's undeleted composites, oldest first (or the one with ``composite_id``)."""
        rows = self._all(
            "SELECT c.id, c.site_domain, c.title, c.status::text, c.current_snapshot_id,"
            " COALESCE(json_agg(json_build_object('document_id', cs.document_id, 'url', d.canonical_url,"
            "   'snapshot_id', cs.source_snapshot_id, 'version', ps.version, 'current_version', cur.version)"
            "   ORDER BY d.canonical_url) FILTER (WHERE cs.document_id IS NOT NULL), '[]'),"
            " c.composite_kind, c.validated_by, c.validated_at, c.updated_at"
            " FROM knowledge.composite_documents c"
            " LEFT JOIN knowledge.composite_document_sources cs ON cs.composite_document_id = c.id"
            " LEFT JOIN knowledge.documents d ON d.id = cs.document_id"
            " LEFT JOIN knowledge.document_snapshots ps ON ps.id = cs.source_snapshot_id"
            " LEFT JOIN knowledge.document_snapshots cur ON cur.id = d.current_snapshot_id"
            " WHERE (CAST(:s AS text) IS NULL OR c.site_domain = :s)"
            " AND (CAST(:i AS text) IS NULL OR CAST(c.id AS text) = :i) AND NOT c.is_deleted"
            " GROUP BY c.id ORDER BY c.created_at, c.id",
            {"s": site, "i": composite_id},
        )
        return [Composite(str(r[0]), r[1], r[2], r[3], str(r[4]) if r[4] else None, tuple(r[5]), r[6], r[7],
                          r[8].isoformat() if r[8] else None, r[9].isoformat() if r[9] else None) for r in rows]


def unfold_erased(conn: Connection, document_id: str, erasure_id: str) -> list[str]:
    """Erasure's part for composites, in its transaction: the versions of every composite that folded
    the erased page in (their bodies hold it), to be dropped with the page's own. Each such composite is
    left without a version and ``stale`` (a superseded one stays superseded), its history saying why,
    so search and exports no longer show it and the operator folds the remaining sources again."""
    composites = conn.execute(
        text("SELECT composite_document_id FROM knowledge.composite_document_sources WHERE document_id = :d"),
        {"d": document_id},
    ).scalars().all()
    if not composites:
        return []
    ids = [str(c) for c in composites]
    conn.execute(
        text("WITH moving AS (SELECT id, site_domain, status FROM knowledge.composite_documents"
                "   WHERE id = ANY(CAST(:c AS uuid[])) AND status <> 'superseded'),"
                " moved AS (UPDATE knowledge.composite_documents c SET status = 'stale', updated_at = now()"
                "   FROM moving m WHERE c.id = m.id RETURNING c.id)"
                " INSERT INTO knowledge.composite_transitions"
                " (composite_document_id, site_domain, from_status, to_status, actor, note)"
                " SELECT m.id, m.site_domain, m.status, 'stale', :actor, :note FROM moving m JOIN moved USING (id)"),
        {"c": ids, "actor": ERASURE_ACTOR,
         "note": f"a source page was erased (erasure {erasure_id}): the versions that held it are deleted"},
    )
    conn.execute(text("UPDATE knowledge.composite_documents SET current_snapshot_id = NULL"
                         " WHERE id = ANY(CAST(:c AS uuid[]))"), {"c": ids})
    return [str(i) for i in conn.execute(
        text("SELECT id FROM knowledge.document_snapshots WHERE composite_document_id = ANY(CAST(:c AS uuid[]))"),
        {"c": ids},
    ).scalars().all()]
