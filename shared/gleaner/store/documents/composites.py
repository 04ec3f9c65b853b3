"""A composite's lifecycle in PostgreSQL: its status, who validated it, the history of its moves, its versions.

Which moves are legal is :mod:`gleaner.operator.composites`' decision; this checks it under the
composite's row lock (two clicks at once cannot both move it) and records the move in
``composite_transitions`` in the same transaction. An edit is written the same way: its version,
the composite's new current version and status, and the history's row, in one transaction.
"""

from __future__ import annotations

import sqlalchemy as sa

from gleaner.errors import InvalidInput
from gleaner.operator.composites import (
    EDIT_GENERATOR,
    CompositeStatus,
    CompositeVersion,
    IllegalMove,
    Transition,
    check_edit,
    check_move,
)
from gleaner.operator.routing import Composite
from gleaner.store.backends.sqlstore import json_value
from gleaner.store.documents.routing import RoutingStore


class CompositeStore(RoutingStore):
    def composite(self, composite_id: str) -> Composite | None:
        found = self.composites(None, composite_id)
        return found[0] if found else None

    def move_composite(self, composite_id: str, target: CompositeStatus, actor: str, note: str | None) -> Composite:
        with self._tx() as conn:
            row = conn.execute(
                sa.text("SELECT status::text, site_domain FROM knowledge.composite_documents"
                        " WHERE CAST(id AS text) = :i AND NOT is_deleted FOR UPDATE"), {"i": composite_id}).first()
            if row is None:
                raise InvalidInput(f"no composite {composite_id[:60]}")
            check_move(row[0], target)
            # Validation is who said yes and when; review from scratch (in_validation) forgets the old one.
            conn.execute(
                sa.text("UPDATE knowledge.composite_documents SET status = CAST(:t AS knowledge.composite_status),"
                        " updated_at = now(),"
                        " validated_by = CASE WHEN :t = 'validated' THEN :a WHEN :t = 'in_validation' THEN NULL"
                        "   ELSE validated_by END,"
                        " validated_at = CASE WHEN :t = 'validated' THEN now() WHEN :t = 'in_validation' THEN NULL"
                        "   ELSE validated_at END"
                        " WHERE CAST(id AS text) = :i"),
                {"i": composite_id, "t": target.value, "a": actor})
            conn.execute(
                sa.text("INSERT INTO knowledge.composite_transitions"
                        " (composite_document_id, site_domain, from_status, to_status, actor, note)"
                        " VALUES (CAST(:i AS uuid), :s, CAST(:f AS knowledge.composite_status),"
                        " CAST(:t AS knowledge.composite_status), :a, :n)"),
                {"i": composite_id, "s": row[1], "f": row[0], "t": target.value, "a": actor, "n": note})
        moved = self.composite(composite_id)
        assert moved is not None
        return moved

    def composite_history(self, composite_id: str) -> list[Transition]:
        """The composite's moves, oldest first."""
        rows = self._all(
            "SELECT from_status::text, to_status::text, actor, note, at FROM knowledge.composite_transitions"
            " WHERE CAST(composite_document_id AS text) = :i ORDER BY id", {"i": composite_id})
        return [Transition(r[0], r[1], r[2], r[3], r[4].isoformat()) for r in rows]

    def save_composite_edit(self, composite_id: str, content_hash: str, content_key: str, actor: str,
                            note: str | None) -> str | None:
        """The composite's next version (an edit by ``actor``), made current and ``edited``; None when its
        current version already has this content (nothing is written)."""
        with self._tx() as conn:
            row = conn.execute(
                sa.text("SELECT c.status::text, c.site_domain, s.content_hash, s.id, s.extraction_metadata->'sources',"
                        " (SELECT max(version) FROM knowledge.document_snapshots v"
                        "   WHERE v.composite_document_id = c.id)"
                        " FROM knowledge.composite_documents c"
                        " LEFT JOIN knowledge.document_snapshots s ON s.id = c.current_snapshot_id"
                        " WHERE CAST(c.id AS text) = :i AND NOT c.is_deleted FOR UPDATE OF c"),
                {"i": composite_id}).first()
            if row is None:
                raise InvalidInput(f"no composite {composite_id[:60]}")
            status, site, current_hash, current_id, sources, last = row
            check_edit(status)
            if current_hash == content_hash:
                return None
            earlier = conn.execute(
                sa.text("SELECT version FROM knowledge.document_snapshots"
                        " WHERE composite_document_id = CAST(:i AS uuid) AND content_hash = :h"),
                {"i": composite_id, "h": content_hash}).scalar()
            if earlier is not None:  # a version is its content (one row per composite and content hash)
                raise IllegalMove(f"this text is the composite's version {earlier}: edit it to differ from it")
            version = int(last or 0) + 1
            snapshot_id = str(conn.execute(
                sa.text("INSERT INTO knowledge.document_snapshots (composite_document_id, version, content_hash,"
                        " processed_markdown_ref, extraction_metadata) VALUES (CAST(:i AS uuid), :v, :h, :k,"
                        " jsonb_build_object('generator', CAST(:g AS text), 'edited_by', CAST(:a AS text),"
                        "   'edited_at', now(), 'note', CAST(:n AS text), 'sources', CAST(:src AS jsonb)))"
                        " RETURNING id"),
                {"i": composite_id, "v": version, "h": content_hash, "k": content_key, "g": EDIT_GENERATOR,
                 "a": actor, "n": note, "src": json_value(sources or [])}).scalar_one())
            if current_id is not None:
                conn.execute(sa.text("UPDATE knowledge.document_snapshots SET superseded_by = CAST(:n AS uuid)"
                                     " WHERE id = :o"), {"n": snapshot_id, "o": current_id})
            # A validation was of the text before: the edited one is validated afresh (the history keeps it).
            conn.execute(
                sa.text("UPDATE knowledge.composite_documents SET status = 'edited', updated_at = now(),"
                        " current_snapshot_id = CAST(:s AS uuid), validated_by = NULL, validated_at = NULL"
                        " WHERE CAST(id AS text) = :i"), {"s": snapshot_id, "i": composite_id})
            conn.execute(
                sa.text("INSERT INTO knowledge.composite_transitions"
                        " (composite_document_id, site_domain, from_status, to_status, actor, note)"
                        " VALUES (CAST(:i AS uuid), :s, CAST(:f AS knowledge.composite_status), 'edited', :a, :n)"),
                {"i": composite_id, "s": site, "f": status, "a": actor,
                 "n": f"version {version}" + (f": {note}" if note else "")})
        return snapshot_id

    def composite_versions(self, composite_id: str) -> list[CompositeVersion]:
        """The composite's versions, oldest first, each with who wrote it and when."""
        rows = self._all(
            "SELECT s.version, s.id, s.content_hash, COALESCE(s.extraction_metadata->>'generator', ''),"
            " s.extraction_metadata->>'edited_by', s.created_at, s.extraction_metadata->>'note',"
            " s.id = c.current_snapshot_id,"
            " (SELECT t.actor FROM knowledge.composite_transitions t WHERE t.composite_document_id = c.id"
            "   AND t.from_status IS NULL ORDER BY t.id LIMIT 1)"
            " FROM knowledge.document_snapshots s"
            " JOIN knowledge.composite_documents c ON c.id = s.composite_document_id"
            " WHERE CAST(c.id AS text) = :i ORDER BY s.version", {"i": composite_id})
        return [CompositeVersion(int(r[0]), str(r[1]), r[2], r[3], r[4] or (r[8] if r[3] != EDIT_GENERATOR else None),
                                 r[5].isoformat(), r[6], bool(r[7])) for r in rows]
