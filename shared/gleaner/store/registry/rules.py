"""Operator rules in PostgreSQL: ``knowledge.site_rules`` and their materialisation onto ``knowledge.documents``.

Which rule gates which document is decided in :mod:`gleaner.operator.rules` (pure); this module reads
the rules and documents, writes what the plan says, and announces gate-2 changes (change events) in the
same transaction, so a status change and its event commit together or not at all.

Rule work on one site is serialised by an advisory lock (:func:`lock_site_rules`) taken before any row
lock: adding, removing and applying rules, and a review decision, all take it first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gleaner.changes.events import Change, EventType
from gleaner.errors import InvalidInput
from gleaner.operator.hooks import StatusChange
from gleaner.operator.rules import Applied, Gate, Rule, RuleAction, RuleTarget, plan_rules
from gleaner.retrieval.index import remove_documents
from gleaner.store.backends import generation
from gleaner.store.backends.generation import cache_of
from gleaner.store.backends.sqlstore import SqlStore, json_rows
from gleaner.store.notifications.events import record_changes
from gleaner.urls import glob_matches

_RULE_COLUMNS = "id, site_domain, glob, action::text, reason, created_at, pattern"


def _rule(row: Any) -> Rule:
    return Rule(str(row[0]), row[1], row[2], RuleAction(row[3]), row[4], row[5].isoformat(), row[6])


def _text(value: Any) -> str | None:
    return str(value) if value is not None else None


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


def announce_gate_changes(conn: Connection, changes: Sequence[StatusChange]) -> None:
    """One ``document.blocked`` / ``document.unblocked`` event per change, in the caller's transaction.

    The events go out with the next outbox flush (:func:`gleaner.changes.outbox.flush_after_commit`).
    """
    record_changes(conn, [Change(document_id=c.document_id, type=EventType(str(c.event)), cause=c.cause)
                          for c in changes])


def apply_rules(conn: Connection, site: str, without: str | None = None) -> Applied:
    """Materialise the site's rules onto its documents (in the caller's transaction); idempotent."""
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
    plan = plan_rules(site, rules, [RuleTarget(str(r[0]), r[1], _text(r[2]), _text(r[3]), r[4], _text(r[5]))
                                    for r in docs], datetime.now(UTC).isoformat())
    if plan.updates:
        conn.execute(
            sa.text(
                "UPDATE knowledge.documents d SET"
                " scrape_policy = CASE t.skip WHEN 'set' THEN 'skip' WHEN 'lift' THEN 'scrape'"
                "   ELSE d.scrape_policy::text END::knowledge.scrape_policy,"
                " skip_reason = CASE t.skip WHEN 'set' THEN t.skr WHEN 'lift' THEN NULL ELSE d.skip_reason END,"
                " skip_by_decider = CASE WHEN t.skip IN ('set', 'lift') THEN false ELSE d.skip_by_decider END,"
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
            {"rows": json_rows([
                {"d": u.document_id, "skip": str(u.skip), "sk": u.skip_rule.id if u.skip_rule else None,
                 "skr": u.skip_rule.describe() if u.skip_rule else None, "block": str(u.block),
                 "bk": u.block_rule.id if u.block_rule else None,
                 "bkr": u.block_rule.describe() if u.block_rule else None}
                for u in plan.updates])},
        )
    if plan.applied.blocked:
        # Gate 2: a blocked document is never routed anywhere.
        conn.execute(sa.text("DELETE FROM knowledge.document_routings WHERE document_id = ANY(CAST(:d AS uuid[]))"),
                     {"d": list(plan.applied.blocked)})
        remove_documents(conn, list(plan.applied.blocked))
    if plan.changes:
        announce_gate_changes(conn, plan.changes)
    return plan.applied


def lift_decider_skips(conn: Connection, site: str, glob: str) -> list[str]:
    """An include rule at once: pages the decider skipped that ``glob`` matches are to be scraped again."""
    rows = conn.execute(sa.text("SELECT id, path FROM knowledge.documents WHERE site_domain = :s"
                                " AND scrape_policy = 'skip' AND skip_by_decider AND NOT is_deleted"),
                        {"s": site}).all()
    lifted = [str(r[0]) for r in rows if glob_matches(r[1], glob)]
    if lifted:
        conn.execute(sa.text("UPDATE knowledge.documents SET scrape_policy = 'scrape', skip_reason = NULL,"
                             " skip_by_decider = false, updated_at = now() WHERE id = ANY(CAST(:d AS uuid[]))"),
                     {"d": lifted})
    return lifted


def _all_rules(conn: Connection, site: str) -> tuple[Rule, ...]:
    return tuple(_rules(conn, site))


class RuleStore(SqlStore):
    def _cached_rules(self, site: str) -> tuple[Rule, ...]:
        """The site's rules, kept per process while the cache generation stands (store/backends/generation.py): any
        rule written anywhere moves it. Applying rules (:func:`apply_rules`) reads them under its lock instead."""
        return cache_of(self, "_site_rules", _all_rules).get(site)

    def site_rules(self, site: str) -> list[Rule]:
        return list(self._cached_rules(site))

    def gate_for(self, site: str) -> Gate:
        """The site's skip rules and per-URL review decisions, for the map stage's walk."""
        skips = tuple(r for r in self._cached_rules(site) if r.action is RuleAction.SKIP)
        with self.engine.connect() as conn:
            decided = conn.execute(
                # An erased document is excluded like an operator's exclude: the walk must not fetch it again.
                sa.text("SELECT canonical_url, CASE WHEN is_deleted THEN 'exclude' ELSE operator_decision::text END"
                        " FROM knowledge.documents WHERE site_domain = :s"
                        " AND (operator_decision IS NOT NULL OR is_deleted) AND canonical_url IS NOT NULL"),
                {"s": site},
            ).all()
        return Gate(skips, frozenset(u for u, d in decided if d == "exclude"),
                    frozenset(u for u, d in decided if d == "include"))

    def ignore_rules(self, site: str) -> list[Rule]:
        """The site's ignore_text rules, oldest first (the snapshot stage's change detection)."""
        return [r for r in self._cached_rules(site) if r.action is RuleAction.IGNORE_TEXT]

    def add_rule(self, site: str, glob: str, action: RuleAction, reason: str | None,
                 pattern: str | None = None) -> tuple[Rule, Applied]:
        """Add (or find) a rule (already validated) and materialise the site's rules at once."""
        with self._tx() as conn:
            lock_site_rules(conn, site)
            row = conn.execute(
                sa.text(
                    "INSERT INTO knowledge.site_rules (site_domain, glob, action, reason, pattern)"
                    " VALUES (:s, :g, CAST(:a AS knowledge.rule_action), :why, :p)"
                    " ON CONFLICT (site_domain, glob, action, (COALESCE(pattern, '')))"
                    " DO UPDATE SET reason = COALESCE(EXCLUDED.reason,"
                    " knowledge.site_rules.reason) RETURNING " + _RULE_COLUMNS
                ),
                {"s": site, "g": glob, "a": str(action), "why": reason, "p": pattern},
            ).one()
            applied = apply_rules(conn, site)
            if action is RuleAction.INCLUDE:
                applied = replace(applied, unskipped=(*applied.unskipped, *lift_decider_skips(conn, site, glob)))
        generation.moved(self.engine)
        return _rule(row), applied

    def remove_rule(self, rule_id: str) -> tuple[Rule, Applied]:
        """Remove a rule and lift what it did; InvalidInput if there is no such rule."""
        with self._tx() as conn:
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
        generation.moved(self.engine)
        return rule, applied

    def apply_site_rules(self, site: str) -> Applied:
        """:func:`apply_rules` in its own transaction (the map and sample stages call this every run)."""
        with self._tx() as conn:
            return apply_rules(conn, site)
