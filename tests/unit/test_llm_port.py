"""The language-model port's pure parts: answers checked by schema, the verdict rule, request shapes, settings.

Vertex AI cannot be reached from here: the Gemini adapter's request and response are checked against
the ``google-genai`` SDK's own types (the SDK validates them), not against the service. The
OpenAI-compatible adapter is exercised end to end against a real server in
tests/integration/test_llm_decider.py.
"""

from __future__ import annotations

import json

import pytest

from gleaner.decide import prompts
from gleaner.decide.language import LanguageModel, ModelAnswerInvalid, PageClass, Usage, _checked
from gleaner.decide.openai_compat import chat_request, read_chat_response
from gleaner.decide.pagedecider import Prices, verdict_of
from gleaner.decide.port import Verdict
from gleaner.errors import ConfigError
from gleaner.settings.config import Settings


@pytest.mark.parametrize("kind", sorted(prompts.EXCLUDE_KINDS))
def test_a_non_content_kind_excludes_whatever_the_model_decided(kind):
    assert verdict_of(PageClass("include", 0.95, kind, "x"), 0.6)[0] == Verdict.EXCLUDE


def test_a_model_that_excludes_what_it_calls_content_sends_the_page_to_review_not_out():
    verdict, why = verdict_of(PageClass("exclude", 0.9, "documentation", "short"), 0.6)
    assert verdict == Verdict.NEEDS_REVIEW and "documentation" in why


def test_an_unsure_include_goes_to_review_and_a_sure_one_is_kept():
    assert verdict_of(PageClass("include", 0.4, "article", "x"), 0.6)[0] == Verdict.NEEDS_REVIEW
    assert verdict_of(PageClass("include", 0.8, "article", "x"), 0.6) == (Verdict.INCLUDE, "")


def test_an_unsure_exclude_drops_nothing_whatever_kind_it_names():
    # Qwen2.5-Coder-1.5B's answer on valgrind's FAQ in the labelled benchmark: "legal", confidence 0.
    verdict, why = verdict_of(PageClass("exclude", 0.0, "legal", "not about legal matters"), 0.6)
    assert verdict == Verdict.NEEDS_REVIEW and "low confidence" in why


@pytest.mark.parametrize("answer, complaint", [
    ([], "not a JSON object"),
    ({"decision": "include", "content_kind": "article", "confidence": 0.5}, "lacks 'reason'"),
    ({"decision": "maybe", "content_kind": "article", "confidence": 0.5, "reason": ""}, "not one of"),
    ({"decision": "include", "content_kind": "article", "confidence": 1.5, "reason": ""}, "out of range"),
    ({"decision": "include", "content_kind": "article", "confidence": "high", "reason": ""}, "not a number"),
])
def test_an_answer_that_breaks_the_schema_is_refused_with_what_is_wrong(answer, complaint):
    with pytest.raises(ModelAnswerInvalid, match=complaint):
        _checked(answer, prompts.PAGE_SCHEMA)


def test_a_long_sample_is_cut_to_its_head_and_its_full_length_told():
    user = prompts.page_user("http://x.test/a", None, "word " * 2000)
    assert "Text length: 9999 characters" in user and user.endswith("[…]")
    assert len(user) < prompts.SAMPLE_CHARS + 200 and "Title: (none)" in user


def test_the_openai_request_asks_for_temperature_0_in_either_schema_dialect():
    strict = chat_request("m", "sys", "usr", prompts.PAGE_SCHEMA, "page_class", "json_schema")
    assert strict["temperature"] == 0 and strict["messages"][0] == {"role": "system", "content": "sys"}
    assert strict["response_format"]["json_schema"]["schema"] == prompts.PAGE_SCHEMA
    llama = chat_request("m", "sys", "usr", prompts.PAGE_SCHEMA, "page_class", "json_object")
    assert llama["response_format"] == {"type": "json_object", "schema": prompts.PAGE_SCHEMA}


def test_a_chat_answer_yields_its_json_and_token_counts_and_prose_is_refused():
    body = {"choices": [{"message": {"role": "assistant", "content": '{"relation": "duplicate"}'}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 9}}
    answer = read_chat_response(json.dumps(body).encode())
    assert answer.data == {"relation": "duplicate"} and answer.usage == Usage(120, 9)
    body["choices"][0]["message"]["content"] = "```json\n{}\n```"
    with pytest.raises(ModelAnswerInvalid):
        read_chat_response(json.dumps(body).encode())


def test_a_decision_costs_its_tokens_at_the_configured_prices():
    assert Prices(0.30, 2.50).cost(Usage(1000, 40)) == pytest.approx(0.0004)
    assert Prices().cost(Usage(1000, 40)) == 0.0


def test_the_gemini_request_is_a_valid_sdk_config_with_the_schema_and_temperature_0():
    types = pytest.importorskip("google.genai.types")
    from gleaner.decide.gemini import generate_config

    config = generate_config(prompts.PAGE_SYSTEM, prompts.PAGE_SCHEMA)
    assert isinstance(config, types.GenerateContentConfig)
    assert config.temperature == 0 and config.response_mime_type == "application/json"
    assert config.response_json_schema == prompts.PAGE_SCHEMA
    # As the SDK would send it (camelCase JSON), the schema and instruction travel unchanged.
    wire = config.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["responseJsonSchema"] == prompts.PAGE_SCHEMA and wire["temperature"] == 0


def test_a_gemini_response_as_vertex_sends_it_is_read_into_the_port_answer():
    types = pytest.importorskip("google.genai.types")
    from gleaner.decide.gemini import read_response

    text = json.dumps({"decision": "exclude", "content_kind": "legal", "confidence": 0.9, "reason": "cookies"})
    response = types.GenerateContentResponse.model_validate({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 310, "candidatesTokenCount": 22, "totalTokenCount": 332}})
    answer = read_response(response)
    assert answer.data["content_kind"] == "legal" and answer.usage == Usage(310, 22)
    blocked = types.GenerateContentResponse.model_validate({"candidates": [{"finishReason": "SAFETY"}]})
    with pytest.raises(ModelAnswerInvalid):
        read_response(blocked)


def test_the_port_turns_a_provider_answer_into_a_typed_page_class():
    class Answering:
        model = "fixed"

        def complete_json(self, system, user, schema, name):
            from gleaner.decide.language import JsonAnswer

            assert schema is prompts.PAGE_SCHEMA and "URL: http://x.test/" in user
            return JsonAnswer({"decision": "include", "content_kind": "faq", "confidence": 1, "reason": "q&a"},
                              Usage(10, 2))

    answer = LanguageModel(Answering()).classify_page("http://x.test/", "FAQ", "Q: A?")
    assert answer == PageClass("include", 1.0, "faq", "q&a", Usage(10, 2))


def test_the_llm_settings_are_off_by_default_and_a_provider_needs_a_model():
    assert Settings.from_env({}).llm_provider == "none"
    on = Settings.from_env({"GLEANER_LLM_PROVIDER": "openai", "GLEANER_LLM_MODEL": "local",
                            "GLEANER_LLM_BASE_URL": "http://127.0.0.1:8080/v1", "GLEANER_LLM_API_KEY": "k" * 20})
    assert (on.llm_provider, on.llm_model, on.llm_api_key) == ("openai", "local", "k" * 20)
    assert "k" * 20 not in repr(on) and "GLEANER_LLM_API_KEY" not in on.extra
    with pytest.raises(ConfigError, match="GLEANER_LLM_MODEL"):
        Settings.from_env({"GLEANER_LLM_PROVIDER": "gemini"})
    with pytest.raises(ConfigError, match="GLEANER_LLM_PROVIDER"):
        Settings.from_env({"GLEANER_LLM_PROVIDER": "claude"})
