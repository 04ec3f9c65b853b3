"""The language-model page decider: the seed's Phase 2, behind the same port as the rules.

The rules speak first: an operator's exclude glob, a URL that is never knowledge, a sample that is no
page or could not be fetched stand as the rules say (the model would only be asked to agree). A sampled
page with text is asked of the model: its answer is looked up by (input hash, model, prompt version)
before any call, a call is reserved against the run's budget, and the answer becomes the verdict:

- below the confidence floor: review, whatever the kind or decision (Qwen2.5-Coder-1.5B called a
  FAQ "legal" with confidence 0: an unsure answer must not drop a page of prose);
- ``content_kind`` legal, login, listing, navigation or other means exclude, whatever the model's
  decision (small models mark a cookie policy "legal" and "include");
- a model that excludes a page it calls content contradicts itself: review, not exclude.

The model never fails a run: an unreachable provider, an answer that breaks the schema or a spent
budget leaves the rules' verdict, with why in its reason and metadata.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from gleaner.decide.language import LanguageModel, ModelError, PageClass, Usage
from gleaner.decide.port import Decider, PageDecision, PageFacts, Verdict
from gleaner.decide.prompts import EXCLUDE_KINDS, PROMPT_VERSION, page_user
from gleaner.store.ledger.llmanswers import AnswerCache, RunBudget

log = logging.getLogger(__name__)

SOURCE = "llm"
# The rules' kinds the model is asked about: a sample with text (thin or not).
_ASKED_KINDS = frozenset({"article", "thin"})


@dataclass(frozen=True, slots=True)
class Prices:
    """Per million tokens, in the provider's currency (0: a local model)."""

    prompt: float = 0.0
    completion: float = 0.0

    def cost(self, usage: Usage) -> float:
        return round((usage.prompt_tokens * self.prompt + usage.completion_tokens * self.completion) / 1e6, 6)


class LLMDecider:
    def __init__(self, model: LanguageModel, rules: Decider, cache: AnswerCache, budget: RunBudget, *,
                 min_confidence: float = 0.6, prices: Prices | None = None) -> None:
        self.model = model
        self.rules = rules
        self.cache = cache
        self.budget = budget
        self.min_confidence = min_confidence
        self.prices = prices or Prices()

    def decide(self, facts: PageFacts, exclude: tuple[str, ...] = ()) -> PageDecision:
        ruled = self.rules.decide(facts, exclude)
        if not facts.sampled or facts.sample_markdown is None or ruled.content_kind not in _ASKED_KINDS:
            return ruled
        user = page_user(facts.url, facts.title, facts.sample_markdown)
        key = input_hash(user)
        about = {"model": self.model.model, "prompt_version": PROMPT_VERSION, "input_hash": key}
        cached = self.cache.get(key, self.model.model, PROMPT_VERSION)
        if cached is not None:
            answer = PageClass(**cached.answer, usage=Usage(cached.prompt_tokens, cached.completion_tokens))
            return self._verdict(answer, {**about, "cached": True, "tokens": 0, "cost": 0.0})
        if facts.run_id is not None and not self.budget.reserve(facts.run_id):
            return _fallback(ruled, "the run's language-model budget is spent", about)
        try:
            answer = self.model.classify_page(facts.url, facts.title, facts.sample_markdown)
        except ModelError as exc:
            log.warning("language model failed on %s, the rules decide: %s", facts.url, exc)
            return _fallback(ruled, f"language model failed: {exc}", about)
        if facts.run_id is not None:
            self.budget.spend(facts.run_id, answer.usage.total)
        self.cache.put(key, self.model.model, PROMPT_VERSION,
                       {"decision": answer.decision, "confidence": answer.confidence,
                        "content_kind": answer.content_kind, "reason": answer.reason},
                       answer.usage.prompt_tokens, answer.usage.completion_tokens)
        return self._verdict(answer, {**about, "cached": False, "tokens": answer.usage.total,
                                      "prompt_tokens": answer.usage.prompt_tokens,
                                      "completion_tokens": answer.usage.completion_tokens,
                                      "cost": self.prices.cost(answer.usage)})

    def _verdict(self, answer: PageClass, about: dict[str, Any]) -> PageDecision:
        decision, why = verdict_of(answer, self.min_confidence)
        metadata = {**about, "reason": answer.reason, "model_decision": answer.decision}
        return PageDecision(decision, f"{why}: {answer.reason}" if why else answer.reason,
                            round(answer.confidence, 3), SOURCE, answer.content_kind, metadata=metadata)


def verdict_of(answer: PageClass, min_confidence: float) -> tuple[Verdict, str]:
    """The verdict a model's answer makes, and a word on why when it is not the model's own decision."""
    if answer.confidence < min_confidence:  # first: an unsure answer excludes nothing, whatever its kind
        return Verdict.NEEDS_REVIEW, f"low confidence ({answer.confidence:.2f})"
    if answer.content_kind in EXCLUDE_KINDS:
        return Verdict.EXCLUDE, "" if answer.decision == "exclude" else f"{answer.content_kind} is never kept"
    if answer.decision == "exclude":
        return Verdict.NEEDS_REVIEW, f"model excluded a page it calls {answer.content_kind}"
    return Verdict.INCLUDE, ""


def input_hash(user_prompt: str) -> str:
    """What the model is asked about a page (its URL, title and trimmed sample), hashed."""
    return hashlib.sha256(user_prompt.encode("utf-8")).hexdigest()


def _fallback(ruled: PageDecision, why: str, about: dict[str, Any]) -> PageDecision:
    return PageDecision(ruled.decision, f"{ruled.reason} (rules: {why})", ruled.confidence, ruled.source,
                        ruled.content_kind, ruled.evidence, metadata={**about, "llm_fallback": why})

