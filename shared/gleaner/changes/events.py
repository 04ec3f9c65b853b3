"""Change events: one per new version and per status change of a document (DESIGN.md "Change events").

An event is recorded in the same transaction as the change it describes (the snapshot, the status
update), so it exists exactly when the change does. Its identity is the change's business identity
(:attr:`Change.dedupe_key`: document, type, run, the snapshots it moves between, or the caller's
cause), unique per tenant: a redelivered message that reaches the same change inserts nothing, and
the event id (a UUID derived from that key) is the same however often it is computed.

This module is the events' shape and identity, on values. The store records them
(:func:`gleaner.store.notifications.events.record_changes`, called inside the change's transaction by the store
module that makes it) and lists them (``deps.metadata.list_events``); rows are published after their
commit by :mod:`gleaner.changes.outbox`.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from gleaner.messages import GLEANER_NS

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
    # A current version handed to a ``skill`` or ``config`` routing's downstream system (routing_handovers).
    HANDOVER = "routing.handover"
    # A run's end (recorded by a trigger on crawl_runs, migration 0028): the run id, its status and
    # counters; sent only to subscriptions that name these types.
    RUN_FINISHED = "run.finished"
    RUN_PARTIAL = "run.partial"
    RUN_FAILED = "run.failed"

    @property
    def is_run_event(self) -> bool:
        return self.value.startswith("run.")


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """The event exactly as DESIGN.md shapes it (``to_dict`` is the published JSON)."""

    event_id: str
    type: str
    site_domain: str
    document_id: str | None  # None for a run event
    url: str | None
    run_id: str | None
    version: int | None
    snapshot_id: str | None
    content_hash: str | None
    previous_version: int | None
    occurred_at: str
    summary: dict[str, Any] | None = None  # a run event's counters

    @property
    def is_run_event(self) -> bool:
        return self.type.startswith("run.")

    def to_dict(self) -> dict[str, Any]:
        """A document event as DESIGN.md "Change events" shapes it; a run event as {"event_id", "type",
        "run_id", "site_domain", "status", "summary", "occurred_at"}."""
        if self.is_run_event:
            return {"event_id": self.event_id, "type": self.type, "run_id": self.run_id,
                    "site_domain": self.site_domain, "status": self.type.removeprefix("run."),
                    "summary": self.summary, "occurred_at": self.occurred_at}
        data = asdict(self)
        del data["summary"]
        return data


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
