"""The language-model settings (``GLEANER_LLM_*``, docs/llm.md), read from the environment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gleaner.errors import ConfigError
from gleaner.settings.envvalues import env_float, env_int

if TYPE_CHECKING:
    from gleaner.settings.config import Settings

LLM_PROVIDERS = ("none", "openai", "gemini")


def llm_settings_of(env: Mapping[str, str], d: Settings) -> dict[str, Any]:
    """The ``GLEANER_LLM_*`` settings; ConfigError for an unknown provider or one without a model."""
    provider = env.get("GLEANER_LLM_PROVIDER", "").strip().lower() or "none"
    if provider not in LLM_PROVIDERS:
        raise ConfigError(f"GLEANER_LLM_PROVIDER must be one of {', '.join(LLM_PROVIDERS)}, got {provider!r}")
    model = env.get("GLEANER_LLM_MODEL", "").strip() or None
    if provider != "none" and model is None:
        raise ConfigError(f"GLEANER_LLM_PROVIDER={provider} needs GLEANER_LLM_MODEL (the model's name)")
    json_mode = env.get("GLEANER_LLM_JSON_MODE", "").strip() or d.llm_json_mode
    if json_mode not in ("auto", "json_schema", "json_object"):
        raise ConfigError(f"GLEANER_LLM_JSON_MODE must be auto, json_schema or json_object, got {json_mode!r}")
    return {
        "llm_provider": provider,
        "llm_base_url": env.get("GLEANER_LLM_BASE_URL", "").strip() or None,
        "llm_model": model,
        "llm_api_key": env.get("GLEANER_LLM_API_KEY", "").strip() or None,
        "llm_json_mode": json_mode,
        "llm_timeout": env_float(env, "GLEANER_LLM_TIMEOUT", d.llm_timeout, 0.1),
        "llm_run_max_calls": env_int(env, "GLEANER_LLM_RUN_MAX_CALLS", d.llm_run_max_calls, 0),
        "llm_run_max_tokens": env_int(env, "GLEANER_LLM_RUN_MAX_TOKENS", d.llm_run_max_tokens, 0),
        "llm_min_confidence": env_float(env, "GLEANER_LLM_MIN_CONFIDENCE", d.llm_min_confidence, 0.0),
        "llm_price_in": env_float(env, "GLEANER_LLM_PRICE_IN", d.llm_price_in, 0.0),
        "llm_price_out": env_float(env, "GLEANER_LLM_PRICE_OUT", d.llm_price_out, 0.0),
    }
