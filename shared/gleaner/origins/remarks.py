"""Remarks (seed 003's validation): a client's comment or flag on a document, kept with who and when.

A **comment** says something about a document; a **flag** says something in it is wrong and asks for
a look. Either is kept as it was written, with who made it (the credential: ``operator``, ``site
token for …``, ``cli:<user>``), when, and the version that was current then (so a later version
shows which remarks came before it). A remark is not a document: it is not searched nor checked
for contradictions (a correction meant for the copy is a feedback, gleaner.origins.feedback).
Erasing the document deletes its remarks (they may quote it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gleaner.app import Deps
from gleaner.errors import InvalidInput
from gleaner.operator.values import Plain
from gleaner.serving.textcheck import text_problem
from gleaner.store.backends.sqlstore import SqlStore

MAX_REMARK_CHARS = 5_000  # a remark is a few sentences; a longer text is a feedback or an upload


class RemarkKind(StrEnum):
    COMMENT = "comment"
    FLAG = "flag"


@dataclass(frozen=True, slots=True)
class Remark(Plain):
    id: str
    document_id: str
    kind: str
    text: str
    by: str
    at: str
    version: int | None  # the document's version when the remark was made (None: it had none yet)


class NoDocument(InvalidInput):
    """No such document for this caller (absent, erased, or another tenant's: the same answer)."""


_COLUMNS = "r.id, r.document_id, r.kind::text, r.body, r.created_by, r.created_at, r.version"


class RemarkStore(SqlStore):
    def add(self, document_id: str, kind: RemarkKind, text: str, who: str) -> Remark | None:
        """The remark, kept on the document's current version; None when the caller cannot see the document."""
        row = self._write_first(
            "WITH r AS (INSERT INTO knowledge.document_remarks (site_domain, document_id, snapshot_id, version,"
            "   kind, body, created_by)"
            " SELECT d.site_domain, d.id, d.current_snapshot_id, s.version, CAST(:k AS knowledge.remark_kind), :b, :by"
            " FROM knowledge.documents d LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
            " WHERE d.id = CAST(:d AS uuid) AND NOT d.is_deleted"
            " RETURNING id, document_id, kind, body, created_by, created_at, version)"
            f" SELECT {_COLUMNS} FROM r",
            {"d": document_id, "k": kind.value, "b": text, "by": who})
        return _remark(row) if row is not None else None

    def of_document(self, document_id: str) -> list[Remark] | None:
        """The document's remarks, oldest first; None when the caller cannot see the document."""
        if self._scalar("SELECT 1 FROM knowledge.documents WHERE id = CAST(:d AS uuid) AND NOT is_deleted",
                        {"d": document_id}) is None:
            return None
        rows = self._all(f"SELECT {_COLUMNS} FROM knowledge.document_remarks r WHERE r.document_id = CAST(:d AS uuid)"
                         " ORDER BY r.created_at, r.id", {"d": document_id})
        return [_remark(r) for r in rows]


def _remark(r: Any) -> Remark:
    at = r[5]
    return Remark(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]),
                  at.isoformat() if hasattr(at, "isoformat") else str(at), int(r[6]) if r[6] is not None else None)


def parse_kind(value: object) -> RemarkKind:
    try:
        return RemarkKind(str(value).strip().lower())
    except ValueError:
        raise InvalidInput("kind must be comment or flag") from None


def add_remark(deps: Deps, document_id: str, kind: RemarkKind | str, text: object, who: str) -> Remark:
    """Keep one comment or flag on a document (see the module docstring). InvalidInput for an empty,
    oversized or unstorable text or an unknown kind; NoDocument when the caller cannot see the document."""
    kind = kind if isinstance(kind, RemarkKind) else parse_kind(kind)
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"a {kind.value} needs its text")
    text = text.strip()
    if len(text) > MAX_REMARK_CHARS:
        raise InvalidInput(f"a {kind.value} is at most {MAX_REMARK_CHARS} characters")
    problem = text_problem(text)
    if problem:
        raise InvalidInput(f"the {kind.value} {problem}")
    kept = RemarkStore(deps.engine).add(document_id, kind, text, who)
    if kept is None:
        raise NoDocument(f"no document {document_id[:60]}")
    return kept


def remarks_of(deps: Deps, document_id: str) -> list[Remark]:
    """The document's comments and flags, oldest first; NoDocument when the caller cannot see it."""
    found = RemarkStore(deps.engine).of_document(document_id)
    if found is None:
        raise NoDocument(f"no document {document_id[:60]}")
    return found
