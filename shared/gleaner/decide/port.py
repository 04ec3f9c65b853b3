"""The page decider port: include, exclude or needs_review for each sampled URL.

The rule-based decider ships; an LLM decider implements the same protocol later
(its ``source`` is "system" where the rule decider's is "rule").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


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


@dataclass(frozen=True, slots=True)
class PageDecision:
    decision: str  # include | exclude | needs_review
    reason: str
    confidence: float
    source: str = "rule"
    content_kind: str = "page"
    evidence: tuple[str, ...] = field(default_factory=tuple)


class Decider(Protocol):
    def decide(self, facts: PageFacts, exclude: tuple[str, ...] = ()) -> PageDecision: ...
