"""The back office as its own Cloud Function (``functions/backoffice/main.py``): the WSGI app behind the operator
bearer, its answer handed to functions-framework as a Flask response.

A streamed answer (the export) stays streamed: Flask sends the app's body iterable as it is made
(chunked), so the function holds one page's record at a time, as ``gleaner serve`` does.
"""

from __future__ import annotations

import io
import logging
from typing import Any

from gleaner.app import Deps
from gleaner.backoffice.wsgi import BackofficeApp

log = logging.getLogger(__name__)


def answer(request: Any, deps: Deps) -> Any:
    """A ``flask.Response`` for one request to the back office function."""
    from flask import Response

    secret = deps.settings.webhook_secret
    if not secret:  # without it the back office would be open to anyone IAM lets through
        log.error("GLEANER_WEBHOOK_SECRET is not set: refusing every back office request")
        return Response(b'{"error": "the webhook secret is not configured"}', 500,
                        {"Content-Type": "application/json"})
    sent: list[Any] = []
    environ = request.environ
    body = BackofficeApp(deps, bearer=secret)(environ, lambda status, headers, exc_info=None: sent.extend(
        (status, headers)))
    # functions-framework reads whatever body is left after the answer; a refused caller's must not be.
    environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(), "0"
    return Response(body, int(str(sent[0]).split(" ", 1)[0]), dict(sent[1]))
