"""Where a gate-2 status change (a document blocked or unblocked by the operator) is announced.

Change events (``document.blocked`` / ``document.unblocked``, :mod:`gleaner.changes.events`) are
recorded here, in the transaction that changed the status, so a status change and its event commit
together or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy.engine import Connection

from gleaner.changes.events import Change, EventType
from gleaner.store.events import record_changes


class GateEvent(StrEnum):
    BLOCKED = "document.blocked"
    UNBLOCKED = "document.unblocked"


@dataclass(frozen=True, slots=True)
class StatusChange:
    document_id: str
    site_domain: str
    event: GateEvent
    # What makes this change and no other (the rule and when it acted): blocking, unblocking and
    # blocking again are three changes, each announced once.
    cause: str


def announce_gate_changes(conn: Connection, changes: Sequence[StatusChange]) -> None:
    """Record one ``document.blocked`` / ``document.unblocked`` event per change, in the caller's transaction.

    The events go out with the next outbox flush (:func:`gleaner.changes.outbox.flush_after_commit`).
    """
    record_changes(conn, [Change(document_id=c.document_id, type=EventType(str(c.event)), cause=c.cause)
                          for c in changes])
