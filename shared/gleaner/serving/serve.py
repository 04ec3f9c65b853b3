"""``gleaner serve``: the ingest function's HTTP surface and the back office, under waitress.

The same :func:`gleaner.serving.webhook.handle` as the deployed function answers the
webhook and ``/refs``; work the webhook publishes goes to the in-process bus,
which a background thread drains, so a poller gets its 202 without waiting for
the landing. ``/v1/`` and ``/ui/`` go to the back office (``gleaner.backoffice``;
``/v1/texts/`` stays the webhook's); ``/mcp`` is the MCP server (``gleaner.agents.http``).
Bound to 127.0.0.1 by default: put a TLS proxy in front to expose it (and name it in
``GLEANER_ALLOWED_HOSTS``: any other ``Host`` is refused, :mod:`gleaner.serving.hostgate`). The server's limits
(threads, connections, timeouts, body cap) are in :class:`gleaner.serving.web.ServerLimits`; more surfaces join
as routes (``WebhookServer(deps, routes=[("/x/", app)])``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence

from gleaner.app import Deps
from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.changes.sender import DeliverySender
from gleaner.errors import ConfigError, RetryableError
from gleaner.serving.hostgate import HostPolicy, guard, server_channel
from gleaner.serving.web import (
    Environ,
    ServerLimits,
    StartResponse,
    WsgiApp,
    compose,
    make_server,
    query_of,
    read_body,
    respond,
)
from gleaner.serving.webhook import WebhookRequest, handle
from gleaner.settings.secrets import MIN_SECRET_CHARS, SECRET_RECIPE

log = logging.getLogger(__name__)

DATABASE_WATCH_SECONDS = 2.0  # how often serve looks whether its embedded database still runs


def webhook_app(deps: Deps, on_accepted: Callable[[], None] = lambda: None) -> WsgiApp:
    """The webhook and ``/refs`` as a WSGI app; ``on_accepted`` runs after each 202."""
    cap = deps.settings.webhook_max_bytes

    def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        headers = {key[5:].replace("_", "-").lower(): value for key, value in environ.items()
                   if key.startswith("HTTP_")}
        # WSGI hands the path as latin-1-decoded bytes (PEP 3333); the webhook wants the UTF-8 text.
        path = environ.get("PATH_INFO", "/").encode("latin-1").decode("utf-8", "surrogateescape")
        request = WebhookRequest(method=method, path=path, headers=headers,
                                 query=query_of(environ.get("QUERY_STRING", "").encode("latin-1")),
                                 read_body=lambda: read_body(environ, cap))
        extra: list[tuple[str, str]] = []
        try:
            status, answer = handle(request, deps)
        except RetryableError as exc:  # the database is down or restarting: a wait for the caller, not a failure
            log.warning("webhook request answered 503: %s", exc)
            status, answer = 503, {"error": "the database is unavailable; try again shortly"}
            extra = [("Retry-After", "5")]
        except Exception:  # answer 500 like the function host would, rather than drop the connection
            log.exception("webhook request failed")
            status, answer = 500, {"error": "internal error"}
        body = respond(start_response, status, answer, head=method == "HEAD", headers=extra)
        if status == 202:
            on_accepted()
        return body

    return app


class WebhookServer:
    """``with WebhookServer(deps, port=0) as server: server.url``."""

    def __init__(self, deps: Deps, host: str = "127.0.0.1", port: int = 8080,
                 routes: Sequence[tuple[str, WsgiApp]] = (), limits: ServerLimits | None = None) -> None:
        if not deps.settings.webhook_secret:
            raise ConfigError(
                "GLEANER_WEBHOOK_SECRET must be set: it is the operator's bearer for the webhook and the back"
                f" office (at least {MIN_SECRET_CHARS} characters). Set it and start again, e.g.\n"
                f"  export GLEANER_WEBHOOK_SECRET=$({SECRET_RECIPE})")
        bus = deps.local_bus
        if bus is None:
            raise ConfigError("gleaner serve runs the in-process bus; unset GLEANER_BUS")
        self.deps = deps
        self.bus = bus
        self._work = threading.Event()
        self._stopping = threading.Event()
        self._sender: DeliverySender | None = None
        # Uploads (POST /v1/ingest) are the largest bodies; each route refuses past its own cap, and waitress
        # keeps a large body in a temporary file, not in memory.
        from gleaner.backoffice.originsapi import max_body

        self.limits = limits or ServerLimits(max_body_bytes=max(deps.settings.webhook_max_bytes, max_body(deps)))
        # Every route is behind the Host check (DNS rebinding); the back office needs no credential only from
        # this machine to a loopback name with no proxy in between (gleaner.serving.hostgate, docs/security.md).
        self.hosts = HostPolicy.for_bind(host, deps.settings.allowed_hosts)
        backoffice = BackofficeApp(deps, bearer=deps.settings.webhook_secret, hosts=self.hosts)
        webhook = webhook_app(deps, self._landing_due)
        # MCP over streamable HTTP, its caller decided by the back office's gate (gleaner/agents/http.py).
        from gleaner.agents.http import MCP_PATH, McpHttp

        self._mcp = McpHttp(deps, backoffice, host)
        app = guard(compose([*routes, ("/v1/texts/", webhook), ("/v1/", backoffice), ("/ui/", backoffice),
                             (MCP_PATH, self._mcp), ("/", webhook)]), self.hosts)
        self._server = make_server(app, host, port, self.limits)
        # Headers spelled with "_" are dropped by waitress; the gate must still see that one was sent.
        self._server.channel_class = server_channel(self._server.channel_class)
        self._threads = [threading.Thread(target=self._server.run, name="gleaner-serve", daemon=True),
                         threading.Thread(target=self._drain, name="gleaner-drain", daemon=True)]
        if deps.settings.database_url is None:  # the embedded database is this server's to keep running
            self._threads.append(threading.Thread(target=self._keep_database, name="gleaner-db-watch", daemon=True))
        # Fresh vectors into the HNSW graph when no run is active (gleaner.retrieval.upkeep).
        from gleaner.retrieval.upkeep import IdleMerger

        self._merger = IdleMerger(deps.engine, idle=lambda: not self.bus.pending())

    @property
    def url(self) -> str:
        return f"http://{self._server.effective_host}:{self._server.effective_port}"

    def start(self) -> WebhookServer:
        for thread in self._threads:
            thread.start()
        # Webhooks of crawls started here (and any a crawl elsewhere left pending) go out in the background.
        self._sender = DeliverySender(self.deps).start()
        self._merger.start()
        return self

    def stop(self) -> None:
        from waitress import wasyncore

        self._stopping.set()
        self._work.set()
        if self._sender is not None:
            self._sender.stop()
        self._merger.stop()
        server = self._server

        def close_everything() -> None:
            server.close()
            wasyncore.close_all(server._map)  # open connections too: the loop ends when none is left

        if self._threads[0].is_alive():
            # Closed by the loop's own thread, between two waits: closing its sockets from here could pull
            # a descriptor from under the select() it is in (EBADF, a traceback from the loop's thread).
            try:
                server.trigger.pull_trigger(close_everything)
            except OSError:  # the trigger's pipe is already closed: nothing can wake the loop but closing here
                log.warning("gleaner serve: the server's wake-up pipe was closed under it; closing from here")
                close_everything()
            self._threads[0].join(timeout=30)
        else:
            close_everything()
        server.task_dispatcher.shutdown()
        for thread in self._threads:
            thread.join(timeout=30)
        self._mcp.close()

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _keep_database(self) -> None:
        """Start the embedded PostgreSQL again when it stops under the server: requests meanwhile are 503s
        with Retry-After, and the server recovers without another command (docs/failures.md)."""
        from gleaner.store.backends.embedded import restart_if_stopped

        while not self._stopping.wait(DATABASE_WATCH_SECONDS):
            try:
                restart_if_stopped(self.deps.settings.data_dir)
            except Exception as exc:  # tried again at the next look
                log.warning("gleaner serve: %s; trying again in %g s", exc, DATABASE_WATCH_SECONDS)

    def _landing_due(self) -> None:
        if self.bus.pending():
            self._work.set()

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

