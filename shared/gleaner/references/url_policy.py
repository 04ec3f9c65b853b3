"""Which article URLs may be landed at all: the seed's SSRF check, on Gleaner's address policy.

A poller is outside input: it can name ``http://169.254.169.254/`` or a host that
resolves to a private address. Before any request, the URL must be a
canonicalisable http(s) URL whose every resolved address is public or inside
``GLEANER_ALLOW_NETWORKS`` (the same policy as the fetcher, which checks again
and pins the address it connects to). A refusal is permanent and reported as
``ssrf_rejected``; a name that does not resolve is not a refusal (DNS can be
down for a minute) and is left to the fetcher, which reports it as transient.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable

from gleaner.errors import InvalidInput
from gleaner.fetch.addresses import IPNetwork, UrlRefused, check_url, is_allowed, parse_address
from gleaner.urls import canonicalize

Resolver = Callable[[str, int], list[str]]


def system_resolver(host: str, port: int) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def refusal_reason(url: str, allow_networks: Iterable[IPNetwork], resolver: Resolver = system_resolver,
                   ) -> str | None:
    """Why this URL must not be fetched, or None if it may be."""
    try:
        canonicalize(url)
        parsed = check_url(url.strip())  # parsed as the HTTP client will parse it (FACTS.md: parsers disagree)
    except (InvalidInput, UrlRefused) as exc:
        return str(exc)
    host = parsed.host.rstrip(".")
    if host in ("localhost", "metadata", "metadata.google.internal") or host.endswith(".localhost"):
        # Names that mean "this machine" or the cloud metadata server, whatever DNS says today.
        addresses = ["127.0.0.1"] if "localhost" in host else ["169.254.169.254"]
    else:
        literal = parse_address(host.strip("[]"))
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                addresses = resolver(host, parsed.port)
            except (OSError, UnicodeError):
                return None
    networks = tuple(allow_networks)
    for text in addresses:
        address = parse_address(text)
        if address is None:
            return f"{host} resolves to a non-address {text!r}"
        if not is_allowed(address, networks):
            return f"non-public address: {host} resolves to {address}"
    return None
