"""The network edge: an aiohttp session that connects only to addresses the policy checked.

**Pinning.** aiohttp asks its resolver for a host's addresses at connect time. The session here
uses :class:`PinnedResolver`, which never looks anything up: it answers with the addresses the
:class:`~gleaner.fetch.addresses.AddressBook` already resolved and checked for that host and
port, and refuses a host it has no pin for (fail closed), so a second lookup (DNS rebinding)
cannot happen. An IP-literal host skips the resolver inside aiohttp; the fetcher checked that
literal before the request, and the URL it sends is the very object it checked. The URL keeps its
host name, so the Host header, SNI and certificate verification use the name, not the IP.

**No ambient behaviour.** No proxy from the environment (it would defeat pinning), no cookies,
no transparent decompression (the body is decoded under limits by :mod:`gleaner.fetch.body`),
no redirects followed by the library (each hop is checked again by the fetcher), no timeouts of
its own (the fetcher bounds each exchange with one total deadline).
"""

from __future__ import annotations

import socket
import ssl

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from gleaner.fetch.addresses import AddressBook

# Headers of real sites (long Content-Security-Policy, many Set-Cookie) pass aiohttp's 8 KiB default.
MAX_HEADER_FIELD = 64 * 1024
MAX_HEADERS = 256


class PinnedResolver(AbstractResolver):
    """Answers only with checked addresses; never performs a lookup."""

    def __init__(self, book: AddressBook) -> None:
        self._book = book

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        addresses = self._book.pinned(host, port)
        if not addresses:
            raise OSError(f"{host}:{port} was not checked by the address policy")
        return [ResolveResult(hostname=host, host=str(address), port=port,
                              family=socket.AF_INET6 if address.version == 6 else socket.AF_INET,
                              proto=0, flags=socket.AI_NUMERICHOST)
                for address in addresses]

    async def close(self) -> None:
        return None


def open_session(book: AddressBook, *, verify: ssl.SSLContext | bool, user_agent: str, accept_encoding: str,
                 max_connections: int = 64) -> aiohttp.ClientSession:
    """A session for one fetcher; create it on the fetch loop and close it there."""
    connector = aiohttp.TCPConnector(
        resolver=PinnedResolver(book),
        use_dns_cache=False,  # the book is the cache; aiohttp's would outlive a fetcher's pins
        ssl=verify,  # a context (the process's shared one), True (system CAs) or False (tests only)
        limit=max_connections,
        limit_per_host=0,  # per-host concurrency is the fetcher's politeness, not the pool's
    )
    return aiohttp.ClientSession(
        connector=connector,
        headers={"User-Agent": user_agent, "Accept-Encoding": accept_encoding},
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
        auto_decompress=False,
        timeout=aiohttp.ClientTimeout(total=None, connect=None, sock_read=None, sock_connect=None),
        requote_redirect_url=False,
        max_field_size=MAX_HEADER_FIELD,
        max_line_size=MAX_HEADER_FIELD,
        max_headers=MAX_HEADERS,
    )
