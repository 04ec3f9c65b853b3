"""Cloud Function entry points of the ingest stage.

``on_http``: the feed-poller webhook and reference retrieval (``gleaner.webhook``).
This file only translates: Flask request -> WebhookRequest -> (status, JSON).

functions-framework loads this file as a fresh module for every app it creates,
so the per-process dependencies are held here, built on the first request.
"""

from __future__ import annotations

import json
import os
from typing import Any

from gleaner.app import Deps
from gleaner.config import Settings

_deps: Deps | None = None


def _get_deps() -> Deps:
    global _deps
    if _deps is None:
        from gleaner.bus.local import LocalBus
        from gleaner.stages import wire

        _deps = Deps(Settings.from_env(os.environ))
        if isinstance(_deps.bus, LocalBus):
            wire(_deps.bus, _deps)
    return _deps


def on_http(request: Any) -> tuple[str, int, dict[str, str]]:
    from gleaner.bus.local import LocalBus
    from gleaner.webhook import WebhookRequest, handle, read_capped

    deps = _get_deps()
    body, oversized = b"", False
    if request.method in ("POST", "PUT", "PATCH"):
        body, oversized = read_capped(request.stream, request.content_length, deps.settings.webhook_max_bytes)
    status, answer = handle(WebhookRequest(
        method=request.method, path=request.path,
        headers={k.lower(): v for k, v in request.headers.items()},
        body=body, query=request.args.to_dict(), oversized=oversized,
    ), deps)
    if isinstance(deps.bus, LocalBus):
        # No Pub/Sub here (local functions-framework): land what was accepted before answering.
        deps.bus.drain()
    return json.dumps(answer, default=str), status, {"Content-Type": "application/json"}
