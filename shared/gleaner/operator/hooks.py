"""Where a gate-2 status change (a document blocked or unblocked by the operator) is announced.

Change events (``document.blocked`` / ``document.unblocked``) are emitted here, in the transaction
that changed the status, so a status change and its event commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy.engine import Connection


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
    """Announce blocked / unblocked documents (no-op until change events exist on this branch)."""
    del conn, changes
