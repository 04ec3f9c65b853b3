"""Where a gate-2 status change (a document blocked or unblocked by the operator) is announced.

Change events (``document.blocked`` / ``document.unblocked``, :mod:`gleaner.changes.events`) are
recorded in the transaction that changed the status (:func:`gleaner.store.registry.rules.announce_gate_changes`),
so a status change and its event commit together or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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
