"""A small, bounded HTTP site on 127.0.0.1: the demo's site and the tests' site.

It serves a mapping of path -> :class:`Page`, answers conditional GETs with 304
from each page's ETag / Last-Modified, gzips when asked for ``.gz`` paths, logs
every request (path and headers) so tests can assert what was and was not
requested, and stops by itself after ``max_requests`` requests or
``max_seconds`` seconds.
"""

from __future__ import annotations

import gzip
import hashlib
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Page:
    body: bytes | str
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    conditional: bool = True  # send ETag / Last-Modified and honour If-None-Match / If-Modified-Since
    gzip: bool = False
    # A callable page decides at request time (redirects, slow drips, ...): (handler) -> None
    handler: Callable[[BaseHTTPRequestHandler], None] | None = None
    modified: float = field(default_factory=lambda: 1_700_000_000.0)

    @property
    def data(self) -> bytes:
        raw = self.body.encode("utf-8") if isinstance(self.body, str) else self.body
        return gzip.compress(raw, mtime=0) if self.gzip else raw

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha1(self.data).hexdigest()[:16] + '"'


def redirect_page(location: str, status: int = 302) -> Page:
    """A page that answers with a redirect to ``location`` (as given: relative, absolute, hostile)."""

    def handler(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Location", location)
        h.send_header("Content-Length", "0")
        h.end_headers()

    return Page("", handler=handler)


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    at: float
    client: str = ""  # the peer address the request came from


class TestSite:
    """``with TestSite(pages) as site: site.url + "/"``."""

    __test__ = False  # not a pytest test class

    def __init__(self, pages: dict[str, Page], *, max_requests: int = 20_000, max_seconds: float = 600.0,
                 host: str = "127.0.0.1", port: int = 0, ssl_context: ssl.SSLContext | None = None) -> None:
        self.pages = pages
        self.log: list[Request] = []
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self._lock = threading.Lock()
        self._active = 0
        self.max_active = 0
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                site._serve(self)

            def do_HEAD(self) -> None:
                site._serve(self)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._scheme = "http"
        if ssl_context is not None:  # HTTPS: the handshake happens on accept, in the serving loop
            self._server.socket = ssl_context.wrap_socket(self._server.socket, server_side=True)
            self._scheme = "https"
        self._thread = threading.Thread(target=self._run, name="testsite", daemon=True)
        self._deadline = 0.0

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        name = host.decode("ascii") if isinstance(host, bytes) else host
        return f"{self._scheme}://{name}:{port}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def requested(self, path: str) -> int:
        with self._lock:
            return sum(1 for r in self.log if r.path == path)

    def paths(self) -> list[str]:
        with self._lock:
            return [r.path for r in self.log]

    def start(self) -> TestSite:
        self._deadline = time.monotonic() + self.max_seconds
        self._thread.start()
        return self

    def _run(self) -> None:
        self._server.timeout = 0.05  # how soon stop() is noticed
        while time.monotonic() < self._deadline and len(self.log) < self.max_requests:
            self._server.handle_request()
        self._server.server_close()

    def stop(self) -> None:
        self._deadline = 0.0
        self._thread.join(timeout=5)

    def __enter__(self) -> TestSite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.log.append(Request(handler.path, {k.lower(): v for k, v in handler.headers.items()},
                                    time.monotonic(), handler.client_address[0]))
            self._active += 1
            self.max_active = max(self.max_active, self._active)
        try:
            self._answer(handler)
        finally:
            with self._lock:
                self._active -= 1

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("#", 1)[0]
        page = self.pages.get(path) or self.pages.get(path.split("?", 1)[0])
        if page is None:
            body = b"<html><body><h1>Not found</h1></body></html>"
            handler.send_response(404)
            handler.send_header("Content-Type", "text/html")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        if page.handler is not None:
            page.handler(handler)
            return
        data = page.data
        last_modified = formatdate(page.modified, usegmt=True)
        if page.conditional and page.status == 200:
            inm = handler.headers.get("If-None-Match")
            ims = handler.headers.get("If-Modified-Since")
            if (inm and inm == page.etag) or (not inm and ims and ims == last_modified):
                handler.send_response(304)
                handler.send_header("ETag", page.etag)
                handler.end_headers()
                return
        handler.send_response(page.status)
        handler.send_header("Content-Type", page.content_type)
        handler.send_header("Content-Length", str(len(data)))
        if page.conditional:
            handler.send_header("ETag", page.etag)
            handler.send_header("Last-Modified", last_modified)
        for name, value in page.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)
