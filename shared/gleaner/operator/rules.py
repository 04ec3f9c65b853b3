"""Persistent operator rules: skip (gate 1, never fetched) and block (gate 2, fetched but never ingested).

A rule is a path glob on one site. Adding one materialises it at once onto the site's documents that
match (skip: ``scrape_policy=skip``; block: ``status=blocked``), recording on each document the rule
that did it; every later map and sample re-applies the site's rules
(:meth:`gleaner.store.registry.rules.RuleStore.apply_site_rules`), so a URL
first discovered later is gated too, and a scheduled run that carries no exclude globs keeps every skip.
Removing a rule lifts exactly what it did.

This module decides (which rule gates which document, and how each gate moves); the statements that
read and write rules and documents are :mod:`gleaner.store.registry.rules`, reached through ``deps.metadata``.

Precedence, highest first: the operator's per-URL review decision (``documents.operator_decision``),
then rules (the oldest matching rule of each action; a skip rule before an include rule), then the
decider. An include rule forces pages in over every automatic verdict: URL patterns, a section's
sample, a near-empty page (only a run's own ``--exclude`` globs still leave them out). The map stage's walk asks
:class:`Gate` before it fetches a page, and the sample and scrape stages never fetch a page whose
``scrape_policy`` is an operator skip, so no stage requests a skipped path.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from gleaner.errors import InvalidInput
from gleaner.operator.hooks import GateEvent, StatusChange
from gleaner.operator.sites import site_key
from gleaner.operator.values import Plain
from gleaner.urls import glob_matches, validate_glob

if TYPE_CHECKING:
    from gleaner.app import Deps


class RuleAction(StrEnum):
    SKIP = "skip"
    BLOCK = "block"
    # Not a gate: forces matching pages in over every automatic verdict (the sample stage reads it).
    INCLUDE = "include"
    IGNORE_TEXT = "ignore_text"  # lines matching ``pattern`` are left out of change detection (changes/volatile.py)
    # Not gates: how matching pages are read (gleaner.render.modes.mode_for); applying rules ignores them.
    RENDER_NEVER = "render_never"
    RENDER_AUTO = "render_auto"
    RENDER_ALWAYS = "render_always"


@dataclass(frozen=True, slots=True)
class Rule(Plain):
    id: str
    site_domain: str
    glob: str
    action: RuleAction
    reason: str | None
    created_at: str
    pattern: str | None = None  # an ignore_text rule's regular expression

    def describe(self) -> str:
        what = f" /{self.pattern}/" if self.pattern is not None else ""
        return f"operator rule {self.action} {self.glob}{what}" + (f" ({self.reason})" if self.reason else "")


@dataclass(frozen=True, slots=True)
class Applied:
    """What materialising a site's rules changed: document ids, and the current snapshots now unblocked."""

    skipped: tuple[str, ...] = ()
    unskipped: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    unblocked: tuple[str, ...] = ()
    unblocked_snapshots: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, int]:
        return {"skipped": len(self.skipped), "unskipped": len(self.unskipped), "blocked": len(self.blocked),
                "unblocked": len(self.unblocked)}


@dataclass(frozen=True, slots=True)
class Gate:
    """The operator's gate 1 for one site, pure: skip rules and per-URL review decisions."""

    skips: tuple[Rule, ...] = ()
    excluded: frozenset[str] = field(default_factory=frozenset)
    included: frozenset[str] = field(default_factory=frozenset)

    def skipped(self, canonical_url: str, path: str) -> bool:
        if canonical_url in self.included:
            return False
        return canonical_url in self.excluded or any(glob_matches(path, r.glob) for r in self.skips)


class Transition(StrEnum):
    KEEP = "keep"
    SET = "set"  # gated by this rule (newly, or now by another matching rule)
    LIFT = "lift"  # no rule of this kind matches any more


def transition(recorded_rule_id: str | None, matching: Rule | None) -> Transition:
    """How one gate of a document moves, from the rule recorded on it to the rule that matches now."""
    if (matching.id if matching else None) == recorded_rule_id:
        return Transition.KEEP
    return Transition.SET if matching is not None else Transition.LIFT


def first_match(path: str, rules: Sequence[Rule], action: RuleAction) -> Rule | None:
    """The oldest rule of ``action`` whose glob matches ``path`` (rules come ordered by creation)."""
    return next((r for r in rules if r.action is action and glob_matches(path, r.glob)), None)


@dataclass(frozen=True, slots=True)
class RuleTarget:
    """One document as the rules see it: its path, the rules recorded on it, the operator's review decision."""

    id: str
    path: str
    skip_rule_id: str | None
    block_rule_id: str | None
    operator_decision: str | None
    current_snapshot_id: str | None


@dataclass(frozen=True, slots=True)
class GateUpdate:
    """How one document's two gates move, and the rules that gate it afterwards."""

    document_id: str
    skip: Transition
    skip_rule: Rule | None
    block: Transition
    block_rule: Rule | None


@dataclass(frozen=True, slots=True)
class RulePlan:
    updates: tuple[GateUpdate, ...]
    applied: Applied
    changes: tuple[StatusChange, ...]  # the gate-2 changes to announce (hooks.py)


def plan_rules(site: str, rules: Sequence[Rule], docs: Sequence[RuleTarget], at: str) -> RulePlan:
    """What materialising ``rules`` onto ``docs`` changes (pure); ``at`` makes each status change's cause unique.

    A document gated by a rule records the rule; one that no rule matches any more is lifted: a
    skip goes back to ``scrape``, a block back to ``active`` (or ``discovered`` before its first snapshot).
    """
    updates: list[GateUpdate] = []
    skipped: list[str] = []
    unskipped: list[str] = []
    blocked: list[tuple[str, str]] = []  # (document, the rule that blocks it)
    unblocked: list[tuple[str, str]] = []  # (document, the rule that blocked it)
    snapshots: list[str] = []
    for doc in docs:
        # A review decision on this URL outranks a skip rule (it is the operator's word on this page).
        skip = first_match(doc.path, rules, RuleAction.SKIP) if doc.operator_decision is None else None
        block = first_match(doc.path, rules, RuleAction.BLOCK)
        skip_change, block_change = transition(doc.skip_rule_id, skip), transition(doc.block_rule_id, block)
        if skip_change is Transition.KEEP and block_change is Transition.KEEP:
            continue
        if skip_change is Transition.LIFT:
            unskipped.append(doc.id)
        elif skip_change is Transition.SET and doc.skip_rule_id is None:
            skipped.append(doc.id)
        if block_change is Transition.LIFT:
            unblocked.append((doc.id, doc.block_rule_id or ""))
            if doc.current_snapshot_id is not None:
                snapshots.append(doc.current_snapshot_id)
        elif block and block_change is Transition.SET and doc.block_rule_id is None:
            blocked.append((doc.id, block.id))
        updates.append(GateUpdate(doc.id, skip_change, skip, block_change, block))
    changes = [StatusChange(d, site, GateEvent.BLOCKED, f"rule:{rule}:{at}") for d, rule in blocked]
    changes += [StatusChange(d, site, GateEvent.UNBLOCKED, f"rule:{rule}:{at}") for d, rule in unblocked]
    applied = Applied(tuple(skipped), tuple(unskipped), tuple(d for d, _ in blocked), tuple(d for d, _ in unblocked),
                      tuple(snapshots))
    return RulePlan(tuple(updates), applied, tuple(changes))


def forced_in(path: str, rules: Sequence[Rule], exclude: Sequence[str] = ()) -> Rule | None:
    """The include rule that forces the page at ``path`` in, unless the run's own exclude globs leave it out."""
    if any(glob_matches(path, g) for g in exclude):
        return None
    return first_match(path, rules, RuleAction.INCLUDE)


def list_rules(deps: Deps, site: str) -> list[Rule]:
    return deps.metadata.site_rules(site_key(site))


def add_rule(deps: Deps, site: str, glob: str, action: RuleAction | str, reason: str | None = None,
             pattern: str | None = None) -> tuple[Rule, Applied]:
    """Add (or find) a rule and materialise the site's rules at once; ``pattern`` is an ignore_text rule's."""
    from gleaner.changes.volatile import validate_pattern

    try:
        action = RuleAction(action)
    except ValueError as exc:
        raise InvalidInput(f"a rule is skip, block, include, ignore_text or render_never|auto|always, not {action!r}"
                           ) from exc
    if (action is RuleAction.IGNORE_TEXT) != (pattern is not None):
        raise InvalidInput("an ignore_text rule needs a pattern, and only it takes one")
    checked = validate_pattern(pattern) if pattern is not None else None
    return deps.metadata.add_rule(site_key(site), validate_glob(glob), action, reason, checked)


def remove_rule(deps: Deps, rule_id: str) -> tuple[Rule, Applied]:
    """Remove a rule and lift what it did (another matching rule may keep a document gated)."""
    try:
        uuid.UUID(rule_id)
    except ValueError as exc:
        raise InvalidInput(f"{rule_id!r} is not a rule id") from exc
    return deps.metadata.remove_rule(rule_id)
