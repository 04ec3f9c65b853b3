"""Per-host politeness state: a concurrency slot, the earliest next request, the delay to keep.

One :class:`HostTable` is shared by every fetcher a process builds (the composition root keeps
it), so two stages or two runs fetching from one host at once still take turns: politeness is a
property of the server, not of a run. The concurrency slots are asyncio semaphores: every fetch
of the process runs on the one fetch loop (:mod:`gleaner.fetch.loop`). Like Scrapy's downloader,
the table also holds the process's global bound on requests in flight (``GLEANER_FETCH_CONCURRENCY``):
a request takes it only while it is on the wire, after its host's slot and delay, so requests
waiting out a host's delay never keep another host's requests from starting.

Across processes (several function instances fetching one site's batches), the fetcher also
takes a turn from :class:`SharedTurns` (``GLEANER_SHARED_POLITENESS``; PostgreSQL's
``knowledge.host_slots`` in :mod:`gleaner.store.registry.hostslots`) before every request, after the
cheap in-process turn, so the host sees no more than its concurrency and its spacing in all.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

# (delay seconds, concurrency) an operator configured for a host (source_hosts); None = the default.
HostPoliteness = Callable[[str], tuple[float | None, int | None]]


class Source(StrEnum):
    """Where a politeness value came from, strongest first (docs/configuration.md)."""

    COMMAND_LINE = "command line"
    SITE = "site settings"
    ENVIRONMENT = "environment"
    CONFIG_FILE = "config file"
    DEFAULT = "default"


def choose(configured: float, configured_source: str, site: float | None) -> tuple[float, str]:
    """The value that applies and its source: the command line beats a site's setting, which beats the
    environment, the config files and the default (all three already folded into ``configured``)."""
    if site is None or configured_source == Source.COMMAND_LINE:
        return configured, configured_source
    return site, str(Source.SITE)


def asked_of(default_delay: float, default_concurrency: int, sources: Mapping[str, str]) -> tuple[float, int, str, str]:
    """What a fetcher asks of a host's politeness: its settings' delay and concurrency and their sources."""
    return (float(default_delay), int(default_concurrency), str(sources.get("host_delay", Source.DEFAULT)),
            str(sources.get("host_concurrency", Source.DEFAULT)))


@dataclass(frozen=True, slots=True)
class Turn:
    """A claimed shared slot on a host; given back with :meth:`SharedTurns.release`."""

    host: str
    slot: int
    holder: str


class SharedTurns(Protocol):
    """Per-host turns shared by every process (the port; PostgreSQL implements it)."""

    def claim(self, host: str, *, concurrency: int, spacing: float, lease: float) -> Turn | float:
        """A turn now, or the seconds to wait before asking again."""
        ...

    def release(self, turn: Turn, *, pause: float) -> None:
        """Free the slot; the host's next request starts no sooner than ``pause`` seconds from now."""
        ...


@dataclass(slots=True)
class HostState:
    """Politeness for one host name."""

    slots: asyncio.Semaphore
    delay: float
    concurrency: int
    next_at: float = 0.0  # time.monotonic() before which no request may start
    crawl_delay: float = 0.0  # the largest Crawl-delay robots.txt asked for
    delay_source: str = Source.DEFAULT
    concurrency_source: str = Source.DEFAULT
    site: tuple[float | None, int | None] = (None, None)  # the operator's setting for the host, read once
    asked: tuple[float, int, str, str] | None = None  # what the fetcher that set it asked for (asked_of)


class HostTable:
    """Host name -> :class:`HostState`, created on first sight from the operator's settings."""

    def __init__(self, politeness: HostPoliteness | None = None, *, requests_in_flight: int = 16) -> None:
        self._politeness = politeness
        self._hosts: dict[str, HostState] = {}
        self._lock = threading.Lock()
        # Every request of the process on the wire at once, across hosts and runs.
        self.in_flight = asyncio.Semaphore(max(1, requests_in_flight))

    def peek(self, hostname: str) -> HostState | None:
        """The host's state if it was seen before (no lookup of the operator's settings)."""
        return self._hosts.get(hostname.lower())

    def get(self, hostname: str, *, default_delay: float, default_concurrency: int,
            sources: Mapping[str, str] | None = None) -> HostState:
        """The host's state; on first sight its delay and concurrency are chosen by precedence (:func:`choose`)
        between the settings' values (from ``sources``: the command line, environment, file or default)
        and the site's own."""
        hostname = hostname.lower()
        sources = sources or {}
        asked = asked_of(default_delay, default_concurrency, sources)
        with self._lock:
            state = self._hosts.get(hostname)
            if state is not None and state.asked == asked:
                return state
            site = state.site if state is not None else (
                self._politeness(hostname) if self._politeness is not None else (None, None))
            site_delay, site_concurrency = site
            delay, delay_source = choose(default_delay, asked[2], None if site_delay is None
                                         else max(0.0, float(site_delay)))
            concurrency, concurrency_source = choose(default_concurrency, asked[3],
                                                     max(1, int(site_concurrency)) if site_concurrency else None)
            if state is not None and state.slots.locked():
                # Another run (its own --delay) is fetching the host in this process: keep its turns, and
                # space every request by the larger delay while both are at it.
                state.delay = max(state.delay, float(delay))
                state.asked = asked
                return state
            # New, or asked for by a run whose own politeness differs (a long-lived function instance
            # serves many runs): that run's delay and concurrency apply from its next request, spaced
            # from the last one this process sent, with the Crawl-delay already learnt.
            fresh = HostState(asyncio.Semaphore(int(concurrency)), float(delay), int(concurrency),
                              delay_source=delay_source, concurrency_source=concurrency_source, site=site, asked=asked)
            if state is not None:
                fresh.next_at, fresh.crawl_delay = state.next_at, state.crawl_delay
            self._hosts[hostname] = fresh
            return fresh

    def forget(self, hostname: str) -> None:
        """Read the host's settings again at its next request (an operator changed them)."""
        with self._lock:
            state = self._hosts.get(hostname.lower())
            if state is not None and not state.slots.locked():  # a host being fetched keeps its turns
                del self._hosts[hostname.lower()]
