"""Vertex AI Gemini through ``google-genai`` (the cloud's provider; the ``cloud`` extra installs the SDK).

The schema travels as ``response_json_schema`` with ``response_mime_type="application/json"``, which
Gemini enforces while it generates; temperature 0. The client authenticates with the function's
service account (Application Default Credentials) on Vertex AI, or with an API key where one is given.

Errors at this boundary:

=====================================  ==================================================
google.genai.errors.APIError           ModelUnavailable, with the code and message
httpx.HTTPError (transport)            ModelUnavailable
a response without text, or not JSON   ModelAnswerInvalid (a blocked or empty candidate)
=====================================  ==================================================
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx

from gleaner.decide.language import JsonAnswer, ModelAnswerInvalid, ModelUnavailable, Usage

if TYPE_CHECKING:
    from google.genai import Client, types


class Gemini:
    def __init__(self, model: str, *, project: str | None = None, location: str | None = None,
                 api_key: str | None = None, timeout: float = 60.0, client: Client | None = None) -> None:
        self.model = model
        if client is None:
            from google import genai
            from google.genai import types

            options = types.HttpOptions(timeout=int(timeout * 1000))
            client = (genai.Client(api_key=api_key, http_options=options) if api_key else
                      genai.Client(vertexai=True, project=project, location=location, http_options=options))
        self._client = client

    def close(self) -> None:
        self._client.close()

    def complete_json(self, system: str, user: str, schema: dict[str, Any], name: str) -> JsonAnswer:
        from google.genai import errors

        try:
            response = self._client.models.generate_content(model=self.model, contents=user,
                                                            config=generate_config(system, schema))
        except errors.APIError as exc:
            raise ModelUnavailable(f"{self.model}: {exc.code} {exc.message}") from exc
        except httpx.HTTPError as exc:
            raise ModelUnavailable(f"{self.model}: {type(exc).__name__}: {exc}") from exc
        return read_response(response)


def generate_config(system: str, schema: dict[str, Any]) -> types.GenerateContentConfig:
    from google.genai import types

    return types.GenerateContentConfig(system_instruction=system, temperature=0, max_output_tokens=200,
                                       response_mime_type="application/json", response_json_schema=schema)


def read_response(response: types.GenerateContentResponse) -> JsonAnswer:
    text = response.text
    if not text:
        raise ModelAnswerInvalid("Gemini answered no text (a blocked or empty candidate)")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ModelAnswerInvalid(f"Gemini's text is not JSON: {text[:200]!r}") from exc
    if not isinstance(data, dict):
        raise ModelAnswerInvalid(f"Gemini's text is not a JSON object: {text[:200]!r}")
    meta = response.usage_metadata
    usage = Usage(meta.prompt_token_count or 0, meta.candidates_token_count or 0) if meta else Usage()
    return JsonAnswer(data, usage)
