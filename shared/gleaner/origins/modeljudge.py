"""The language model's judge behind the :class:`~gleaner.origins.judge.PairJudge` seam, with the rules behind it.

When a model is configured (``GLEANER_LLM_*``, docs/llm.md), the contradiction detector asks it about
each candidate pair (``LanguageModel.judge_pair``: contradiction, complement, duplicate or unrelated,
a severity and a reason, by schema at temperature 0), and a contradiction it finds is recorded with
``detected_by = llm_judge`` and the whole two passages as evidence (a model names no sentence).

The model never costs the ingest: a pair it cannot judge (unreachable, an error, an answer off the
schema) is judged by the rules instead, with a warning, and so is every later pair of that detector
pass (one failure is enough to know the provider is out; the next pass asks again). A pass asks the
model at most ``budget`` questions, the most similar pairs first; the rest go to the rules. Two
passages with the same words are a duplicate without a question, and a pair in which no sentence of
one speaks of what a sentence of the other says in other words (``judge.worth_judging``: the
sentences are the same, or about other things) is unrelated without one: a site's repeated
boilerplate costs no model call.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Protocol

from gleaner.decide.language import ModelError, PairJudgement
from gleaner.decide.prompts import PROMPT_VERSION
from gleaner.origins.judge import Judgement, PairJudge, Relation, RulesJudge, worth_judging
from gleaner.provenance.conflicts import DetectedBy, Severity

log = logging.getLogger(__name__)

# The model's four-step severity on the conflict's three (a "none" contradiction still asks for a look).
SEVERITY = {"none": Severity.INFO, "low": Severity.INFO, "medium": Severity.WARN, "high": Severity.ERROR}


class PairModel(Protocol):
    """The one question of decide/'s LanguageModel this judge asks."""

    @property
    def model(self) -> str: ...

    def judge_pair(self, passage_a: str, passage_b: str) -> PairJudgement: ...


class ModelJudge:
    """One detector pass's judge (see the module docstring): build one per pass."""

    detected_by = DetectedBy.LLM_JUDGE

    def __init__(self, model: PairModel, budget: int, fallback: PairJudge | None = None) -> None:
        self.model = model
        self.version = f"llm:{model.model}/{PROMPT_VERSION}"
        self.budget = budget
        self.fallback = fallback or RulesJudge()
        self.asked = 0
        self.failure: str | None = None  # why the model was given up on in this pass

    def judge_pair(self, passage_a: str, passage_b: str) -> Judgement:
        if " ".join(passage_a.split()) == " ".join(passage_b.split()):
            return Judgement(Relation.DUPLICATE, Severity.INFO, "the same text", judged_by=self.detected_by,
                             judge_version=self.version)
        if not worth_judging(passage_a, passage_b):
            return Judgement(Relation.UNRELATED, Severity.INFO, "no sentence of one is about what the other says",
                             judged_by=self.detected_by, judge_version=self.version)
        if self.failure is not None or self.asked >= self.budget:
            return self._rules(passage_a, passage_b)
        self.asked += 1
        try:
            answer = self.model.judge_pair(passage_a, passage_b)
        except ModelError as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            log.warning(json.dumps({"event": "llm-judge-fallback", "model": self.model.model,
                                    "error": self.failure[:300], "judge": self.fallback.version}))
            return self._rules(passage_a, passage_b)
        return Judgement(Relation(answer.relation), SEVERITY[answer.severity], answer.reason,
                         judged_by=self.detected_by, judge_version=self.version)

    def _rules(self, passage_a: str, passage_b: str) -> Judgement:
        verdict = self.fallback.judge_pair(passage_a, passage_b)
        return replace(verdict, judged_by=self.fallback.detected_by, judge_version=self.fallback.version)
