"""Document lifecycle on ``documents.status`` (DESIGN.md "Document lifecycle") and the events it emits.

::

    discovered ──first version──► active ◄──────── 200 / 304 ──────────┐
        │                           │ 404/410, or unavailable 3 runs   │
        └─ first fetch fails ──► failed ───────────────────────────────┤
                                    │ complete mapping runs miss it 2x │
                                  stale ───────────────────────────────┤
                                    │ 301/308 to another known page    │
                                superseded ────────────────────────────┘

:func:`next_status` is the decision for one fetch, :func:`moves_for` for a batch of them and
:func:`event_for` the event a transition emits; all work on values. The store applies them
(:mod:`gleaner.store.documents.lifecycle`: a scrape batch's fetch outcomes, a finished mapping run's missing
pages), each inside the transaction that records the fetches, with one event per transition.
``blocked`` is the operator's gate: nothing here moves a blocked document.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from gleaner.changes.events import Change, EventType

# A page unavailable (timeout, 5xx, network) this many runs in a row is failed: one bad night is not a removal.
UNAVAILABLE_RUNS_TO_FAIL = 3
# Complete mapping runs in a row that must miss a page before it is stale.
MISSING_RUNS_TO_STALE = 2
# Answers that say the page is gone, not that the server had a bad moment.
GONE_STATUSES = frozenset({404, 410})


class Status(StrEnum):
    DISCOVERED = "discovered"
    ACTIVE = "active"
    BLOCKED = "blocked"
    STALE = "stale"
    FAILED = "failed"
    SUPERSEDED = "superseded"


# Statuses in which downstream systems hold the page as live: leaving them is a "removed" event.
LIVE = frozenset({Status.ACTIVE, Status.STALE})


@dataclass(frozen=True, slots=True)
class FetchFacts:
    """What one fetch of a run said about a document."""

    document_id: str
    outcome: str  # a FetchOutcome value
    http_status: int | None = None
    reason: str = ""
    superseded_by: str | None = None  # canonical URL of the known document it permanently redirects to


@dataclass(frozen=True, slots=True)
class Transition:
    to: Status
    reason: str | None


def next_status(current: Status, has_snapshot: bool, facts: FetchFacts, unavailable_runs: int) -> Transition | None:
    """Where one fetch moves a document, or None. ``unavailable_runs``: its latest runs in a row that
    answered unavailable, this one included."""
    if current is Status.BLOCKED:
        return None
    if facts.outcome in ("fetched", "not-modified"):  # a 304 counts as answering
        if facts.superseded_by:
            if current is Status.SUPERSEDED:
                return None
            return Transition(Status.SUPERSEDED, f"moved permanently to {facts.superseded_by}")
        if current in (Status.FAILED, Status.STALE, Status.SUPERSEDED) and has_snapshot:
            return Transition(Status.ACTIVE, None)
        return None  # discovered -> active comes with the first version (snapshot stage)
    if not has_snapshot:
        # Limited by the budget, or the blob store failed (run control): nothing was said about the page.
        if current is Status.DISCOVERED and facts.outcome not in ("exhausted", "store-failed"):
            return Transition(Status.FAILED, f"first fetch: {facts.outcome} {facts.reason}".strip())
        return None
    if current not in LIVE or facts.outcome != "unavailable":
        return None
    if facts.http_status in GONE_STATUSES:
        return Transition(Status.FAILED, f"HTTP {facts.http_status}")
    if unavailable_runs >= UNAVAILABLE_RUNS_TO_FAIL:
        return Transition(Status.FAILED, f"unavailable in {unavailable_runs} consecutive runs: {facts.reason}")
    return None


def event_for(previous: Status, to: Status, has_snapshot: bool) -> EventType | None:
    """The event a transition emits. A page downstream was never told about (no version yet) leaves no
    event when it fails; its first version is ``document.new``."""
    if not has_snapshot:
        return None
    if to is Status.ACTIVE:
        return EventType.RESTORED if previous in (Status.FAILED, Status.STALE, Status.SUPERSEDED) else None
    if to is Status.STALE:
        return EventType.STALE if previous is Status.ACTIVE else None
    if to in (Status.FAILED, Status.SUPERSEDED):
        return EventType.REMOVED if previous in LIVE else None
    return None


@dataclass(frozen=True, slots=True)
class DocumentState:
    """What the lifecycle reads of a document before it moves it."""

    document_id: str
    status: Status
    has_snapshot: bool
    unavailable_runs: int  # its latest runs in a row that answered unavailable


@dataclass(frozen=True, slots=True)
class Move:
    """One document's transition, as the store applies it."""

    document_id: str
    previous: Status
    to: Status
    reason: str | None
    has_snapshot: bool


def moves_for(states: Sequence[DocumentState], facts: Sequence[FetchFacts]) -> list[Move]:
    """The transitions a batch of fetches makes (documents that stay where they are make none)."""
    by_doc = {f.document_id: f for f in facts}
    moves = []
    for state in states:
        transition = next_status(state.status, state.has_snapshot, by_doc[state.document_id], state.unavailable_runs)
        if transition is not None and transition.to is not state.status:
            moves.append(Move(state.document_id, state.status, transition.to, transition.reason, state.has_snapshot))
    return moves


def stale_moves(document_ids: Sequence[str]) -> list[Move]:
    """Active pages that complete mapping runs no longer found (:data:`MISSING_RUNS_TO_STALE` in a row)."""
    reason = f"not found by {MISSING_RUNS_TO_STALE} complete mapping runs in a row"
    return [Move(d, Status.ACTIVE, Status.STALE, reason, True) for d in document_ids]


def changes_for(moves: Sequence[Move], run_id: str | None) -> list[Change]:
    """The change events of these moves (a transition may emit none: :func:`event_for`)."""
    return [Change(document_id=m.document_id, type=event, run_id=run_id, cause=f"{m.previous}>{m.to}")
            for m in moves if (event := event_for(m.previous, m.to, m.has_snapshot)) is not None]
