"""The network edge: an httpx transport that connects only to pinned addresses, within a deadline.

Two guarantees live here because only the socket layer can give them:

* **Pinning.** httpx/httpcore would resolve the URL's host again at connect time
  (a second lookup, which DNS rebinding exploits). :class:`PinnedBackend` replaces
  httpcore's resolver-calling backend: it connects to the address the
  :class:`~gleaner.fetch.addresses.AddressBook` checked for that host and port,
  and refuses a host it has no pin for. The URL keeps its host name, so the Host
  header, SNI and TLS certificate verification all use the name, not the IP.
* **A total deadline.** httpx's read timeout restarts with every chunk, so a server
  dripping one byte a second never times out. Every socket operation here is
  bounded by the time left before the current fetch's deadline (per thread, set
  with :meth:`PinnedTransport.deadline`), covering connect, TLS, headers and body.
"""

from __future__ import annotations

import ssl
import threading
import time
import typing
from collections.abc import Iterator
from contextlib import contextmanager

import httpcore
import httpx

from gleaner.fetch.addresses import AddressBook


class _Deadline(threading.local):
    at: float | None = None


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every read and write ends by the fetch deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def _left(self, timeout: float | None, exc: type[Exception]) -> float | None:
        at = self._deadline.at
        if at is None:
            return timeout
        left = at - time.monotonic()
        if left <= 0:
            raise exc("the fetch deadline passed")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(ssl_context, server_hostname, self._left(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class PinnedBackend(httpcore.NetworkBackend):
    """httpcore's sync backend, but host names map to pinned addresses instead of DNS."""

    def __init__(self, book: AddressBook, deadline: _Deadline) -> None:
        self._book = book
        self._deadline = deadline
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: typing.Iterable[typing.Any] | None = None) -> httpcore.NetworkStream:
        addresses = self._book.pinned(host, port)
        if not addresses:
            # Fail closed: nothing reaches a socket without having passed the address policy.
            raise httpcore.ConnectError(f"{host}:{port} was not checked by the address policy")
        failure: Exception | None = None
        for address in addresses:  # every one of them was checked; the next only if one is unreachable
            at = self._deadline.at
            if at is not None:
                left = at - time.monotonic()
                if left <= 0:
                    raise httpcore.ConnectTimeout("the fetch deadline passed")
                timeout = left if timeout is None else min(timeout, left)
            try:
                stream = self._inner.connect_tcp(str(address), port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                failure = exc
                continue
            return _DeadlineStream(stream, self._deadline)
        assert failure is not None
        raise failure

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: typing.Iterable[typing.Any] | None = None) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are never used by the fetcher")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class PinnedTransport(httpx.HTTPTransport):
    """httpx's own transport (request/response mapping, error translation) over :class:`PinnedBackend`."""

    def __init__(self, book: AddressBook, *, verify: ssl.SSLContext | bool = True,
                 limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits(max_connections=64, max_keepalive_connections=16)
        super().__init__(verify=verify, trust_env=False, retries=0, limits=limits)
        self._deadline = _Deadline()
        ssl_context = httpx.create_ssl_context(verify=verify, trust_env=False)
        # httpx exposes no network_backend argument, so its pool is rebuilt with ours. The DNS-rebinding
        # test (tests/integration/test_fetcher_addresses.py) fails if a later httpx stops using _pool.
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            retries=0,
            network_backend=PinnedBackend(book, self._deadline),
        )

    @contextmanager
    def deadline(self, at: float) -> Iterator[None]:
        """Bound every socket operation of this thread by ``at`` (time.monotonic) until exit."""
        previous = self._deadline.at
        self._deadline.at = at
        try:
            yield
        finally:
            self._deadline.at = previous
