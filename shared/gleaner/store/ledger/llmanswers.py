"""The language model's cached answers and each run's model budget (migration 0044).

``AnswerCache`` keeps an answer by (input hash, model, prompt version): an unchanged sample asked by a
later run costs no call. ``RunBudget`` reserves a call before it is made, in one statement under the
run's row lock, so the workers of one run (local threads, cloud instances) share one budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    answer: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int


class AnswerCache:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, input_hash: str, model: str, prompt_version: str) -> CachedAnswer | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.text(
                "SELECT answer, prompt_tokens, completion_tokens FROM knowledge.llm_answers"
                " WHERE input_hash = :h AND model = :m AND prompt_version = :v"),
                {"h": input_hash, "m": model, "v": prompt_version}).first()
        return CachedAnswer(dict(row[0]), int(row[1]), int(row[2])) if row else None

    def put(self, input_hash: str, model: str, prompt_version: str, answer: dict[str, Any],
            prompt_tokens: int, completion_tokens: int) -> None:
        """Keep an answer; the first one kept for a key stands (temperature 0: a second would be the same)."""
        with self.engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO knowledge.llm_answers"
                " (input_hash, model, prompt_version, answer, prompt_tokens, completion_tokens)"
                " VALUES (:h, :m, :v, CAST(:a AS jsonb), :pt, :ct) ON CONFLICT DO NOTHING"),
                {"h": input_hash, "m": model, "v": prompt_version, "a": json.dumps(answer),
                 "pt": prompt_tokens, "ct": completion_tokens})


@dataclass(frozen=True, slots=True)
class Usage:
    calls: int
    tokens: int
    refused: int


class RunBudget:
    def __init__(self, engine: Engine, max_calls: int, max_tokens: int) -> None:
        self.engine = engine
        self.max_calls = max_calls
        self.max_tokens = max_tokens

    def reserve(self, run_id: str) -> bool:
        """Count one call against ``run_id``'s budget if the budget allows it; False (and a refusal counted)
        when its calls or tokens are spent."""
        with self.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO knowledge.llm_run_usage (run_id) VALUES (:r) ON CONFLICT DO NOTHING"),
                         {"r": run_id})
            granted = conn.execute(sa.text(
                "UPDATE knowledge.llm_run_usage SET calls = calls + 1"
                " WHERE run_id = :r AND calls < :mc AND tokens < :mt RETURNING calls"),
                {"r": run_id, "mc": self.max_calls, "mt": self.max_tokens}).first() is not None
            if not granted:
                conn.execute(sa.text("UPDATE knowledge.llm_run_usage SET refused = refused + 1 WHERE run_id = :r"),
                             {"r": run_id})
        return granted

    def spend(self, run_id: str, tokens: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.text("UPDATE knowledge.llm_run_usage SET tokens = tokens + :t WHERE run_id = :r"),
                         {"r": run_id, "t": tokens})

    def usage(self, run_id: str) -> Usage:
        with self.engine.connect() as conn:
            row = conn.execute(sa.text("SELECT calls, tokens, refused FROM knowledge.llm_run_usage WHERE run_id = :r"),
                               {"r": run_id}).first()
        return Usage(int(row[0]), int(row[1]), int(row[2])) if row else Usage(0, 0, 0)


def model_usage(engine: Engine, run_id: str) -> dict[str, Any] | None:
    """What the language model did for a run, from its recorded section samples: per model, the samples read,
    how many came from the cache (or an earlier run's carried-over verdict), how many fell back to the rules
    (with the commonest reason), tokens and cost. None when no sample of the run went through the model."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT decision_metadata->>'model' AS model, count(*) AS asked,"
            " count(*) FILTER (WHERE carried OR (decision_metadata->>'cached')::boolean) AS cached,"
            " count(*) FILTER (WHERE decision_metadata ? 'llm_fallback') AS fell_back,"
            " coalesce(sum((decision_metadata->>'tokens')::bigint) FILTER (WHERE NOT carried), 0) AS tokens,"
            " coalesce(sum((decision_metadata->>'cost')::numeric) FILTER (WHERE NOT carried), 0) AS cost,"
            " mode() WITHIN GROUP (ORDER BY decision_metadata->>'llm_fallback') AS why"
            # A verdict carried over from an earlier run (its sample answered 304) cost this run nothing.
            " FROM (SELECT decision_metadata, coalesce(decision_metadata #>> '{sample,decided_in_run}',"
            "       CAST(run_id AS text)) <> CAST(run_id AS text) AS carried"
            "       FROM knowledge.crawl_page_decisions WHERE run_id = :r AND sample_uri IS NOT NULL"
            "       AND decision_metadata ? 'model' AND decision_metadata ? 'prompt_version') AS d"
            " GROUP BY 1 ORDER BY 2 DESC"), {"r": run_id}).all()
        usage = conn.execute(sa.text("SELECT calls, tokens, refused FROM knowledge.llm_run_usage WHERE run_id = :r"),
                             {"r": run_id}).first()
    if not rows:
        return None
    return {"models": [{"model": r.model, "samples": int(r.asked), "cached": int(r.cached),
                        "fell_back": int(r.fell_back), "fallback_reason": r.why, "tokens": int(r.tokens),
                        "cost": float(r.cost)} for r in rows],
            "calls": int(usage[0]) if usage else 0, "refused": int(usage[2]) if usage else 0}
