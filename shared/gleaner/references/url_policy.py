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

from collections.abc import Iterable

from gleaner.errors import InvalidInput
from gleaner.fetch.addresses import (
    AddressRefused,
    IPNetwork,
    Resolver,
    UrlRefused,
    check_answers,
    check_url,
    lookup,
    system_resolver,
)
from gleaner.urls import canonicalize

# Names that mean "this machine" or the cloud metadata server, whatever DNS says today.
_LOOPBACK_NAMES = ("localhost",)
_METADATA_NAMES = ("metadata", "metadata.google.internal")


def refusal_reason(url: str, allow_networks: Iterable[IPNetwork], resolver: Resolver = system_resolver,
                   ) -> str | None:
    """Why this URL must not be fetched, or None if it may be (the fetcher's own address check)."""
    try:
        canonicalize(url)
        parsed = check_url(url.strip())  # parsed as the HTTP client will parse it (parsers disagree)
    except (InvalidInput, UrlRefused) as exc:
        return str(exc)
    host = parsed.host.rstrip(".")
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        answers = ["127.0.0.1"]
    elif host in _METADATA_NAMES:
        answers = ["169.254.169.254"]
    else:
        try:
            answers = lookup(host, parsed.port, resolver)
        except (OSError, UnicodeError):
            return None
    verdict = check_answers(host, answers, allow_networks)
    return verdict.reason if isinstance(verdict, AddressRefused) else None
