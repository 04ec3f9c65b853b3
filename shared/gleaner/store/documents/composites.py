"""A composite's lifecycle in PostgreSQL: its status, who validated it, and the history of its moves.

Which moves are legal is :mod:`gleaner.operator.composites`' decision; this checks it under the
composite's row lock (two clicks at once cannot both move it) and records the move in
``composite_transitions`` in the same transaction.
"""

from __future__ import annotations

import sqlalchemy as sa

from gleaner.errors import InvalidInput
from gleaner.operator.composites import CompositeStatus, Transition, check_move
from gleaner.operator.routing import Composite
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
