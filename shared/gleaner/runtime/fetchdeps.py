"""The Deps' fetching wiring: the fetchers a run's stages get and what every fetcher shares.

A fetcher is made per stage of a run from the run's own settings (its recorded politeness, options and
budget), with the process's per-host table, TLS context and cross-process host turns, and the run's
robots.txt decisions. :class:`gleaner.app.Deps` exposes each of these under its own attribute name;
the functions take the Deps as their first argument.
"""

from __future__ import annotations

import logging
import ssl
from typing import TYPE_CHECKING, Any

from gleaner.settings.config import Settings

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.fetch.fetcher import Fetcher
    from gleaner.fetch.politeness import HostTable
    from gleaner.store.registry.hostslots import HostSlots

# Runs whose options and robots.txt decisions a process keeps: more than a tick runs at once (a bound
# below that made every fetcher of a many-site tick read them again), few enough for a long-lived
# function instance that sees run after run.
RUNS_REMEMBERED = 256


def new_fetcher(deps: Deps, *, run_id: str | None = None, **overrides: Any) -> Fetcher:
    """A fresh fetcher (DNS pins, host state) for one stage of a run.

    ``run_id`` shares robots.txt decisions between all the run's fetchers, in this process and
    in every other one through PostgreSQL (read once per host per run), and makes the budget the
    run's: what it already used (requests and bytes counted only when it has such a limit, since
    counting reads the run's whole ledger; seconds since it started) counts against it.
    Per-host delay and concurrency come from ``knowledge.source_hosts``.
    """
    own = deps.run_options(run_id) if run_id is not None else {}
    settings = deps.run_settings(run_id)
    settings = settings.with_(**overrides) if overrides else settings
    if deps.fetcher_factory is not None:
        return deps.fetcher_factory(settings)
    from gleaner.fetch.budget import RunBudget, Spent

    own = dict(own.get("budget") or {})
    max_requests = int(own.get("max_requests", settings.run_max_requests))
    max_bytes = int(own.get("max_bytes", settings.run_max_bytes))
    max_seconds = float(own.get("max_seconds", settings.run_max_seconds))
    spent = Spent()
    if run_id is not None and (max_requests or max_bytes or max_seconds):  # an unlimited run counts nothing
        spent = Spent(*deps.metadata.run_spent(run_id, counted=bool(max_requests or max_bytes)))
    budget = RunBudget(max_requests=max_requests, max_bytes=max_bytes, max_seconds=max_seconds, spent=spent)
    robots = None
    if run_id is not None:
        from gleaner.store.ledger.runrobots import RunRobots

        with deps._lock:
            robots = deps._robots_by_run.get(run_id)
            if robots is None:
                robots = deps._robots_by_run[run_id] = RunRobots(deps.metadata, run_id)
            while len(deps._robots_by_run) > RUNS_REMEMBERED:
                deps._robots_by_run.pop(next(iter(deps._robots_by_run)))
    from gleaner.fetch.fetcher import Fetcher

    return Fetcher(settings, budget=budget, hosts=deps.host_table, robots_cache=robots, verify=deps.tls_context,
                   shared_turns=deps.host_slots if settings.shared_politeness else None)


def host_slots(deps: Deps) -> HostSlots:
    """Per-host turns shared with every other process (``GLEANER_SHARED_POLITENESS``)."""
    from gleaner.store.registry.hostslots import HostSlots

    return HostSlots(deps.engine)


def run_settings(deps: Deps, run_id: str | None) -> Settings:
    """The settings a run fetches with: its own politeness (`crawl --delay/--concurrency`, recorded by
    map) counts as given on the command line, on the first crawl and on a resume, in every process
    alike, so it beats the site's own setting as it does where the crawl was typed."""
    own = dict(deps.run_options(run_id).get("politeness") or {}) if run_id is not None else {}
    if not own:
        return deps.settings
    from gleaner.fetch.politeness import Source

    sources = {**deps.settings.politeness_sources, **{name: str(Source.COMMAND_LINE) for name in own}}
    return deps.settings.with_(**own, politeness_sources=sources)


def run_options(deps: Deps, run_id: str) -> dict[str, Any]:
    """A run's own options (limit, globs, render, a scheduled site's budget, a crawl's politeness), read
    once per run and process: they are written with the run and never change. An unknown run (or one
    without options) is asked again next time."""
    with deps._lock:
        if run_id in deps._options_by_run:
            return deps._options_by_run[run_id]
    options = deps.metadata.run_options(run_id)
    if not options:
        return options
    with deps._lock:
        deps._options_by_run[run_id] = options
        while len(deps._options_by_run) > RUNS_REMEMBERED:
            deps._options_by_run.pop(next(iter(deps._options_by_run)))
    return options


def tls_context(deps: Deps) -> ssl.SSLContext:
    """One TLS context for every fetcher of the process: building one loads the CA bundle, which a
    fetcher per scrape batch paid every batch. Contexts are safe to share."""
    import httpx

    return httpx.create_ssl_context(trust_env=False)


def host_table(deps: Deps) -> HostTable:
    """Per-host politeness shared by every fetcher of this process (concurrent stages take turns)."""
    from gleaner.fetch.politeness import HostTable

    return HostTable(deps._host_politeness, requests_in_flight=deps.settings.fetch_concurrency)


def host_politeness(deps: Deps, host: str) -> tuple[float | None, int | None]:
    try:
        return deps.metadata.host_politeness_for(host)
    except Exception:  # the defaults are polite; a database hiccup must not stop fetching
        log.warning("could not read politeness for %s; using the defaults", host, exc_info=True)
        return None, None
