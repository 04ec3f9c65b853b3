"""The prompts and JSON schemas of the language-model port, and the version that names them.

``PROMPT_VERSION`` goes into every cached answer's key and every decision's metadata: change a
prompt, a schema or the sample's trimming and bump it, so no answer to an older question is reused.
What worked on small local models (FACTS.md): temperature 0, a schema the server turns into a grammar,
``decision`` before ``content_kind``, and the rule that non-content kinds mean exclude spelled out in the
prompt (and applied in code as well, ``pagedecider.py``).
"""

from __future__ import annotations

from typing import Any

PROMPT_VERSION = "page-2/pair-2"

# The kinds of page that are never knowledge to keep, whatever the model's decision says.
EXCLUDE_KINDS = frozenset({"legal", "login", "listing", "navigation", "other"})
CONTENT_KINDS = ("article", "documentation", "reference", "faq", "news", "product",
                 "legal", "login", "listing", "navigation", "other")

# The sample's head is what the model reads: the opening of a page tells its kind, and a small local
# model reads prompt tokens slowly (docs/llm.md), so a longer sample costs time and tells little more.
SAMPLE_CHARS = 1500
PASSAGE_CHARS = 1500

PAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["include", "exclude"]},
        "content_kind": {"type": "string", "enum": list(CONTENT_KINDS)},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        # Bounded: the grammar then ends the answer, where a free string lets a small model ramble on.
        "reason": {"type": "string", "maxLength": 80},
    },
    "required": ["decision", "content_kind", "confidence", "reason"],
    "additionalProperties": False,
}

PAGE_SYSTEM = (
    "You decide which pages of a website to keep in a knowledge base. You read a page's URL, title and "
    "the start of its text, and answer with JSON only.\n"
    "Keep (include) pages whose text explains or informs: articles, documentation, reference, FAQ, news, "
    "product descriptions.\n"
    "Drop (exclude) pages that are not knowledge: legal text (privacy, cookies, terms, licences), login or "
    "sign-up forms, listings or indexes of other pages (tag archives, category pages, tables of contents), "
    "navigation or near-empty landing pages, and anything else without real text.\n"
    "Rule: content_kind legal, login, listing, navigation or other means decision exclude.\n"
    'Answer as {"decision": "include|exclude", "content_kind": "...", "confidence": 0.0-1.0, '
    '"reason": "a few words"}.'
)


def page_user(url: str, title: str | None, sample_markdown: str) -> str:
    text = sample_markdown.strip()
    head = text[:SAMPLE_CHARS] + (" […]" if len(text) > SAMPLE_CHARS else "")
    return (f"URL: {url}\nTitle: {(title or '').strip() or '(none)'}\n"
            f"Text length: {len(text)} characters\nText:\n{head or '(empty)'}")


PAIR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "relation": {"type": "string", "enum": ["contradiction", "complement", "duplicate", "unrelated"]},
        "severity": {"type": "string", "enum": ["none", "low", "medium", "high"]},
        "reason": {"type": "string", "maxLength": 120},
    },
    "required": ["relation", "severity", "reason"],
    "additionalProperties": False,
}

PAIR_SYSTEM = (
    "You compare two passages from a knowledge base and answer with JSON only.\n"
    "relation: contradiction (they state incompatible facts), complement (same subject, they add to each "
    "other), duplicate (they say the same thing), unrelated (different subjects).\n"
    "severity: how much a reader could be misled if both stay: none, low, medium or high (a contradiction "
    "about numbers, dates, prices or rules is high).\n"
    'Answer as {"relation": "...", "severity": "...", "reason": "a few words"}.'
)


def pair_user(passage_a: str, passage_b: str) -> str:
    return f"Passage A:\n{passage_a.strip()[:PASSAGE_CHARS]}\n\nPassage B:\n{passage_b.strip()[:PASSAGE_CHARS]}"
