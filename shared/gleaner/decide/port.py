"""The page decider port: include, exclude or needs_review for each sampled URL.

The rule-based decider ships; the language-model decider (``pagedecider.py``) implements the same
protocol when a provider is configured (its ``source`` is "llm" where the rule decider's is "rule").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class PageFacts:
    """What the decider may look at: the URL, and for sampled pages what the sample showed."""

    url: str
    path: str
    sampled: bool = False
    content_type: str | None = None
    fetch_outcome: str | None = None
    main_text_chars: int | None = None
    title: str | None = None
    # The sample's extracted markdown (what a language model reads) and the run it was sampled for
    # (whose model budget a call is counted against).
    sample_markdown: str | None = None
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class PageDecision:
    # A Verdict (a plain string is accepted and checked: callers that read one back from the ledger).
    decision: str
    reason: str
    confidence: float
    source: str = "rule"
    content_kind: str = "page"
    evidence: tuple[str, ...] = field(default_factory=tuple)
    # More for the decision's metadata (a language model's name, prompt version, tokens, cost).
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "decision", Verdict(self.decision))


class Decider(Protocol):
    def decide(self, facts: PageFacts, exclude: tuple[str, ...] = ()) -> PageDecision: ...


class Verdict(StrEnum):
    """What the decider says of a page (``knowledge.crawl_page_decisions.decision``)."""

    INCLUDE = "include"
    EXCLUDE = "exclude"
    NEEDS_REVIEW = "needs_review"
