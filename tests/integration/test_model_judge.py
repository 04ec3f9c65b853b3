"""The contradiction detector's judge is the configured language model, and the rules stand in when it fails.

Why a fixed-answer server and not SmolLM2 (tests/llm_server.py): that model is too small to judge a
pair reliably (tests/integration/test_llm_decider.py only checks it answers by the schema), and these
tests are about what Gleaner does with a verdict: record it as ``llm_judge``, let a "complement" overrule
what the rules would call a contradiction, fall back when the provider fails. So a real HTTP server on
127.0.0.1 speaks the OpenAI chat-completions protocol with answers chosen by the passages, and Gleaner's
real adapter (gleaner.decide.openai_compat) talks to it. The last test asks the real small model
one pair through the same judge, for the protocol only.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import sqlalchemy as sa

from gleaner.decide.language import LanguageModel
from gleaner.decide.openai_compat import OpenAICompatible
from gleaner.origins.feedback import About, give_feedback
from gleaner.origins.judge import Relation
from gleaner.origins.landing import land
from gleaner.origins.modeljudge import ModelJudge
from gleaner.origins.store import DocumentIdentity

from ..llm_server import ALIAS, closed_port_url, llm_server  # noqa: F401

SITE = "acme.test"
PRICING = "# Pricing\n\nThe Pro plan price is 22 euros per month, billed yearly.\n"


class FixedModel(ThreadingHTTPServer):
    """An OpenAI-compatible endpoint whose verdict depends on the passages: "24" against "22" is a
    contradiction, anything else a complement; ``broken`` answers HTTP 500 to everything."""

    daemon_threads = True

    def __init__(self, broken: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.broken = broken
        self.asked: list[str] = []  # the user prompts received

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: FixedModel

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        user = body["messages"][-1]["content"]
        self.server.asked.append(user)
        if self.server.broken:
            self._send(500, {"error": {"message": "the model is out of memory"}})
            return
        if "24" in user and "22" in user:
            verdict = {"relation": "contradiction", "severity": "high", "reason": "the prices disagree"}
        else:
            verdict = {"relation": "complement", "severity": "none", "reason": "they add to each other"}
        self._send(200, {"choices": [{"message": {"role": "assistant", "content": json.dumps(verdict)}}],
                         "usage": {"prompt_tokens": 90, "completion_tokens": 20}})

    def _send(self, status: int, answer: dict[str, Any]) -> None:
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def _serve(broken: bool = False) -> Iterator[FixedModel]:
    server = FixedModel(broken)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def model() -> Iterator[FixedModel]:
    yield from _serve()


@pytest.fixture
def broken_model() -> Iterator[FixedModel]:
    yield from _serve(broken=True)


def _page(deps: Any) -> str:
    ident = DocumentIdentity(SITE, f"upload://{SITE}/pricing.md", "/pricing.md", "upload", title="Pricing")
    return land(deps, ident, PRICING, extractor="test").document_id


def _conflicts(deps: Any) -> list[Any]:
    with deps.engine.connect() as conn:
        return list(conn.execute(sa.text("SELECT detected_by::text, detector_version, details->>'reason',"
                                         " severity::text FROM knowledge.document_conflicts")).all())


def _with_model(make_deps: Any, url: str, **overrides: Any) -> Any:
    return make_deps(llm_provider="openai", llm_base_url=url, llm_model="fixed", llm_json_mode="json_schema",
                     **overrides)


def test_a_configured_model_judges_the_pair_and_its_contradiction_is_recorded_as_llm_judge(make_deps, model):
    deps = _with_model(make_deps, model.url)
    page = _page(deps)
    landed = give_feedback(deps, SITE, "The price is 24, not 22.", "cli:alice", About(document_id=page))
    (conflict,) = landed.conflicts
    assert conflict["detected_by"] == "llm_judge" and conflict["reason"] == "the prices disagree"
    assert conflict["detector_version"].startswith("contradictions/1+llm:fixed/")
    assert any("The price is 24, not 22." in asked and "22 euros per month" in asked for asked in model.asked)
    # The model names no sentence: the two passages (chunks) are the evidence, as byte ranges of their texts.
    sides = {side["document_id"]: side for side in (conflict["a"], conflict["b"])}
    assert "The Pro plan price is 22 euros per month" in sides[page]["quote"]
    assert sides[landed.document_id]["quote"].strip() == "The price is 24, not 22."
    assert _conflicts(deps)[0][3] == "error"  # the model's "high"


def test_the_models_complement_overrules_what_the_rules_would_call_a_contradiction(make_deps, model, deps):
    # The rules alone: 23 against 22 is a contradiction.
    page = _page(deps)
    ruled = give_feedback(deps, SITE, "The Pro plan price is 23 euros per month.", "cli:alice", About(document_id=page))
    assert [c["detected_by"] for c in ruled.conflicts] == ["rules"]
    # With the model, the same kind of pair is what the model says: a complement, so no conflict.
    with_model = _with_model(make_deps, model.url)
    judged = give_feedback(with_model, SITE, "The Pro plan price is 25 euros per month.", "cli:bob",
                           About(document_id=page))
    assert judged.conflicts == [] and model.asked
    assert [r[0] for r in _conflicts(deps)] == ["rules"]


def test_a_failing_model_leaves_the_pair_to_the_rules_with_a_warning_and_keeps_the_feedback(
        make_deps, broken_model, caplog):
    deps = _with_model(make_deps, broken_model.url)
    page = _page(deps)
    with caplog.at_level(logging.WARNING, logger="gleaner.origins.modeljudge"):
        landed = give_feedback(deps, SITE, "The price is 24, not 22.", "cli:alice", About(document_id=page))
    assert landed.version == 1  # the feedback is kept
    (conflict,) = landed.conflicts
    assert conflict["detected_by"] == "rules" and "22" in conflict["reason"]
    assert len(broken_model.asked) == 1  # given up on for the rest of the pass after one failure
    warned = [json.loads(r.getMessage()) for r in caplog.records if "llm-judge-fallback" in r.getMessage()]
    assert warned and "HTTP 500" in warned[0]["error"]


def test_a_provider_that_is_down_leaves_the_pair_to_the_rules(make_deps):
    deps = _with_model(make_deps, closed_port_url(), llm_timeout=5.0)
    page = _page(deps)
    landed = give_feedback(deps, SITE, "The price is 24, not 22.", "cli:alice", About(document_id=page))
    assert [c["detected_by"] for c in landed.conflicts] == ["rules"]


def test_the_real_small_model_answers_the_judge_by_the_schema(llm_server):  # noqa: F811
    judge = ModelJudge(LanguageModel(OpenAICompatible(llm_server, ALIAS, timeout=600.0, json_mode="json_object")),
                       budget=1)
    verdict = judge.judge_pair("The ferry leaves at 9:00 every day.", "The ferry leaves at 10:30 on weekdays.")
    assert verdict.relation in set(Relation) and judge.asked == 1 and judge.failure is None
    assert str(verdict.judged_by) == "llm_judge" and verdict.judge_version == judge.version
    assert judge.version.startswith(f"llm:{ALIAS}/")
