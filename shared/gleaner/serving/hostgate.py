"""Which requests `gleaner serve` answers at all, and which may act as the operator without a credential.

Two attacks motivate it (issue 26):

- **DNS rebinding.** A page at ``http://evil.test:8080`` whose name is then re-pointed at 127.0.0.1
  is, for the browser, still its own origin: its scripts read our answers and pass an Origin check
  that compares Origin with Host (both say ``evil.test``). The browser cannot hide the name it
  used, though: the ``Host`` header. So a request whose Host is not a name this server answers to
  is refused (403) before any route runs.
- **Forwarders and proxies.** Credential-less operator access is a convenience for one person's
  machine. It is granted by the *peer* being loopback **and** the Host being a loopback name, with
  no forwarding header and no extra configured name; never by the bound address alone. A proxy
  that announces itself (``Forwarded``, ``X-Forwarded-*``, ``X-Real-IP``, ``Via``) or a configured
  public name (``GLEANER_ALLOWED_HOSTS``) means someone else reaches the server: every request then
  needs a credential. What this cannot see: a plain TCP forwarder onto the loopback port makes every
  peer loopback, and a client that is not a browser can send any Host; docs/security.md says what
  holds then and why not to do it.

The names allowed: bound to a loopback address, the loopback names (``localhost``, 127.0.0.0/8,
``::1``: no DNS answer can move them); bound to one other address, that address; bound to every
address (``0.0.0.0``, ``::``), the loopback names, this machine's host names and any IP literal (a
browser that sends an IP literal as Host connected to that address: its origin is the address, not
a name someone can re-point). Plus, always, the configured names.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gleaner.serving.web import Environ, StartResponse, WsgiApp

# Headers a proxy adds to say it forwarded the request (WSGI spelling).
FORWARDING_HEADERS = ("HTTP_FORWARDED", "HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_HOST", "HTTP_X_FORWARDED_PROTO",
                      "HTTP_X_REAL_IP", "HTTP_VIA")
_WILDCARDS = ("", "0.0.0.0", "::", "*")


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    # ::ffff:127.0.0.1 reports is_loopback=False on Python 3.11 (FACTS.md): look at the IPv4 inside.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_loopback_name(name: str) -> bool:
    """``localhost`` or a loopback IP literal: names no DNS answer can point elsewhere."""
    if name == "localhost":
        return True
    address = _ip(name)
    return address is not None and address.is_loopback


def host_name(environ: Environ) -> str | None:
    """The request's Host, lowercased, without port, brackets or a trailing dot; None when absent or garbled."""
    raw = str(environ.get("HTTP_HOST", "")).strip()
    if not raw or not raw.isascii() or any(c in raw for c in "/\\@?# "):
        return None
    if raw.startswith("["):
        name, bracket, rest = raw[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
    else:
        name, _, port = raw.partition(":")
        if port and not port.isdigit():
            return None
    return name.lower().rstrip(".") or None


def peer_is_loopback(environ: Environ) -> bool:
    address = _ip(str(environ.get("REMOTE_ADDR", "")))
    return address is not None and address.is_loopback


def forwarded(environ: Environ) -> bool:
    return any(environ.get(header) for header in FORWARDING_HEADERS)


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """The names a server answers to (see the module docstring) and who needs no credential."""

    names: frozenset[str]
    loopback_names: bool  # any loopback name is ours
    ip_literals: bool  # any IP literal is ours (bound to every address)
    configured: tuple[str, ...] = ()

    @classmethod
    def for_bind(cls, host: str, configured: Iterable[str] = ()) -> HostPolicy:
        configured = tuple(configured)
        bound = host.strip("[]").lower().rstrip(".")
        if bound in _WILDCARDS:
            mine = {socket.gethostname().lower(), socket.getfqdn().lower()}
            return cls(frozenset(mine | set(configured)), True, True, configured)
        return cls(frozenset({bound, *configured}), is_loopback_name(bound), False, configured)

    def allows(self, name: str | None) -> bool:
        if name is None:
            return False
        if name in self.names or (self.loopback_names and is_loopback_name(name)):
            return True
        return self.ip_literals and _ip(name) is not None

    def credential_free(self, environ: Environ) -> bool:
        """Whether a request without a credential is the operator's: this machine's own browser or tool,
        talking to a loopback name, with no proxy in between and no public name configured."""
        name = host_name(environ)
        return (not self.configured and peer_is_loopback(environ) and name is not None
                and is_loopback_name(name) and not forwarded(environ))

    def refusal(self, environ: Environ) -> str | None:
        """Why the request is refused before routing, or None."""
        name = host_name(environ)
        if self.allows(name):
            return None
        shown = str(environ.get("HTTP_HOST", ""))[:100]
        return (f"this server does not answer to the Host {shown!r}; a name in front of it (a proxy's) "
                "goes in GLEANER_ALLOWED_HOSTS") if shown else "send a Host header naming this server"


def guard(app: WsgiApp, policy: HostPolicy) -> WsgiApp:
    """``app`` behind the Host check: a 403 with the reason before any route sees the request."""

    def gated(environ: Environ, start_response: StartResponse) -> Any:
        refused = policy.refusal(environ)
        if refused is None:
            return app(environ, start_response)
        body = json.dumps({"error": refused}).encode("utf-8")
        start_response("403 Forbidden", [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                                         ("X-Content-Type-Options", "nosniff")])
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]

    return gated
