"""Any OpenAI-compatible chat endpoint (OpenAI, Ollama, vLLM, llama.cpp's server) over httpx.

The answer's shape is asked for with ``response_format``, in one of two dialects: OpenAI's
``{"type": "json_schema", "json_schema": {...}}`` (OpenAI, vLLM, Ollama) and llama.cpp's
``{"type": "json_object", "schema": {...}}``, which llama.cpp's server turns into a grammar while it
refuses the first dialect. ``json_mode="auto"`` asks in OpenAI's dialect, and on a refusal that names
the response format asks once more in llama.cpp's and keeps to it for this adapter's life.

Errors at this boundary:

==========================================  ===================================================
httpx.TransportError (connect, read, ...)   ModelUnavailable: the endpoint is down or too slow
HTTP 4xx/5xx (after the dialect retry)      ModelUnavailable, with the status and the body's head
a body that is not the chat JSON            ModelAnswerInvalid
message content that is not a JSON object   ModelAnswerInvalid
==========================================  ===================================================
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx

from gleaner.decide.language import JsonAnswer, ModelAnswerInvalid, ModelUnavailable, Usage

JSON_MODES = ("auto", "json_schema", "json_object")


class OpenAICompatible:
    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 60.0,
                 json_mode: str = "auto", transport: httpx.BaseTransport | None = None) -> None:
        if json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {JSON_MODES}, got {json_mode!r}")
        self.model = model
        self.json_mode = json_mode
        self._lock = threading.Lock()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout,
                                    transport=transport)

    def close(self) -> None:
        self._client.close()

    def complete_json(self, system: str, user: str, schema: dict[str, Any], name: str) -> JsonAnswer:
        mode = "json_schema" if self.json_mode == "auto" else self.json_mode
        response = self._post(chat_request(self.model, system, user, schema, name, mode))
        if self.json_mode == "auto" and _refuses_format(response):
            response = self._post(chat_request(self.model, system, user, schema, name, "json_object"))
            if response.is_success:
                with self._lock:
                    self.json_mode = "json_object"
        elif self.json_mode == "auto" and response.is_success:
            with self._lock:
                self.json_mode = "json_schema"
        if not response.is_success:
            raise ModelUnavailable(f"{self.model}: HTTP {response.status_code}: {response.text[:200]}")
        return read_chat_response(response.content)

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        try:
            return self._client.post("chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise ModelUnavailable(f"{self.model}: {type(exc).__name__}: {exc}") from exc


def chat_request(model: str, system: str, user: str, schema: dict[str, Any], name: str,
                 mode: str) -> dict[str, Any]:
    """The chat-completions body for one JSON answer at temperature 0 in the ``mode`` dialect."""
    response_format: dict[str, Any] = (
        # Not strict: OpenAI's strict mode refuses keywords the schemas use (maxLength, minimum); the
        # answer is checked against the whole schema on arrival (language.py) either way.
        {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}
        if mode == "json_schema" else {"type": "json_object", "schema": schema})
    return {"model": model, "temperature": 0, "max_tokens": 200,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "response_format": response_format}


def read_chat_response(body: bytes) -> JsonAnswer:
    try:
        chat = json.loads(body)
        content = chat["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ModelAnswerInvalid(f"not a chat completion: {body[:200]!r}") from exc
    try:
        data = json.loads(content or "")
    except ValueError as exc:
        raise ModelAnswerInvalid(f"content is not JSON: {str(content)[:200]!r}") from exc
    if not isinstance(data, dict):
        raise ModelAnswerInvalid(f"content is not a JSON object: {str(content)[:200]!r}")
    usage = chat.get("usage") or {}
    return JsonAnswer(data, Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)))


def _refuses_format(response: httpx.Response) -> bool:
    """Whether an error answer is a refusal of the json_schema dialect (llama.cpp answers 500 to it)."""
    if response.is_success or response.status_code not in (400, 422, 500):
        return False
    text = response.text.lower()
    return "response_format" in text or "json_schema" in text or "schema" in text
