"""Persistent operator rules: skip (gate 1, never fetched) and block (gate 2, fetched but never ingested).

A rule is a path glob on one site. Adding one materialises it at once onto the site's documents that
match (skip: ``scrape_policy=skip``; block: ``status=blocked``), recording on each document the rule
that did it; every later map and sample re-applies the site's rules (:func:`apply_rules`), so a URL
first discovered later is gated too, and a scheduled run that carries no exclude globs keeps every skip.
Removing a rule lifts exactly what it did.

Precedence, highest first: the operator's per-URL review decision (``documents.operator_decision``),
then rules (the oldest matching rule of each action), then the decider. The map stage's walk asks
:class:`Gate` before it fetches a page, and the sample and scrape stages never fetch a page whose
``scrape_policy`` is an operator skip, so no stage requests a skipped path.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner.errors import InvalidInput
from gleaner.operator.hooks import GateEvent, StatusChange, announce_gate_changes
from gleaner.operator.sites import site_key
from gleaner.store.sqlstore import json_rows
from gleaner.urls import glob_matches, validate_glob


class RuleAction(StrEnum):
    SKIP = "skip"
    BLOCK = "block"


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    site_domain: str
    glob: str
    action: RuleAction
    reason: str | None
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "action": str(self.action)}

    def describe(self) -> str:
        return f"operator rule {self.action} {self.glob}" + (f" ({self.reason})" if self.reason else "")


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


_RULE_COLUMNS = "id, site_domain, glob, action::text, reason, created_at"


def _rule(row: Any) -> Rule:
    return Rule(str(row[0]), row[1], row[2], RuleAction(row[3]), row[4], row[5].isoformat())


def lock_site_rules(conn: Connection, site: str) -> None:
    """Serialise rule work on one site for the rest of the transaction (adding, removing, applying).

    An advisory lock rather than row locks: applying reads every document of the site, and a row
    lock on each would write to every row on every map and sample.
    """
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": "gleaner.rules:" + site})


def _rules(conn: Connection, site: str, without: str | None = None) -> list[Rule]:
    rows = conn.execute(
        sa.text(f"SELECT {_RULE_COLUMNS} FROM knowledge.site_rules WHERE site_domain = :s"
                " AND id IS DISTINCT FROM CAST(:w AS uuid) ORDER BY created_at, id"),
        {"s": site, "w": without},
    ).all()
    return [_rule(r) for r in rows]


def list_rules(engine: Engine, site: str) -> list[Rule]:
    with engine.connect() as conn:
        return _rules(conn, site_key(site))


def gate_for(engine: Engine, site: str) -> Gate:
    """The site's skip rules and per-URL review decisions, for the map stage's walk."""
    with engine.connect() as conn:
        skips = tuple(r for r in _rules(conn, site) if r.action is RuleAction.SKIP)
        decided = conn.execute(
            # An erased document is excluded like an operator's exclude: the walk must not fetch it again.
            sa.text("SELECT canonical_url, CASE WHEN is_deleted THEN 'exclude' ELSE operator_decision::text END"
                    " FROM knowledge.documents WHERE site_domain = :s"
                    " AND (operator_decision IS NOT NULL OR is_deleted) AND canonical_url IS NOT NULL"),
            {"s": site},
        ).all()
    return Gate(skips, frozenset(u for u, d in decided if d == "exclude"),
                frozenset(u for u, d in decided if d == "include"))


def add_rule(engine: Engine, site: str, glob: str, action: RuleAction | str, reason: str | None = None,
             ) -> tuple[Rule, Applied]:
    """Add (or find) a rule and materialise the site's rules at once."""
    site = site_key(site)
    glob = validate_glob(glob)
    try:
        action = RuleAction(action)
    except ValueError as exc:
        raise InvalidInput(f"a rule is skip or block, not {action!r}") from exc
    with engine.begin() as conn:
        lock_site_rules(conn, site)
        row = conn.execute(
            sa.text(
                "INSERT INTO knowledge.site_rules (site_domain, glob, action, reason)"
                " VALUES (:s, :g, CAST(:a AS knowledge.rule_action), :why)"
                " ON CONFLICT (site_domain, glob, action) DO UPDATE SET reason = COALESCE(EXCLUDED.reason,"
                " knowledge.site_rules.reason) RETURNING " + _RULE_COLUMNS
            ),
            {"s": site, "g": glob, "a": str(action), "why": reason},
        ).one()
        applied = apply_rules(conn, site)
    return _rule(row), applied


def remove_rule(engine: Engine, rule_id: str) -> tuple[Rule, Applied]:
    """Remove a rule and lift what it did (another matching rule may keep a document gated)."""
    try:
        uuid.UUID(rule_id)
    except ValueError as exc:
        raise InvalidInput(f"{rule_id!r} is not a rule id") from exc
    with engine.begin() as conn:
        site = conn.execute(sa.text("SELECT site_domain FROM knowledge.site_rules WHERE id = :i"),
                            {"i": rule_id}).scalar()
        if site is not None:
            lock_site_rules(conn, site)
        row = conn.execute(sa.text(f"SELECT {_RULE_COLUMNS} FROM knowledge.site_rules WHERE id = :i"),
                           {"i": rule_id}).first()
        if row is None:
            raise InvalidInput(f"no rule {rule_id}")
        rule = _rule(row)
        applied = apply_rules(conn, rule.site_domain, without=rule.id)
        conn.execute(sa.text("DELETE FROM knowledge.site_rules WHERE id = :i"), {"i": rule.id})
    return rule, applied


def apply_rules(conn: Connection, site: str, without: str | None = None) -> Applied:
    """Materialise the site's rules onto its documents (in the caller's transaction); idempotent.

    A document gated by a rule records the rule; one that no rule matches any more is lifted: a
    skip goes back to ``scrape``, a block back to ``active`` (or ``discovered`` before its first snapshot).
    """
    lock_site_rules(conn, site)
    rules = _rules(conn, site, without)
    where = "" if rules else " AND (skip_rule_id IS NOT NULL OR block_rule_id IS NOT NULL)"
    docs = conn.execute(
        sa.text(
            "SELECT id, path, skip_rule_id, block_rule_id, operator_decision::text, current_snapshot_id"
            f" FROM knowledge.documents WHERE site_domain = :s AND NOT is_deleted{where} ORDER BY id"
        ),
        {"s": site},
    ).all()
    updates: list[dict[str, Any]] = []
    skipped: list[str] = []
    unskipped: list[str] = []
    blocked: list[tuple[str, str]] = []  # (document, the rule that blocks it)
    unblocked: list[tuple[str, str]] = []  # (document, the rule that blocked it)
    snapshots: list[str] = []
    for doc_id, path, skip_id, block_id, decision, current in docs:
        doc = str(doc_id)
        # A review decision on this URL outranks a skip rule (it is the operator's word on this page).
        skip = first_match(path, rules, RuleAction.SKIP) if decision is None else None
        block = first_match(path, rules, RuleAction.BLOCK)
        old_skip, old_block = (str(skip_id) if skip_id else None), (str(block_id) if block_id else None)
        skip_change, block_change = transition(old_skip, skip), transition(old_block, block)
        if skip_change is Transition.KEEP and block_change is Transition.KEEP:
            continue
        row = {"d": doc, "skip": str(skip_change), "sk": skip.id if skip else None,
               "skr": skip.describe() if skip else None, "block": str(block_change), "bk": block.id if block else None,
               "bkr": block.describe() if block else None}
        if skip_change is Transition.LIFT:
            unskipped.append(doc)
        elif skip_change is Transition.SET and old_skip is None:
            skipped.append(doc)
        if block_change is Transition.LIFT:
            unblocked.append((doc, old_block or ""))
            if current is not None:
                snapshots.append(str(current))
        elif block and block_change is Transition.SET and old_block is None:
            blocked.append((doc, block.id))
        updates.append(row)
    if updates:
        conn.execute(
            sa.text(
                "UPDATE knowledge.documents d SET"
                " scrape_policy = CASE t.skip WHEN 'set' THEN 'skip' WHEN 'lift' THEN 'scrape'"
                "   ELSE d.scrape_policy::text END::knowledge.scrape_policy,"
                " skip_reason = CASE t.skip WHEN 'set' THEN t.skr WHEN 'lift' THEN NULL ELSE d.skip_reason END,"
                " skip_rule_id = CASE t.skip WHEN 'set' THEN t.sk WHEN 'lift' THEN NULL ELSE d.skip_rule_id END,"
                " status = CASE t.block WHEN 'set' THEN 'blocked' WHEN 'lift' THEN"
                "   (CASE WHEN d.current_snapshot_id IS NULL THEN 'discovered' ELSE 'active' END)"
                "   ELSE d.status::text END::knowledge.document_status,"
                " blocked_reason = CASE t.block WHEN 'set' THEN t.bkr WHEN 'lift' THEN NULL ELSE d.blocked_reason END,"
                " block_rule_id = CASE t.block WHEN 'set' THEN t.bk WHEN 'lift' THEN NULL ELSE d.block_rule_id END,"
                " updated_at = now()"
                " FROM json_to_recordset(CAST(:rows AS json))"
                "   AS t(d uuid, skip text, sk uuid, skr text, block text, bk uuid, bkr text)"
                " WHERE d.id = t.d"
            ),
            {"rows": json_rows(updates)},
        )
    if blocked:
        # Gate 2: a blocked document is never routed anywhere.
        conn.execute(sa.text("DELETE FROM knowledge.document_routings WHERE document_id = ANY(CAST(:d AS uuid[]))"),
                     {"d": [d for d, _rule in blocked]})
    at = datetime.now(UTC).isoformat()
    changes = [StatusChange(d, site, GateEvent.BLOCKED, f"rule:{rule}:{at}") for d, rule in blocked]
    changes += [StatusChange(d, site, GateEvent.UNBLOCKED, f"rule:{rule}:{at}") for d, rule in unblocked]
    if changes:
        announce_gate_changes(conn, changes)
    return Applied(tuple(skipped), tuple(unskipped), tuple(d for d, _ in blocked), tuple(d for d, _ in unblocked),
                   tuple(snapshots))


def apply_site_rules(engine: Engine, site: str) -> Applied:
    """:func:`apply_rules` in its own transaction (the map and sample stages call this every run)."""
    with engine.begin() as conn:
        return apply_rules(conn, site)
