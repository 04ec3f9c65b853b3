"""Review: settle the pages the decider could not (``needs_review``), or keep pages a run excluded, with the
operator's decision.

``decide`` records the decision on the document (``documents.operator_decision``), where every later
run's sample stage reads it before any rule or the decider (``decision_source=operator``), and
materialises it at once: exclude skips the page (gate 1), include lifts any skip. The latest run's
ledger row is settled too, so the page leaves the review list (:mod:`gleaner.store.registry.review` writes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from gleaner.errors import InvalidInput
from gleaner.operator.sites import site_key
from gleaner.operator.values import Plain
from gleaner.urls import canonicalize

if TYPE_CHECKING:
    from gleaner.app import Deps


class ReviewDecision(StrEnum):
    INCLUDE = "include"
    EXCLUDE = "exclude"


@dataclass(frozen=True, slots=True)
class ReviewItem(Plain):
    document_id: str
    url: str
    path: str
    run_id: str
    reason: str | None
    confidence: float | None
    decision: str = "needs_review"  # or "exclude": a page the run left out, listed to be kept with one decision


@dataclass(frozen=True, slots=True)
class Decided(Plain):
    document_id: str
    site_domain: str
    url: str
    decision: ReviewDecision
    reason: str | None


def review_list(deps: Deps, site: str) -> list[ReviewItem]:
    """Pages of the site's latest sampled run that need review, then those it excluded (with the reason), that
    have no operator decision yet: ``decide(url, "include")`` keeps one in every later run."""
    return deps.metadata.review_items(site_key(site))


def decide(deps: Deps, url: str, decision: ReviewDecision | str, *, site_domain: str | None = None,
           reason: str | None = None) -> Decided:
    """The operator's decision on one URL; it persists across runs and outranks rules and the decider."""
    try:
        decision = ReviewDecision(decision)
    except ValueError as exc:
        raise InvalidInput(f"a review decision is include or exclude, not {decision!r}") from exc
    why = f"operator review: {decision}" + (f" ({reason})" if reason else "")
    return deps.metadata.record_review(canonicalize(url), site_key(site_domain) if site_domain else None, decision,
                                       reason, why)
