"""A composite's lifecycle (the ADR's Composite Knowledge diagram): who moves it where, and what is legal.

::

    generated -> in_validation -> validated -> staged -> prod -> stale -> in_validation
                                                                  ^
                          any status but superseded: Gleaner, when a pinned source changes
    edited -> validated
       ^
       any status but superseded: a client's edit (:func:`edit`), a new version of the composite

Every move names who made it (``actor``: the credential, since Gleaner's callers are credentials, not
users: "operator", a site token, "cli:<os user>") and is recorded in ``composite_transitions`` with
its time and an optional note, Gleaner's own moves to ``stale`` too. Reaching ``validated`` records
who validated and when on the composite; going back to ``in_validation`` (a stale composite to
review again) clears them, as that validation no longer holds (the history keeps it).
``superseded`` is in the ADR's enum but no move leads there yet (a composite replaced by a newer one).

An edit is not a move: it writes the composite's next version (its body as the client wrote it, the
sources still pinned, who and when in the version's metadata), makes it ``edited`` and records that
in the history as the editor's, so the edited text is validated (and staged, promoted) again before
it is what production says. The same body again writes nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from gleaner.errors import BlobConflict, InvalidInput
from gleaner.messages import SnapshotsWritten
from gleaner.operator.values import Plain
from gleaner.store.backends.blobs import snapshot_content_key

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.operator.routing import Composite

MAX_NOTE = 2000
MAX_ACTOR = 300
MAX_EDIT_BYTES = 4 * 2**20  # a composite is distilled pages, not a book: a larger body is an upload
EDIT_GENERATOR = "edit"


class CompositeStatus(StrEnum):
    GENERATED = "generated"
    IN_VALIDATION = "in_validation"
    EDITED = "edited"
    VALIDATED = "validated"
    STAGED = "staged"
    PROD = "prod"
    STALE = "stale"
    SUPERSEDED = "superseded"


# The operator's legal moves: from -> the statuses it may go to next.
MOVES: dict[CompositeStatus, tuple[CompositeStatus, ...]] = {
    CompositeStatus.GENERATED: (CompositeStatus.IN_VALIDATION,),
    CompositeStatus.IN_VALIDATION: (CompositeStatus.VALIDATED,),
    CompositeStatus.EDITED: (CompositeStatus.VALIDATED,),  # the ADR's Edited -> Validated
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

# Where an edit may start: anywhere but the end (a superseded composite was replaced by another).
EDITABLE = frozenset(CompositeStatus) - {CompositeStatus.SUPERSEDED}

GLEANER_ACTOR = "gleaner: a source changed"


@dataclass(frozen=True, slots=True)
class Transition(Plain):
    """One recorded move of a composite."""

    from_status: str | None
    to_status: str
    actor: str
    note: str | None
    at: str


@dataclass(frozen=True, slots=True)
class CompositeVersion(Plain):
    """One version of a composite: who wrote it (Gleaner's generator, or the client who edited it) and when."""

    version: int
    snapshot_id: str
    content_hash: str
    generator: str
    by: str | None
    at: str
    note: str | None = None
    current: bool = False


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


def versions(deps: Deps, composite_id: str) -> list[CompositeVersion]:
    return deps.metadata.composite_versions(composite_id)


def check_edit(current: str) -> None:
    if CompositeStatus(current) not in EDITABLE:
        raise IllegalMove(f"a {current} composite cannot be edited (it was replaced by another)")


def edit(deps: Deps, composite_id: str, markdown: str, actor: str, note: str | None = None
         ) -> tuple[Composite, bool]:
    """Write ``markdown`` as the composite's next version, ``edited`` by ``actor`` (see the module
    docstring); (the composite, whether a version was written). InvalidInput (no such composite, an
    empty or oversized body, a bad note), IllegalMove (a superseded composite)."""
    if not isinstance(markdown, str) or not markdown.strip():
        raise InvalidInput("an edit needs the composite's new markdown")
    content = (markdown.strip() + "\n").encode("utf-8")
    if len(content) > MAX_EDIT_BYTES:
        raise InvalidInput(f"an edited composite is at most {MAX_EDIT_BYTES} bytes")
    actor = actor.strip()[:MAX_ACTOR] or "unknown"
    note = (note or "").strip() or None
    if note is not None and len(note) > MAX_NOTE:
        raise InvalidInput(f"a note is at most {MAX_NOTE} characters")
    found = deps.metadata.composite(composite_id)
    if found is None:
        raise InvalidInput(f"no composite {composite_id[:60]}")
    check_edit(found.status)
    content_hash = hashlib.sha1(content).hexdigest()
    key = snapshot_content_key(found.site_domain, found.id, content_hash)
    with contextlib.suppress(BlobConflict):  # an edit back to an earlier body: that body is there already
        deps.blobs.put(key, content)
    snapshot_id = deps.metadata.save_composite_edit(found.id, content_hash, key, actor, note)
    if snapshot_id is not None:
        deps.bus.publish(SnapshotsWritten(run_id=None, site_domain=found.site_domain, snapshot_ids=(snapshot_id,)),
                         ordering_key=found.site_domain)
    edited = deps.metadata.composite(found.id)
    assert edited is not None
    return edited, snapshot_id is not None
