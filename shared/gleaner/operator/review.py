"""Review: settle the pages the decider could not (``needs_review``) with the operator's decision.

``decide`` records the decision on the document (``documents.operator_decision``), where every later
run's sample stage reads it before any rule or the decider (``decision_source=operator``), and
materialises it at once: exclude skips the page (gate 1), include lifts any skip. The latest run's
ledger row is settled too, so the page leaves the review list.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from gleaner.errors import InvalidInput
from gleaner.operator.rules import apply_rules, lock_site_rules
from gleaner.operator.sites import site_key
from gleaner.urls import canonicalize

if TYPE_CHECKING:
    from gleaner.app import Deps


class ReviewDecision(StrEnum):
    INCLUDE = "include"
    EXCLUDE = "exclude"


@dataclass(frozen=True, slots=True)
class ReviewItem:
    document_id: str
    url: str
    path: str
    run_id: str
    reason: str | None
    confidence: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Decided:
    document_id: str
    site_domain: str
    url: str
    decision: ReviewDecision
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "decision": str(self.decision)}


def review_list(deps: Deps, site: str) -> list[ReviewItem]:
    """Pages of the site's latest sampled run that need review and have no operator decision yet."""
    with deps.metadata.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "WITH latest AS (SELECT id FROM knowledge.crawl_runs WHERE site_domain = :s"
                "   AND status IN ('scraping', 'finished', 'partial') ORDER BY created_at DESC LIMIT 1)"
                " SELECT d.id, d.canonical_url, d.path, c.run_id, c.decision_reason, c.decision_confidence"
                " FROM latest JOIN knowledge.crawl_page_decisions c ON c.run_id = latest.id"
                " JOIN knowledge.documents d ON d.id = c.document_id"
                " WHERE c.decision = 'needs_review' AND d.operator_decision IS NULL ORDER BY d.path"
            ),
            {"s": site_key(site)},
        ).all()
    return [ReviewItem(str(r[0]), r[1], r[2], str(r[3]), r[4], r[5]) for r in rows]


def decide(deps: Deps, url: str, decision: ReviewDecision | str, *, site_domain: str | None = None,
           reason: str | None = None) -> Decided:
    """The operator's decision on one URL; it persists across runs and outranks rules and the decider."""
    try:
        decision = ReviewDecision(decision)
    except ValueError as exc:
        raise InvalidInput(f"a review decision is include or exclude, not {decision!r}") from exc
    canonical = canonicalize(url)
    site = site_key(site_domain) if site_domain else None
    why = f"operator review: {decision}" + (f" ({reason})" if reason else "")
    with deps.metadata.engine.begin() as conn:
        found = conn.execute(
            sa.text("SELECT id, site_domain FROM knowledge.documents WHERE canonical_url = :u"
                    " AND (CAST(:s AS text) IS NULL OR site_domain = :s) ORDER BY site_domain"),
            {"u": canonical, "s": site},
        ).all()
        if not found:
            raise InvalidInput(f"no document for {canonical}" + (f" in site {site}" if site else ""))
        if len(found) > 1:
            raise InvalidInput(f"{canonical} is known under several sites ({', '.join(r[1] for r in found)}):"
                               " name one with --site-domain")
        doc_id, doc_site = str(found[0][0]), found[0][1]
        lock_site_rules(conn, doc_site)  # before any row lock: the order every rule writer takes
        exclude = decision is ReviewDecision.EXCLUDE
        conn.execute(
            sa.text(
                "UPDATE knowledge.documents SET operator_decision = CAST(:dec AS knowledge.page_decision),"
                " operator_reason = :why, operator_decided_at = now(),"
                " scrape_policy = CAST(:pol AS knowledge.scrape_policy), skip_reason = :skr, skip_rule_id = NULL,"
                " updated_at = now() WHERE id = :d"
            ),
            {"dec": str(decision), "why": reason, "pol": "skip" if exclude else "scrape",
             "skr": why if exclude else None, "d": doc_id},
        )
        conn.execute(
            sa.text(
                "UPDATE knowledge.crawl_page_decisions SET decision = CAST(:dec AS knowledge.page_decision),"
                " decision_source = 'operator', decision_reason = :why, decision_confidence = 1.0"
                " WHERE document_id = :d AND decision = 'needs_review'"
                " AND run_id = (SELECT id FROM knowledge.crawl_runs WHERE site_domain = :s"
                "   ORDER BY created_at DESC LIMIT 1)"
            ),
            {"dec": str(decision), "why": why, "d": doc_id, "s": doc_site},
        )
        apply_rules(conn, doc_site)
    return Decided(doc_id, doc_site, canonical, decision, reason)
