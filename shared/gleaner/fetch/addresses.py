"""Address policy: which URLs and IP addresses the fetcher may connect to.

``ipaddress`` flags are not a policy (FACTS.md), so the refused ranges are listed
explicitly, IPv6 must lie in global unicast 2000::/3, and IPv4 embedded in IPv6
(mapped, compatible, NAT64, 6to4, Teredo) is unwrapped and checked as IPv4.

A URL is checked on the form both httpx's strict parser and yarl (what aiohttp sends) parse,
because parsers disagree (backslashes, userinfo). Its host is then resolved once by
:class:`AddressBook`; every address must pass :func:`is_allowed`, and the first
checked answers are *pinned*: the transport connects to them (in the resolver's
order, the next one only if the previous cannot be reached) and never looks the name up again,
so DNS rebinding between check and connect cannot work.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

# httpx's package imports its command-line client (click, rich, pygments) whenever those are installed,
# though only its parser is used here: a module marked absent in sys.modules makes httpx define the
# stub it defines when they are missing (its `httpx` command, a process of its own, is unaffected).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx  # noqa: E402
import yarl  # noqa: E402

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

REFUSED_V4: tuple[ipaddress.IPv4Network, ...] = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # CGNAT
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, incl. the metadata server 169.254.169.254
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation TEST-NET-1
        "192.31.196.0/24",  # AS112
        "192.52.193.0/24",  # AMT
        "192.88.99.0/24",  # deprecated 6to4 relay anycast
        "192.168.0.0/16",  # private
        "192.175.48.0/24",  # AS112 direct delegation
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation TEST-NET-2
        "203.0.113.0/24",  # documentation TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, incl. broadcast
    )
)
REFUSED_V6: tuple[ipaddress.IPv6Network, ...] = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::/128",  # unspecified
        "::1/128",  # loopback
        "::ffff:0:0/96",  # IPv4-mapped (unwrapped first; refused if unwrapping fails)
        "::/96",  # IPv4-compatible (deprecated)
        "64:ff9b::/96",  # NAT64 well-known prefix
        "64:ff9b:1::/48",  # NAT64 local-use
        "100::/64",  # discard-only
        "2001::/23",  # IETF protocol assignments (incl. Teredo 2001::/32, ORCHID)
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4
        "3fff::/20",  # documentation
        "5f00::/16",  # SRv6 SIDs
        "fc00::/7",  # unique-local (incl. the metadata server fd20:ce::254)
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4, Teredo)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    packed = address.packed
    if packed[:12] == bytes(12) and address != ipaddress.IPv6Address("::1") and int(address) > 1:
        return ipaddress.IPv4Address(packed[12:])
    if address in ipaddress.IPv6Network("64:ff9b::/96") or address in ipaddress.IPv6Network("64:ff9b:1::/48"):
        return ipaddress.IPv4Address(packed[12:])
    return None


GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")


def is_public(address: IPAddress) -> bool:
    """True only for a globally routable unicast address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id or address not in GLOBAL_UNICAST_V6:
            return False
        inner = embedded_ipv4(address)
        if inner is not None:
            # The embedded IPv4 must itself be public, and the wrapper ranges are refused anyway.
            return False
        return not any(address in net for net in REFUSED_V6)
    return not any(address in net for net in REFUSED_V4)


def is_allowed(address: IPAddress, allow: Iterable[IPNetwork]) -> bool:
    """Public, or inside one of the operator's allowed networks (GLEANER_ALLOW_NETWORKS)."""
    candidates: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None:
            candidates.append(inner)
    for net in allow:
        for candidate in candidates:
            if candidate.version == net.version and candidate in net:
                return True
    return is_public(address)


def parse_address(text: str) -> IPAddress | None:
    """The address a resolver answered (a zone id, ``fe80::1%eth0``, is kept so it is refused)."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


class UrlRefused(ValueError):
    """The URL itself is refused before any lookup (scheme, userinfo, zone id, odd characters)."""


_UNSAFE_URL = re.compile(r"[\x00-\x20\x7f\\]")
_NUMERIC_HOST = re.compile(r"[0-9.]+")


@dataclass(frozen=True, slots=True)
class CheckedUrl:
    """A URL that passed :func:`check_url`: its text, the parsed form the client sends, host and port."""

    text: str  # as the caller spelled it (results report this)
    wire: yarl.URL  # what aiohttp is handed: never re-parsed from text
    host: str  # the ASCII (IDNA) host the connection is made to, lower case, IPv6 without brackets
    port: int  # explicit or the scheme's default


def check_url(url: str) -> CheckedUrl:
    """Parse ``url`` and refuse what could make parsers disagree; the checked URL.

    httpx's parser is the strict one (it refuses octal-looking and full-width hosts outright);
    aiohttp sends what yarl parses. Both must see the same host and port, or the URL is refused.
    """
    if _UNSAFE_URL.search(url):
        raise UrlRefused("URL contains whitespace, control characters or a backslash")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, UnicodeError, ValueError) as exc:
        raise UrlRefused(f"unparseable URL: {exc}") from exc
    if parsed.scheme not in ("http", "https"):
        raise UrlRefused(f"scheme {parsed.scheme!r} is not http(s)")
    if parsed.userinfo:
        raise UrlRefused("URL carries credentials (userinfo)")
    host = parsed.raw_host.decode("ascii", "replace")  # the IDNA form the connection is made to
    if not host:
        raise UrlRefused("URL has no host")
    if "%" in host:
        raise UrlRefused("URL host carries a zone id")
    if _NUMERIC_HOST.fullmatch(host) and parse_address(host) is None:
        # 127.1, 2130706433, 017700000001: getaddrinfo reads them as addresses, aiohttp refuses them.
        raise UrlRefused(f"legacy numeric IPv4 spelling {host!r} (only dotted quads are accepted)")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        wire = yarl.URL(str(parsed).partition("#")[0], encoded=True)  # the fragment is never sent
    except (TypeError, ValueError) as exc:
        raise UrlRefused(f"unparseable URL: {exc}") from exc
    if (wire.raw_host or "").lower() != host.lower() or wire.port != port:
        raise UrlRefused(f"URL parsers disagree about its host ({host!r} vs {wire.raw_host!r})")
    return CheckedUrl(url, wire, host.lower(), port)


Resolver = Callable[[str, int], list[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """getaddrinfo: the one real DNS lookup a host gets per run."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def lookup(host: str, port: int, resolver: Resolver) -> list[str]:
    """The addresses a host stands for: itself when it is an address literal, else the resolver's answers."""
    literal = parse_address(host.strip("[]"))
    return [str(literal)] if literal is not None else list(resolver(host, port))


def check_answers(host: str, answers: Iterable[str], allow: Iterable[IPNetwork],
                  ) -> tuple[IPAddress, ...] | AddressRefused:
    """Every answer must be allowed: the checked addresses, or the refusal (not raised: callers keep it)."""
    networks = tuple(allow)
    checked: list[IPAddress] = []
    for text in answers:
        address = parse_address(text)
        if address is None:
            return AddressRefused(f"resolver answered a non-address {text!r} for {host}")
        if not is_allowed(address, networks):
            return AddressRefused(f"non-public address: {host} resolves to {address} (GLEANER_ALLOW_NETWORKS "
                                  "names the networks that may be reached besides public ones)", non_public=True)
        checked.append(address)
    if not checked:
        return AddressRefused(f"{host} has no addresses")
    return tuple(dict.fromkeys(checked))  # getaddrinfo repeats an address per socket type


class AddressRefused(Exception):
    """The host cannot be reached under the address policy (or cannot be resolved).

    ``non_public`` says the policy itself refused it (an address outside the public internet and
    GLEANER_ALLOW_NETWORKS), which is permanent; a lookup failure may pass by the next run.
    """

    def __init__(self, reason: str, *, non_public: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.non_public = non_public


class AddressBook:
    """Resolve each (host, port) once, check every answer, remember the pinned address.

    One book per Fetcher (= per run or batch): a host resolves once, so a name that
    answers differently later (DNS rebinding) cannot change where we connect.
    """

    def __init__(self, resolver: Resolver, allow: tuple[IPNetwork, ...]) -> None:
        self._resolver = resolver
        self._allow = allow
        self._pins: dict[tuple[str, int], tuple[IPAddress, ...] | AddressRefused] = {}
        self._locks: dict[tuple[str, int], threading.Lock] = {}
        self._lock = threading.Lock()

    def pin(self, host: str, port: int) -> tuple[IPAddress, ...]:
        """The checked addresses for host:port (resolving on first use); AddressRefused otherwise."""
        key = (host.lower(), port)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._pins:
                self._pins[key] = self._check(host, port)
            pinned = self._pins[key]
        if isinstance(pinned, AddressRefused):
            raise AddressRefused(pinned.reason, non_public=pinned.non_public)
        return pinned

    def pinned(self, host: str, port: int) -> tuple[IPAddress, ...]:
        """The addresses already checked for host:port, or none: the transport never resolves."""
        with self._lock:
            value = self._pins.get((host.lower(), port))
        return () if value is None or isinstance(value, AddressRefused) else value

    def _check(self, host: str, port: int) -> tuple[IPAddress, ...] | AddressRefused:
        try:
            answers = lookup(host, port, self._resolver)
        except (OSError, UnicodeError) as exc:
            return AddressRefused(f"cannot resolve {host}: {exc}")
        return check_answers(host, answers, self._allow)
