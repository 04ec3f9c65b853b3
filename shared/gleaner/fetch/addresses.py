"""Address policy: which IP addresses the fetcher may connect to.

``ipaddress`` flags are not a policy (FACTS.md), so the refused ranges are listed
explicitly, and IPv4 embedded in IPv6 (mapped, compatible, NAT64, 6to4, Teredo)
is unwrapped and checked as IPv4.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

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


def is_public(address: IPAddress) -> bool:
    """True only for a globally routable unicast address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
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
    try:
        return ipaddress.ip_address(text.split("%", 1)[0] if "%" not in text else text)
    except ValueError:
        return None
