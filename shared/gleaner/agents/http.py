"""``/mcp`` under ``gleaner serve``: the SDK's streamable-HTTP app, bridged into the WSGI server.

``gleaner serve`` is one waitress (WSGI) server for the webhook, ``/v1/`` and ``/ui/``; the MCP SDK
ships an ASGI (Starlette) app. Rather than move every surface to an ASGI server (a second HTTP stack
under the webhook, the limits in :class:`gleaner.serving.web.ServerLimits` and the gate other work hardens),
``/mcp`` is one more WSGI route: ``a2wsgi.ASGIMiddleware`` (a well-kept adapter) runs the ASGI app
on one event loop thread of its own, and waitress keeps owning sockets, threads and limits.

That fits because the app runs *stateless* with *JSON responses*: each POST is answered by one
JSON body, with no session to keep and no server-sent event stream holding a waitress thread. The
SDK's session manager still needs its task group alive, so the loop thread enters
``session_manager.run()`` once and holds it until :meth:`McpHttp.close`.

The caller is decided before the SDK sees the request, by the back office's own gate
(:meth:`gleaner.backoffice.wsgi.BackofficeApp.access_for`): the operator bearer, a site token, or on
loopback without a bearer configured, no credential; failing those, a workspace token
(:mod:`gleaner.agents.references`: the feed's reference items only). The verdict travels in the WSGI environ
(``a2wsgi`` hands it on as ``scope["wsgi_environ"]``), never in a header a client could forge. The
SDK's DNS-rebinding protection (its Host and Origin check) is on for a loopback bind.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable
from typing import Any

from gleaner.agents.references import WorkspaceCaller, workspace_caller
from gleaner.agents.server import ENVIRON_ACCESS, build_server
from gleaner.app import Deps
from gleaner.backoffice.api import Access
from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.serving.web import Environ, StartResponse, respond

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
STARTUP_SECONDS = 30


class McpHttp:
    """A WSGI app serving MCP's streamable HTTP at ``/mcp``; ``close()`` stops its loop thread."""

    def __init__(self, deps: Deps, gate: BackofficeApp, host: str = "127.0.0.1") -> None:
        from a2wsgi import ASGIMiddleware

        self.gate = gate
        server = build_server(deps)
        app = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
                                         host=host)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gleaner-mcp", daemon=True)
        self._thread.start()
        self._stop: asyncio.Event | None = None
        ready = threading.Event()
        self._running = asyncio.run_coroutine_threadsafe(self._hold(server, ready), self._loop)
        if not ready.wait(STARTUP_SECONDS):
            self.close()
            raise RuntimeError("the MCP session manager did not start")
        self._asgi = ASGIMiddleware(app, loop=self._loop)  # type: ignore[arg-type]  # Starlette is an ASGI app

    async def _hold(self, server: Any, ready: threading.Event) -> None:
        self._stop = asyncio.Event()
        async with server.session_manager.run():
            ready.set()
            await self._stop.wait()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        access: Access | WorkspaceCaller | None = self.gate.access_for(environ)
        if access is None:  # a workspace token (the feed poller's) reaches reference items only
            access = workspace_caller(self.gate.deps, str(environ.get("HTTP_AUTHORIZATION", "")))
        if access is None:
            return respond(start_response, 401, {"error": "send Authorization: Bearer <token>"},
                           headers=[("WWW-Authenticate", 'Bearer realm="gleaner"')])
        environ[ENVIRON_ACCESS] = access
        return self._asgi(environ, start_response)  # type: ignore[arg-type]  # a2wsgi's TypedDict environ

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        try:
            self._running.result(timeout=10)
        except Exception:  # stopping must finish whatever the task did; the log keeps what happened
            log.warning("the MCP session manager ended with an error", exc_info=True)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
