"""Document lifecycle on ``documents.status`` (DESIGN.md "Document lifecycle") and the events it emits.

::

    discovered ──first version──► active ◄──────── 200 / 304 ──────────┐
        │                           │ 404/410, or unavailable 3 runs   │
        └─ first fetch fails ──► failed ───────────────────────────────┤
                                    │ complete mapping runs miss it 2x │
                                  stale ───────────────────────────────┤
                                    │ 301/308 to another known page    │
                                superseded ────────────────────────────┘

:func:`next_status` is the pure decision; :func:`settle_fetches` applies it to a scrape batch's
fetch outcomes and :func:`mark_unmapped_stale` to a finished mapping run, each inside the caller's
transaction, with one event per transition (:func:`event_for`). ``blocked`` is the operator's gate:
nothing here moves a blocked document.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gleaner.changes.events import Change, EventType
from gleaner.store.events import record_changes
from gleaner.store.sqlstore import json_rows

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


def settle_fetches(conn: Connection, run_id: str | None, facts: Sequence[FetchFacts]) -> int:
    """Apply the lifecycle to documents a batch just fetched (each settled once per run by the caller's
    ledger guard); returns how many documents changed status."""
    if not facts:
        return 0
    by_doc = {f.document_id: f for f in facts}
    # Lock first, read second (a read that waited for the lock would see other rows as they were).
    conn.execute(sa.text("SELECT 1 FROM knowledge.documents WHERE id = ANY(CAST(:ids AS uuid[])) ORDER BY id"
                         " FOR UPDATE"), {"ids": sorted(by_doc)})
    rows = conn.execute(
        sa.text(
            "SELECT d.id, d.status::text, d.current_snapshot_id IS NOT NULL,"
            " (SELECT count(*) FROM (SELECT c.fetch_outcome FROM knowledge.crawl_page_decisions c"
            "   WHERE c.document_id = d.id AND c.fetch_outcome IS NOT NULL"
            "   AND c.fetch_outcome NOT IN ('exhausted', 'robots-unknown', 'store-failed')"
            "   ORDER BY c.fetched_at DESC NULLS LAST LIMIT :n) w WHERE w.fetch_outcome = 'unavailable')"
            " FROM knowledge.documents d WHERE d.id = ANY(CAST(:ids AS uuid[]))"
        ),
        {"ids": sorted(by_doc), "n": UNAVAILABLE_RUNS_TO_FAIL},
    ).all()
    moves: list[tuple[str, Status, Status, str | None, bool]] = []
    for doc_id, status, has_snapshot, streak in rows:
        current = Status(status)
        transition = next_status(current, bool(has_snapshot), by_doc[str(doc_id)], int(streak))
        if transition is not None and transition.to is not current:
            moves.append((str(doc_id), current, transition.to, transition.reason, bool(has_snapshot)))
    return apply_moves(conn, run_id, moves)


def apply_moves(conn: Connection, run_id: str | None, moves: Sequence[tuple[str, Status, Status, str | None, bool]],
                cause: str = "") -> int:
    """(document, from, to, reason, has_snapshot) for rows the caller locked: update and record the events."""
    if not moves:
        return 0
    conn.execute(
        sa.text(
            "UPDATE knowledge.documents d SET status = CAST(t.st AS knowledge.document_status),"
            " status_reason = t.why, status_changed_at = now(), updated_at = now()"
            " FROM json_to_recordset(CAST(:rows AS json)) AS t(d uuid, st text, why text) WHERE d.id = t.d"
        ),
        {"rows": json_rows([{"d": d, "st": str(to), "why": why} for d, _, to, why, _ in moves])},
    )
    changes = [Change(document_id=d, type=event, run_id=run_id, cause=cause or f"{previous}>{to}")
               for d, previous, to, _, has_snapshot in moves
               if (event := event_for(previous, to, has_snapshot)) is not None]
    record_changes(conn, changes)
    return len(moves)


def mark_unmapped_stale(conn: Connection, run_id: str, site: str, complete: bool) -> int:
    """Record whether this mapping run was complete; if it was, active pages that it and the complete
    run before it both missed become stale. Returns how many did.

    Only pages mapped before those runs qualify (a page landed by a feed webhook was never in a map).
    """
    conn.execute(sa.text("UPDATE knowledge.crawl_runs SET mapped_complete = :c WHERE id = :r"),
                 {"c": complete, "r": run_id})
    if not complete:
        return 0
    rows = conn.execute(
        sa.text(
            "WITH recent AS (SELECT id, created_at FROM knowledge.crawl_runs"
            "   WHERE site_domain = :s AND mapped_complete ORDER BY created_at DESC LIMIT :n)"
            " SELECT d.id FROM knowledge.documents d"
            " WHERE d.site_domain = :s AND d.status = 'active' AND NOT d.is_deleted"
            " AND (SELECT count(*) FROM recent) = :n"
            " AND NOT EXISTS (SELECT 1 FROM knowledge.crawl_page_decisions c"
            "   WHERE c.document_id = d.id AND c.run_id IN (SELECT id FROM recent))"
            " AND EXISTS (SELECT 1 FROM knowledge.crawl_page_decisions c JOIN knowledge.crawl_runs r ON r.id = c.run_id"
            "   WHERE c.document_id = d.id AND r.created_at < (SELECT min(created_at) FROM recent))"
            " ORDER BY d.id FOR UPDATE OF d"
        ),
        {"s": site, "n": MISSING_RUNS_TO_STALE},
    ).all()
    reason = f"not found by {MISSING_RUNS_TO_STALE} complete mapping runs in a row"
    return apply_moves(conn, run_id, [(str(r[0]), Status.ACTIVE, Status.STALE, reason, True) for r in rows])
