"""What the client raises, translated at its one HTTP boundary (``Gleaner._send``)::

    GleanerError                 anything this client raises
    ├── ApiError                 the server answered an error: .status, .message (its {"error"}), .body
    ├── ServerUnreachable        no answer: connection refused, timeout, TLS, a broken connection
    └── ExportCut                a streamed export stopped before its end (the server cuts it on a
                                 failure, so a partial export is never mistaken for a whole one)

=====================================  =====================  ===================================
httpx / server                          becomes                why
=====================================  =====================  ===================================
a non-2xx answer                        ApiError               the caller's input or state: read it
httpx.TransportError before an answer   ServerUnreachable      transient: the caller may retry
httpx.TransportError inside an export   ExportCut              the records so far are not the whole
=====================================  =====================  ===================================
"""

from __future__ import annotations

from typing import Any


class GleanerError(Exception):
    """Anything the client raises."""


class ApiError(GleanerError):
    """The server answered ``status`` with ``{"error": message}`` (``body``: the whole JSON answer)."""

    def __init__(self, status: int, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.body = body or {"error": message}


class ServerUnreachable(GleanerError):
    """No answer from the server (refused, timed out, broken)."""


class ExportCut(GleanerError):
    """A streamed export ended early: the server failed after it started sending."""
