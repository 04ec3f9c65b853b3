"""The language-model port: ``classify_page`` and ``judge_pair``, strict JSON by schema, temperature 0.

A provider adapter (``openai_compat.py``, ``gemini.py``) answers one narrow method, ``complete_json``:
a system prompt, a user prompt and a JSON schema in, the parsed object and its token counts out. This
module puts the two questions Gleaner asks on top of it (prompts and schemas in ``prompts.py``) and
checks every answer against its schema, so a caller gets a typed value or a :class:`ModelError`.

::

    GleanerError
    ├── RetryableError
    │   └── ModelUnavailable   the provider could not be reached or answered with an error
    └── PermanentError
        └── ModelAnswerInvalid the answer was not the JSON the schema asks for
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gleaner.decide import prompts
from gleaner.errors import GleanerError, PermanentError, RetryableError


class ModelError(GleanerError):
    """Anything that kept the model from answering; callers fall back to the rules (never fail a run)."""


class ModelUnavailable(ModelError, RetryableError):
    """The provider was unreachable, timed out, or answered with an HTTP or API error."""


class ModelAnswerInvalid(ModelError, PermanentError):
    """The provider answered, but not with JSON that fits the schema."""


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class JsonAnswer:
    data: dict[str, Any]
    usage: Usage = field(default_factory=Usage)


class Provider(Protocol):
    """One provider's adapter: the model's name and one JSON completion at temperature 0."""

    model: str

    def complete_json(self, system: str, user: str, schema: dict[str, Any], name: str) -> JsonAnswer: ...


@dataclass(frozen=True, slots=True)
class PageClass:
    decision: str  # include | exclude (the model's word; the decider applies the content_kind rule)
    confidence: float
    content_kind: str
    reason: str
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class PairJudgement:
    relation: str  # contradiction | complement | duplicate | unrelated
    severity: str  # none | low | medium | high
    reason: str
    usage: Usage = field(default_factory=Usage)


class LanguageModel:
    """The two questions of DESIGN.md's port, asked of one provider."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider

    @property
    def model(self) -> str:
        return self.provider.model

    def classify_page(self, url: str, title: str | None, sample_markdown: str) -> PageClass:
        answer = self.provider.complete_json(prompts.PAGE_SYSTEM, prompts.page_user(url, title, sample_markdown),
                                             prompts.PAGE_SCHEMA, "page_class")
        data = _checked(answer.data, prompts.PAGE_SCHEMA)
        return PageClass(data["decision"], float(data["confidence"]), data["content_kind"],
                         str(data["reason"]), answer.usage)

    def judge_pair(self, passage_a: str, passage_b: str) -> PairJudgement:
        answer = self.provider.complete_json(prompts.PAIR_SYSTEM, prompts.pair_user(passage_a, passage_b),
                                             prompts.PAIR_SCHEMA, "pair_judgement")
        data = _checked(answer.data, prompts.PAIR_SCHEMA)
        return PairJudgement(data["relation"], data["severity"], str(data["reason"]), answer.usage)


def _checked(data: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """``data`` if it has every required property of ``schema`` with the right type and enum value.

    The schemas are flat objects of strings and numbers, so this small check is the whole of JSON
    Schema they need; a model that ignored its grammar is caught here, not in the caller.
    """
    if not isinstance(data, dict):
        raise ModelAnswerInvalid(f"answer is {type(data).__name__}, not a JSON object")
    for name in schema["required"]:
        spec = schema["properties"][name]
        if name not in data:
            raise ModelAnswerInvalid(f"answer lacks {name!r}")
        value = data[name]
        if spec["type"] == "number":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ModelAnswerInvalid(f"{name!r} is not a number: {value!r}")
            if not spec.get("minimum", value) <= value <= spec.get("maximum", value):
                raise ModelAnswerInvalid(f"{name!r} out of range: {value!r}")
        elif not isinstance(value, str):
            raise ModelAnswerInvalid(f"{name!r} is not a string: {value!r}")
        elif "enum" in spec and value not in spec["enum"]:
            raise ModelAnswerInvalid(f"{name!r} is not one of {spec['enum']}: {value!r}")
    return data
