"""A composite's lifecycle (the ADR's Composite Knowledge diagram): who moves it where, and what is legal.

::

    generated -> in_validation -> validated -> staged -> prod -> stale -> in_validation
                                                                  ^
                          any status but superseded: Gleaner, when a pinned source changes

Every move names who made it (``actor``: the credential, since Gleaner's callers are credentials, not
users: "operator", a site token, "cli:<os user>") and is recorded in ``composite_transitions`` with
its time and an optional note, Gleaner's own moves to ``stale`` too. Reaching ``validated`` records
who validated and when on the composite; going back to ``in_validation`` (a stale composite to
review again) clears them, as that validation no longer holds (the history keeps it).
``superseded`` is in the ADR's enum but no move leads there yet (a composite replaced by a newer one).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from gleaner.errors import InvalidInput
from gleaner.operator.values import Plain

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.operator.routing import Composite

MAX_NOTE = 2000
MAX_ACTOR = 300


class CompositeStatus(StrEnum):
    GENERATED = "generated"
    IN_VALIDATION = "in_validation"
    VALIDATED = "validated"
    STAGED = "staged"
    PROD = "prod"
    STALE = "stale"
    SUPERSEDED = "superseded"


# The operator's legal moves: from -> the statuses it may go to next.
MOVES: dict[CompositeStatus, tuple[CompositeStatus, ...]] = {
    CompositeStatus.GENERATED: (CompositeStatus.IN_VALIDATION,),
    CompositeStatus.IN_VALIDATION: (CompositeStatus.VALIDATED,),
    CompositeStatus.VALIDATED: (CompositeStatus.STAGED,),
    CompositeStatus.STAGED: (CompositeStatus.PROD,),
    # Contradictory feedback makes a composite in production stale by hand too (the ADR's Prod -> Stale).
    CompositeStatus.PROD: (CompositeStatus.STALE,),
    CompositeStatus.STALE: (CompositeStatus.IN_VALIDATION,),
    CompositeStatus.SUPERSEDED: (),
}

# What each move is called where a button offers it.
VERBS = {CompositeStatus.IN_VALIDATION: "Send for validation", CompositeStatus.VALIDATED: "Validate",
         CompositeStatus.STAGED: "Stage", CompositeStatus.PROD: "Promote to production",
         CompositeStatus.STALE: "Mark stale"}

GLEANER_ACTOR = "gleaner: a source changed"


@dataclass(frozen=True, slots=True)
class Transition(Plain):
    """One recorded move of a composite."""

    from_status: str | None
    to_status: str
    actor: str
    note: str | None
    at: str


class IllegalMove(InvalidInput):
    """The composite cannot go there from where it is (HTTP 409)."""


def parse_status(value: str) -> CompositeStatus:
    try:
        return CompositeStatus(value.strip().lower().replace("-", "_"))
    except ValueError:
        raise InvalidInput(f"unknown composite status {value[:40]!r}; one of "
                           f"{', '.join(s.value for s in CompositeStatus)}") from None


def check_move(current: str, target: CompositeStatus) -> None:
    allowed = MOVES.get(CompositeStatus(current), ())
    if target not in allowed:
        nexts = ", ".join(s.value for s in allowed) or "nothing (it is final)"
        raise IllegalMove(f"a {current} composite cannot go to {target.value}; from {current} it may go to {nexts}")


def move(deps: Deps, composite_id: str, target: str | CompositeStatus, actor: str, note: str | None = None
         ) -> Composite:
    """Move the composite to ``target`` if that is legal from where it is now, recorded as ``actor``'s.

    Raises InvalidInput (no such composite, a bad note), IllegalMove (not from its current status)."""
    status = target if isinstance(target, CompositeStatus) else parse_status(target)
    actor = actor.strip()[:MAX_ACTOR] or "unknown"
    note = (note or "").strip() or None
    if note is not None and len(note) > MAX_NOTE:
        raise InvalidInput(f"a note is at most {MAX_NOTE} characters")
    return deps.metadata.move_composite(composite_id, status, actor, note)


def history(deps: Deps, composite_id: str) -> list[Transition]:
    return deps.metadata.composite_history(composite_id)
