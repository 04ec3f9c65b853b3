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
  that announces itself or a configured public name (``GLEANER_ALLOWED_HOSTS``) means someone else
  reaches the server: every request then needs a credential. Proxies name their headers in many
  ways (``Forwarded``, ``X-Forwarded-*``, ``X-Original-Forwarded-For``, ``X-Real-IP``, ``Client-IP``,
  ``CF-Connecting-IP``, ``Via``, ...), so the family is matched by the words in the name
  (:func:`is_forwarding_header`), not listed; a header spelled with underscores, which waitress drops
  as ambiguous, is still seen (:func:`server_channel`). An absolute-form request target
  (``GET http://evil.test/...``) names its host in its authority, which RFC 9112 puts before the
  ``Host`` header: that authority is the name checked. What this cannot see: a plain TCP forwarder
  onto the loopback port makes every peer loopback, and a client that is not a browser can send any
  Host; docs/security.md says what holds then and why not to do it.

The names allowed: bound to a loopback address, the loopback names (``localhost``, 127.0.0.0/8,
``::1``: no DNS answer can move them); bound to one other address, that address; bound to every
address (``0.0.0.0``, ``::``), the loopback names, this machine's host names and any IP literal (a
browser that sends an IP literal as Host connected to that address: its origin is the address, not
a name someone can re-point). Plus, always, the configured names.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gleaner.serving.web import Environ, StartResponse, WsgiApp

# The words of a header name (WSGI spelling, upper case, "_" between words) that say a proxy or a client
# claims another address or host: Forwarded, X-Forwarded-*, X-Original-Forwarded-For, Via, X-Real-IP,
# Client-IP, True-Client-IP, CF-Connecting-IP, X-Cluster-Client-IP, X-Azure-ClientIP, X-Originating-IP,
# X-Original-Host, Remote-Addr... New spellings appear every year: the words, not a list of names.
_FORWARDING_WORD = re.compile(r"FORWARD|^VIA$|^ORIGINAL$|^ORIGINATING$|^REAL$|^CONNECTING$|IP$|^ADDR(?:ESS)?$")
# Where the server records header names it dropped because they hold "_" (see server_channel).
UNDERSCORE_HEADERS = "HTTP_gleaner.underscore_headers"
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


def absolute_authority(environ: Environ) -> str | None:
    """The authority of an absolute-form request target (``GET http://name:port/path``), else None."""
    target = str(environ.get("REQUEST_URI", ""))
    if not target or target.startswith("/") or target == "*":
        return None
    scheme, sep, rest = target.partition("://")
    if not sep or not scheme.isalpha():
        return ""  # not origin-form and not a URL: garbled, so no name at all
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return authority if "@" not in authority else ""  # userinfo in a target: garbled


def host_name(environ: Environ) -> str | None:
    """The name the request is for, lowercased, without port, brackets or a trailing dot: an absolute-form
    target's authority (RFC 9112, 3.2.2), else the Host header; None when absent or garbled."""
    authority = absolute_authority(environ)
    raw = (authority if authority is not None else str(environ.get("HTTP_HOST", ""))).strip()
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


def client_address(environ: Environ, trusted: Iterable[Any]) -> str:
    """The address of the client the request is for: the peer, unless the peer is a trusted proxy, then the
    nearest address its ``X-Forwarded-For`` (or ``Forwarded: for=``) names that is not itself a trusted proxy.
    Read from the right: a client can write anything on the left, each proxy appends what it saw."""
    networks = tuple(trusted)

    def is_trusted(text: str) -> bool:
        address = _ip(text)
        return address is not None and any(address in network for network in networks)

    peer = str(environ.get("REMOTE_ADDR", ""))
    if not is_trusted(peer):
        return peer
    hops = [hop.strip() for hop in str(environ.get("HTTP_X_FORWARDED_FOR", "")).split(",") if hop.strip()]
    if not hops:
        hops = [match.strip('"') for match in re.findall(r'for=("[^"]*"|[^;,\s]+)',
                                                          str(environ.get("HTTP_FORWARDED", "")), re.IGNORECASE)]
    for hop in reversed(hops):
        bare = hop[1:].partition("]")[0] if hop.startswith("[") else (hop.rpartition(":")[0] if hop.count(":") == 1
                                                                      else hop)
        if not is_trusted(bare):
            return bare[:100]
    return peer


def peer_is_loopback(environ: Environ) -> bool:
    address = _ip(str(environ.get("REMOTE_ADDR", "")))
    return address is not None and address.is_loopback


def is_forwarding_header(name: str) -> bool:
    """Whether a header name (``X-Forwarded-For``, ``HTTP_X_FORWARDED_FOR``, ``x_forwarded_for``...) is one
    a proxy uses to pass on another client's address, host or protocol."""
    key = name.upper().replace("-", "_")
    key = key[5:] if key.startswith("HTTP_") else key
    return any(_FORWARDING_WORD.search(word) for word in key.split("_") if word)


def forwarded(environ: Environ) -> bool:
    """Whether the request carries any forwarding-style header, by any spelling."""
    if environ.get(UNDERSCORE_HEADERS):
        return True
    return any(key.startswith("HTTP_") and is_forwarding_header(key) for key in environ)


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


def server_channel(base: type) -> type:
    """Waitress's channel class, whose parser notes the headers it drops for holding ``_`` (``X_Forwarded_For``
    is ambiguous with ``X-Forwarded-For`` once in WSGI form): the app sees that one was sent."""
    from waitress.parser import HTTPRequestParser, get_header_lines

    class Parser(HTTPRequestParser):
        def parse_header(self, header_plus: bytes) -> None:
            super().parse_header(header_plus)
            _, _, block = header_plus.partition(b"\r\n")
            dropped = [line.split(b":", 1)[0] for line in get_header_lines(block) if b"_" in line.split(b":", 1)[0]]
            if dropped:
                # Lower case: no client header can reach this key (waitress upper-cases them all).
                self.headers[UNDERSCORE_HEADERS[len("HTTP_"):]] = \
                    b",".join(dropped).decode("latin-1")

    return type("GleanerChannel", (base,), {"parser_class": Parser})


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
