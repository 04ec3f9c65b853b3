"""``gleaner serve``: the ingest function's HTTP surface on the standard library's HTTP server.

The same :func:`gleaner.webhook.handle` as the deployed function answers every
request; work the webhook publishes goes to the in-process bus, which a
background thread drains, so a poller gets its 202 without waiting for the
landing. ``/v1/`` and ``/ui/`` go to the back office (``gleaner.backoffice``).
Bound to 127.0.0.1 by default: put a TLS proxy in front to expose it.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from gleaner.app import Deps
from gleaner.backoffice.wsgi import BackofficeApp, answer_http, serves
from gleaner.bus.local import LocalBus
from gleaner.errors import ConfigError
from gleaner.webhook import WebhookRequest, handle, read_capped

log = logging.getLogger(__name__)


class WebhookServer:
    """``with WebhookServer(deps, port=0) as server: server.url``."""

    def __init__(self, deps: Deps, host: str = "127.0.0.1", port: int = 8080) -> None:
        if not deps.settings.webhook_secret:
            raise ConfigError("GLEANER_WEBHOOK_SECRET must be set: the webhook refuses requests without it")
        bus = deps.bus
        if not isinstance(bus, LocalBus):
            raise ConfigError("gleaner serve runs the in-process bus; unset GLEANER_BUS")
        from gleaner.stages import wire

        if not bus.handlers:
            wire(bus, deps)
        self.deps = deps
        self.bus = bus
        # The back office needs no credential on loopback (DESIGN.md); bound elsewhere it takes the admin bearer.
        self.backoffice = BackofficeApp(deps, bearer=None if _loopback(host) else deps.settings.webhook_secret)
        self._work = threading.Event()
        self._stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                log.info("%s %s", self.address_string(), format % args)

            def _any(self) -> None:
                server._answer(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _any

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._threads = [threading.Thread(target=self._server.serve_forever, name="gleaner-serve", daemon=True),
                         threading.Thread(target=self._drain, name="gleaner-drain", daemon=True)]

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"

    def start(self) -> WebhookServer:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._work.set()
        self._server.shutdown()
        self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=30)

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _drain(self) -> None:
        while not self._stopping.is_set():
            self._work.wait()
            self._work.clear()
            if self._stopping.is_set():
                return
            try:
                self.bus.drain()
            except Exception:  # a crash here must not stop later landings; the walk retries pending rows
                log.exception("landing failed; pending articles stay pending for the next walk")

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(request.path)
        if serves(parts.path):
            answer_http(self.backoffice, request)
            return
        cap = self.deps.settings.webhook_max_bytes
        body, oversized, status, unread = b"", False, 0, False
        length_header = request.headers.get("Content-Length")
        if request.headers.get("Transfer-Encoding", "").lower() == "chunked":
            status, answer = 411, {"error": "send a Content-Length (chunked bodies are not accepted)"}
            unread = True
        elif length_header is not None:
            try:
                declared = int(length_header)
            except ValueError:
                status, answer = 400, {"error": "malformed Content-Length"}
                unread = True
            else:
                body, oversized = read_capped(request.rfile, declared, cap)
        if not status:
            try:
                status, answer = handle(WebhookRequest(
                    method=request.command, path=parts.path,
                    headers={k.lower(): v for k, v in request.headers.items()},
                    body=body, query=dict(parse_qsl(parts.query)), oversized=oversized,
                ), self.deps)
            except Exception:  # answer 500 like the function host would, rather than drop the connection
                log.exception("webhook request failed")
                status, answer = 500, {"error": "internal error"}
        data = json.dumps(answer, default=str).encode("utf-8")
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        if oversized or unread:
            request.send_header("Connection", "close")  # the unread body must not be parsed as a request
            request.close_connection = True
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(data)
        if status == 202 and self.bus.pending():
            self._work.set()


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
