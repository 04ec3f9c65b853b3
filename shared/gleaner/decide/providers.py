"""Build the language model and its page decider from settings (called by the composition root)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gleaner.decide.language import LanguageModel, Provider
from gleaner.decide.port import Decider
from gleaner.errors import ConfigError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from gleaner.decide.pagedecider import LLMDecider
    from gleaner.settings.config import Settings


def provider_of(settings: Settings) -> Provider:
    """The configured provider's adapter; ConfigError for ``none`` or a missing SDK."""
    model = settings.llm_model or ""
    if settings.llm_provider == "openai":
        from gleaner.decide.openai_compat import OpenAICompatible

        return OpenAICompatible(settings.llm_base_url or "https://api.openai.com/v1", model,
                                api_key=settings.llm_api_key, timeout=settings.llm_timeout,
                                json_mode=settings.llm_json_mode)
    if settings.llm_provider == "gemini":
        try:
            from gleaner.decide.gemini import Gemini

            return Gemini(model, project=settings.project, location=settings.region, api_key=settings.llm_api_key,
                          timeout=settings.llm_timeout)
        except ImportError as exc:
            raise ConfigError("GLEANER_LLM_PROVIDER=gemini needs google-genai: pip install 'gleaner[cloud]'") from exc
    raise ConfigError(f"no language model is configured (GLEANER_LLM_PROVIDER={settings.llm_provider})")


def llm_decider(settings: Settings, engine: Engine, rules: Decider) -> LLMDecider:
    from gleaner.decide.pagedecider import LLMDecider, Prices
    from gleaner.store.ledger.llmanswers import AnswerCache, RunBudget

    return LLMDecider(LanguageModel(provider_of(settings)), rules, AnswerCache(engine),
                      RunBudget(engine, settings.llm_run_max_calls, settings.llm_run_max_tokens),
                      min_confidence=settings.llm_min_confidence,
                      prices=Prices(settings.llm_price_in, settings.llm_price_out))
