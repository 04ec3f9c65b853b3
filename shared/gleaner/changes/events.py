"""Change events: one per new version and per status change of a document (DESIGN.md "Change events").

An event is recorded in the same transaction as the change it describes (the snapshot, the status
update), so it exists exactly when the change does. Its identity is the change's business identity
(:attr:`Change.dedupe_key`: document, type, run, the snapshots it moves between, or the caller's
cause), unique per tenant: a redelivered message that reaches the same change inserts nothing, and
the event id (a UUID derived from that key) is the same however often it is computed.

Other features record their own status changes through :func:`record_status_change`, e.g. the
operator's block gate::

    record_status_change(conn, document_id=doc, type=EventType.BLOCKED, cause=f"rule:{rule_id}:{at}")

Rows are published after their commit by :mod:`gleaner.changes.outbox`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner.messages import GLEANER_NS
from gleaner.store.sqlstore import json_rows

# The published topic (DESIGN.md); declared in terraform/changes.tf.
TOPIC = "documents-changed"


class EventType(StrEnum):
    NEW = "document.new"
    CHANGED = "document.changed"
    REMOVED = "document.removed"
    RESTORED = "document.restored"
    STALE = "document.stale"
    BLOCKED = "document.blocked"
    UNBLOCKED = "document.unblocked"
    # Not a document's own change: a duplicate or contradiction found between it and another document
    # (document_conflicts); the event names the document the conflict was found for (provenance).
    CONFLICT_OPENED = "conflict.opened"


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """The event exactly as DESIGN.md shapes it (``to_dict`` is the published JSON)."""

    event_id: str
    type: str
    site_domain: str
    document_id: str
    url: str | None
    run_id: str | None
    version: int | None
    snapshot_id: str | None
    content_hash: str | None
    previous_version: int | None
    occurred_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Change:
    """A change to record: what happened to which document, and what makes it this change and no other."""

    document_id: str
    type: EventType
    run_id: str | None = None
    # The version the change is about; None: the document's current snapshot at the time of recording.
    snapshot_id: str | None = None
    # The current snapshot before a content change (its version becomes previous_version).
    previous_snapshot_id: str | None = None
    # Tells apart changes outside any run (an operator blocking, unblocking and blocking again).
    cause: str = ""

    @property
    def dedupe_key(self) -> str:
        return (f"{self.document_id}:{self.type}:{self.run_id or '-'}:"
                f"{self.previous_snapshot_id or '-'}>{self.snapshot_id or '-'}:{self.cause}")

    @property
    def event_id(self) -> str:
        return str(uuid.uuid5(GLEANER_NS, "event:" + self.dedupe_key))


def record_changes(conn: Connection, changes: Sequence[Change]) -> int:
    """Insert one event per change (a change already recorded is skipped); how many were new.

    Call inside the transaction that makes the change, after it: the event reads the document's
    URL, site and (for status changes) current snapshot as the change left them.
    """
    if not changes:
        return 0
    rows = [{"e": c.event_id, "k": c.dedupe_key, "ty": str(c.type), "d": c.document_id, "r": c.run_id,
             "s": c.snapshot_id, "ps": c.previous_snapshot_id} for c in changes]
    result = conn.execute(
        sa.text(
            "INSERT INTO knowledge.document_events (event_id, site_domain, dedupe_key, type, document_id, url, run_id,"
            " version, snapshot_id, content_hash, previous_version, occurred_at)"
            " SELECT t.e, d.site_domain, t.k, CAST(t.ty AS knowledge.document_event_type), d.id,"
            " COALESCE(d.canonical_url, d.source_url), t.r, s.version, s.id, s.content_hash, p.version,"
            " clock_timestamp()"
            " FROM json_to_recordset(CAST(:rows AS json))"
            "   AS t(e uuid, k text, ty text, d uuid, r uuid, s uuid, ps uuid)"
            " JOIN knowledge.documents d ON d.id = t.d"
            " LEFT JOIN knowledge.document_snapshots s ON s.id = COALESCE(t.s, d.current_snapshot_id)"
            " LEFT JOIN knowledge.document_snapshots p ON p.id = t.ps"
            " ORDER BY d.id"
            " ON CONFLICT DO NOTHING RETURNING 1"
        ),
        {"rows": json_rows(rows)},
    ).all()
    return len(result)


def record_status_change(target: Connection | Engine, *, document_id: str, type: EventType,
                         run_id: str | None = None, cause: str = "") -> bool:
    """Record one status-change event (blocked, unblocked, ...); False if this change was already recorded.

    ``target`` is the transaction that changed the status (preferred: the event exists exactly when
    the change does) or an engine (a transaction of its own). A change outside a run needs a
    ``cause`` that names it (a rule id and time), or a second block after an unblock is a duplicate.
    """
    change = Change(document_id=document_id, type=type, run_id=run_id, cause=cause)
    if isinstance(target, Engine):
        with target.begin() as conn:
            return record_changes(conn, [change]) == 1
    return record_changes(target, [change]) == 1


_EVENT_COLUMNS = ("e.event_id, e.type::text, e.site_domain, e.document_id, e.url, e.run_id, e.version,"
                  " e.snapshot_id, e.content_hash, e.previous_version, e.occurred_at")


def event_from_row(row: Sequence[Any]) -> ChangeEvent:
    occurred: datetime = row[10]
    return ChangeEvent(event_id=str(row[0]), type=str(row[1]), site_domain=str(row[2]), document_id=str(row[3]),
                       url=row[4], run_id=str(row[5]) if row[5] else None, version=row[6],
                       snapshot_id=str(row[7]) if row[7] else None, content_hash=row[8], previous_version=row[9],
                       occurred_at=occurred.isoformat())


def list_events(engine: Engine, *, site: str | None = None, since: datetime | None = None,
                since_run: str | None = None, limit: int = 1000) -> list[ChangeEvent]:
    """Events oldest first; ``since_run``: the events of that run and everything after it."""
    where = ["TRUE"]
    params: dict[str, Any] = {"n": limit}
    if site:
        where.append("e.site_domain = :s")
        params["s"] = site
    if since is not None:
        where.append("e.occurred_at >= :t")
        params["t"] = since
    if since_run is not None:
        where.append("e.occurred_at >= (SELECT created_at FROM knowledge.crawl_runs WHERE id = CAST(:r AS uuid))")
        params["r"] = since_run
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(f"SELECT {_EVENT_COLUMNS} FROM knowledge.document_events e WHERE {' AND '.join(where)}"
                    " ORDER BY e.seq LIMIT :n"),
            params,
        ).all()
    return [event_from_row(r) for r in rows]


def events_columns() -> str:
    """The SELECT list :func:`event_from_row` reads (for the outbox's own queries over alias ``e``)."""
    return _EVENT_COLUMNS
