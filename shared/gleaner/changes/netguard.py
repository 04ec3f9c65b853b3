"""The address policy for code that opens its own sockets (Apprise's plugins: requests, smtplib).

Inside :func:`guarded`, on the calling thread only:

- every ``socket.getaddrinfo`` (what urllib3, http.client and smtplib call before connecting) is
  answered by :func:`gleaner.fetch.addresses.check_answers` over one lookup: all answers must pass
  the address policy or the lookup fails (``PolicyBlocked``, an ``OSError``), and only the checked
  addresses are returned, so the connection is made to an address that was checked;
- every ``socket.connect``/``sendto`` is checked again by an audit hook (:pep:`578`) on the address
  actually connected to: a plugin that resolved a name some other way, or connected to an IP literal
  or a Unix socket, is refused at the socket.

Other threads are untouched: the wrapper and the hook read a thread-local and return at once when
no guard is active. The audit hook is installed once per process and cannot be removed (Python
offers no way), which is why it does nothing outside a guard.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gleaner.fetch.addresses import (
    AddressRefused,
    IPNetwork,
    Resolver,
    check_answers,
    is_allowed,
    lookup,
    parse_address,
)

_real_getaddrinfo = socket.getaddrinfo
_local = threading.local()
_install_lock = threading.Lock()
_installed = False


class PolicyBlocked(OSError):
    """A connection the address policy refused (raised inside the plugin, which reports a failure)."""


def system_lookup(host: str, port: int) -> list[str]:
    """getaddrinfo as it was before the guard wrapped it."""
    return [str(info[4][0]) for info in _real_getaddrinfo(host, port, type=socket.SOCK_STREAM)]


@dataclass
class Guard:
    """One guarded section: the networks allowed, the resolver, and what it refused (for the log)."""

    allow: tuple[IPNetwork, ...]
    resolver: Resolver
    refusals: list[str] = field(default_factory=list)

    def refuse(self, reason: str) -> PolicyBlocked:
        self.refusals.append(reason)
        return PolicyBlocked(reason)


def _getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                 flags: int = 0) -> list[Any]:
    guard: Guard | None = getattr(_local, "guard", None)
    if guard is None or host is None:
        return _real_getaddrinfo(host, port, family, type, proto, flags)
    name = host.decode("idna") if isinstance(host, bytes) else str(host)
    number = int(port) if port not in (None, "") and str(port).isdigit() else 0
    _local.guard = None  # a resolver that calls getaddrinfo itself gets the real one
    try:
        answers = lookup(name, number, guard.resolver)
    except (OSError, UnicodeError) as exc:
        raise guard.refuse(f"cannot resolve {name}: {exc}") from exc
    finally:
        _local.guard = guard
    checked = check_answers(name, answers, guard.allow)
    if isinstance(checked, AddressRefused):
        raise guard.refuse(checked.reason)
    out: list[Any] = []
    for address in checked:
        out.extend(_real_getaddrinfo(str(address), port, family, type, proto, flags | socket.AI_NUMERICHOST))
    return out


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event not in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        return
    guard: Guard | None = getattr(_local, "guard", None)
    if guard is None:
        return
    sock, address = args[0], args[1]
    if event == "socket.sendmsg" and address is None:
        return  # a connected socket: its connect was checked
    if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6):
        raise guard.refuse(f"refused a non-IP socket ({getattr(sock, 'family', '?')})")
    host = address[0] if isinstance(address, tuple) and address else None
    ip = parse_address(str(host)) if host is not None else None
    if ip is None:
        raise guard.refuse(f"refused a connection to an unresolved name {host!r}")
    if not is_allowed(ip, guard.allow):
        raise guard.refuse(f"non-public address {ip} (GLEANER_ALLOW_NETWORKS names the networks that may be"
                           " reached besides public ones)")


def _install() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            socket.getaddrinfo = _getaddrinfo
            sys.addaudithook(_audit)
            _installed = True


@contextmanager
def guarded(allow: tuple[IPNetwork, ...], resolver: Resolver | None = None) -> Iterator[Guard]:
    """Every connection this thread opens inside the block passes the address policy."""
    _install()
    guard = Guard(allow, resolver or system_lookup)
    previous = getattr(_local, "guard", None)
    _local.guard = guard
    try:
        yield guard
    finally:
        _local.guard = previous
