"""The one component through which every Gleaner request goes.

For each URL, in order: the URL is checked as httpx parses it (http(s) only, no
userinfo, zone id, backslash or control character); robots.txt of its origin is
read first (once per Fetcher, i.e. per run or batch) and obeyed; its host is
resolved once and every address must be public or inside
``GLEANER_ALLOW_NETWORKS``; the transport (aiohttp, on the process's fetch loop)
connects to that checked address and nothing else; the host's politeness (concurrency, delay, Crawl-delay, 429/503
backoff) and the run's budget are respected; the body is read under wire and
decoded caps and a total deadline. Redirects are followed up to
``max_redirects`` hops, each hop checked again from the start.

The public methods are synchronous (the stages are); each request runs as a
coroutine on :mod:`gleaner.fetch.loop`. Every call returns a :class:`FetchResult`
with exactly one :class:`FetchOutcome`; nothing raises for a URL's failure. What a response means
(status, content type, robots.txt answer, Retry-After) is decided in :mod:`gleaner.fetch.judgement`;
whether and when each hop is asked (address policy, the host's turn, budget, backoff) in
:mod:`gleaner.fetch.admission`, which :class:`Fetcher` extends.
Library exceptions are translated here::

    TimeoutError (the deadline) -> unavailable (timeout), or exhausted when the run's deadline cut it
    aiohttp.ClientError, OSError -> unavailable (network: ...)
    UrlRefused               -> unavailable (refused-url: ...)
    AddressRefused           -> unavailable (non-public address / cannot resolve)
    BodyRefused              -> refused-size | refused-content | exhausted
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import time
from collections.abc import Iterable, Iterator, MutableMapping
from dataclasses import replace
from queue import SimpleQueue
from urllib.parse import urlsplit

import aiohttp

from gleaner.errors import InvalidInput
from gleaner.fetch import loop
from gleaner.fetch.addresses import AddressBook, Resolver, UrlRefused, check_url, system_resolver
from gleaner.fetch.admission import Deferred, HopAdmission
from gleaner.fetch.admission import with_outcome as _with
from gleaner.fetch.budget import RunBudget, Spent
from gleaner.fetch.judgement import REDIRECTS, robots_rules_from
from gleaner.fetch.politeness import HostPoliteness, HostTable, SharedTurns
from gleaner.fetch.robots import RobotsRules, RobotsState
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest, FetchResult
from gleaner.settings.config import Settings
from gleaner.urls import absolutize, fetchable

__all__ = ["Fetcher", "HostPoliteness", "Resolver", "system_resolver"]


# Requests handed to the fetch loop at once by fetch_many (the concurrency is bounded separately).
FETCH_CHUNK = 256


class Fetcher(HopAdmission):
    """Polite, safe HTTP fetching. One instance per stage of a run: DNS pins and the budget live on it.

    ``resolver`` replaces getaddrinfo (tests that need a name to answer something chosen).
    ``budget`` is the run's budget (by default one built from the settings); ``host_politeness``
    gives per-host overrides of delay and concurrency; ``robots_cache`` is the run's robots
    decisions by origin (shared between the fetchers of one run); ``hosts`` is the process's
    per-host politeness state (shared by every fetcher, so concurrent stages take turns on a host;
    it carries its own ``host_politeness``); ``verify`` is the TLS trust (default: the system's CAs);
    ``shared_turns`` makes every request also wait for its host's turn among all processes.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        resolver: Resolver | None = None,
        respect_robots: bool = True,
        budget: RunBudget | None = None,
        host_politeness: HostPoliteness | None = None,
        robots_cache: MutableMapping[str, RobotsRules] | None = None,
        hosts: HostTable | None = None,
        verify: ssl.SSLContext | bool = True,
        shared_turns: SharedTurns | None = None,
    ) -> None:
        self.settings = settings
        self._book = AddressBook(resolver or system_resolver, settings.allow_networks)
        self._verify = verify
        self._session: aiohttp.ClientSession | None = None  # created on the fetch loop at first use
        self._respect_robots = respect_robots
        self.budget = budget or RunBudget(max_requests=settings.run_max_requests, max_bytes=settings.run_max_bytes,
                                          max_seconds=settings.run_max_seconds)
        self._hosts = hosts if hosts is not None else HostTable(
            host_politeness, requests_in_flight=settings.fetch_concurrency)
        # Shared by the fetchers of one run in one process, so robots.txt is read once per host per run.
        self._robots: MutableMapping[str, RobotsRules] = {} if robots_cache is None else robots_cache
        self._robots_seen: dict[str, RobotsRules] = {}  # this fetcher's answers, read without the loop's help
        self._robots_locks: dict[str, asyncio.Lock] = {}
        self._in_flight: asyncio.Semaphore | None = None
        # Turns on each host shared with every other process (None: this process's turns suffice).
        self._shared = shared_turns
        self._stop_at: float | None = None  # time.monotonic() after which fetch_many starts nothing new

    @classmethod
    def for_run(cls, settings: Settings, spent: Spent, **kw: object) -> Fetcher:
        """A fetcher that continues a run which already spent ``spent`` of its budget."""
        budget = RunBudget(max_requests=settings.run_max_requests, max_bytes=settings.run_max_bytes,
                           max_seconds=settings.run_max_seconds, spent=spent)
        return cls(settings, budget=budget, **kw)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the connections, on the fetch loop, without waiting for it: a stage's next step (its
        records, the next stage's start) need not wait its turn on a loop busy with other hosts."""
        if self._session is not None:
            session, self._session = self._session, None
            loop.submit(session.close())

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API (synchronous; the work runs on the fetch loop) -----------------------------

    def fetch(self, request: FetchRequest | str) -> FetchResult:
        """Fetch one URL (robots first, redirects followed and re-checked); one outcome, never raises."""
        return loop.run(self._fetch(request))

    async def fetch_async(self, request: FetchRequest) -> FetchResult:
        """:meth:`fetch` for a caller already on the fetch loop (a rendered page's sub-requests)."""
        return await self._fetch(request)

    def fetch_many(self, requests: Iterable[FetchRequest], *, stop_at: float | None = None) -> Iterator[FetchResult]:
        """Fetch concurrently (bounded overall and per host); yield results as they complete.

        With ``stop_at`` (a ``time.monotonic()`` value), a request that could not start by then is
        not made and yields nothing: the caller hands the requests it got no result for to a later
        task. Requests already under way finish.

        Requests go to the fetch loop a few hundred at a time and come back through one queue: a
        future per request, handed between threads, cost as much CPU as a 304 exchange itself.
        """
        self._stop_at = stop_at
        results: SimpleQueue[list[FetchResult | BaseException | None]] = SimpleQueue()
        outstanding = 0
        for chunk in _chunks(requests, FETCH_CHUNK):
            loop.submit(self._fetch_into(chunk, results))
            outstanding += len(chunk)
            while outstanding > FETCH_CHUNK:  # at most two chunks ahead of the caller
                taken = results.get()
                outstanding -= len(taken)
                yield from _results(taken)
        while outstanding:
            taken = results.get()
            outstanding -= len(taken)
            yield from _results(taken)

    def robots(self, url: str) -> RobotsRules:
        """The robots decision for the URL's origin, read once per Fetcher before any page there."""
        return loop.run(self._robots_for(url))

    def prefetch_robots(self, url: str) -> None:
        """Start reading the origin's robots.txt now without waiting for it: the first :meth:`robots` or
        fetch there takes this answer (or waits for it), so a stage's other work overlaps the request."""
        loop.submit(self._robots_for(url))

    # -- robots, redirects --------------------------------------------------------------------

    async def _fetch(self, request: FetchRequest | str, *, bounded: bool = False) -> FetchResult:
        if isinstance(request, str):
            request = FetchRequest(request)
        try:
            url = fetchable(request.url)  # as the site spells it; the canonical URL is only identity
        except InvalidInput as exc:
            return FetchResult(request.url, FetchOutcome.UNAVAILABLE, f"refused-url: {exc}", key=request.key,
                               url_refused=True)
        if not bounded:
            return await self._follow(request, url, check_robots=self._respect_robots, max_bytes=None)
        if self._in_flight is None:
            self._in_flight = asyncio.Semaphore(self.settings.fetch_concurrency)
        async with self._in_flight:
            return await self._follow(request, url, check_robots=self._respect_robots, max_bytes=None)

    async def _fetch_into(self, chunk: list[FetchRequest],
                          results: SimpleQueue[list[FetchResult | BaseException | None]]) -> None:
        # Results finished in one turn of the loop go to the caller together: a put per result woke the
        # waiting thread once per response, and that hand-over cost as much CPU as the response itself.
        ready: list[FetchResult | BaseException | None] = []

        def hand_over() -> None:
            results.put(list(ready))
            ready.clear()

        def done(item: FetchResult | BaseException | None) -> None:
            if not ready:
                asyncio.get_running_loop().call_soon(hand_over)
            ready.append(item)

        async def one(request: FetchRequest) -> None:
            try:
                done(await self._fetch(request, bounded=True))
            except Deferred:
                done(None)
            except BaseException as exc:  # _fetch returns an outcome for every URL; anything else reaches the caller
                done(exc)

        await asyncio.gather(*(one(request) for request in chunk))

    async def _robots_for(self, url: str) -> RobotsRules:
        parts = urlsplit(url)
        origin = f"{parts.scheme.lower()}://{parts.netloc.lower()}"
        rules = self._robots_seen.get(origin)
        if rules is None:
            lock = self._robots_locks.setdefault(origin, asyncio.Lock())
            async with lock:
                rules = self._robots_seen.get(origin)
                if rules is None:
                    rules = await self._remembered_or_loaded(origin)
                    if not rules.exhausted:
                        self._robots_seen[origin] = rules
        if rules.crawl_delay:
            host = await self._host(parts.hostname or "")
            host.crawl_delay = max(host.crawl_delay, rules.crawl_delay)
        return rules

    async def _remembered_or_loaded(self, origin: str) -> RobotsRules:
        # The run's cache may be a database table (another process of the run may have read it): off the loop.
        rules = await loop.in_thread(self._robots.get, origin)
        if rules is not None:
            return rules
        rules = await self._load_robots(origin)
        if rules.exhausted:  # a spent budget is not the site's answer: never cached
            return rules
        await loop.in_thread(self._robots.__setitem__, origin, rules)
        return await loop.in_thread(self._robots.get, origin) or rules  # a racing process's answer wins

    async def _load_robots(self, origin: str) -> RobotsRules:
        url = origin + "/robots.txt"
        result = await self._follow(FetchRequest(url, accept=(ContentKind.ANY,)), url, check_robots=False,
                                    max_bytes=self.settings.robots_max_bytes, robots=True)
        return robots_rules_from(result)

    async def _robots_verdict(self, request: FetchRequest, url: str, hop: int) -> FetchResult | None:
        rules = await self._robots_for(url)
        via = f" (redirect target {url})" if hop else ""
        if rules.exhausted:
            return FetchResult(request.url, FetchOutcome.EXHAUSTED, rules.reason, final_url=url, key=request.key)
        if rules.state is RobotsState.UNKNOWN:
            return FetchResult(request.url, FetchOutcome.ROBOTS_UNKNOWN, rules.reason + via, final_url=url,
                               key=request.key)
        if not rules.allows(url):
            return FetchResult(request.url, FetchOutcome.ROBOTS_DENIED, "disallowed by robots.txt" + via,
                               final_url=url, key=request.key)
        return None

    async def _follow(self, request: FetchRequest, url: str, *, check_robots: bool, max_bytes: int | None,
                      robots: bool = False) -> FetchResult:
        started = time.monotonic()
        current = url
        seen = {url}
        hops: list[int] = []
        for hop in range(self.settings.max_redirects + 1):
            admitted = await self._admit(request, current, hop)
            if isinstance(admitted, FetchResult):
                return _elapsed(admitted, started)
            if check_robots:
                verdict = await self._robots_verdict(request, current, hop)
                if verdict is not None:
                    return _elapsed(verdict, started)
            result = await self._exchange(request, admitted, max_bytes=max_bytes, robots=robots)
            if result.status not in REDIRECTS or result.outcome is not FetchOutcome.REDIRECT_REFUSED:
                return _elapsed(replace(result, redirects=tuple(hops)) if hops else result, started)
            location = result.headers.get("location", "").strip()
            if not location:
                return _elapsed(_with(result, FetchOutcome.UNAVAILABLE, f"HTTP {result.status} without Location"),
                                started)
            # Follow the Location as the site spells it (a trailing slash matters to the server).
            target = absolutize(current, location)
            try:
                if target is None:
                    raise InvalidInput(f"unusable Location {location[:200]!r}")
                check_url(target)
            except (InvalidInput, UrlRefused) as exc:
                return _elapsed(_with(result, FetchOutcome.REDIRECT_REFUSED, f"redirect to a refused URL: {exc}"),
                                started)
            if target in seen:
                return _elapsed(_with(result, FetchOutcome.REDIRECT_REFUSED, f"redirect loop at {target}"), started)
            seen.add(target)
            hops.append(result.status or 0)
            current = target
        return _elapsed(FetchResult(request.url, FetchOutcome.REDIRECT_REFUSED,
                                    f"more than {self.settings.max_redirects} redirects", final_url=current,
                                    key=request.key), started)


def _chunks(requests: Iterable[FetchRequest], size: int) -> Iterator[list[FetchRequest]]:
    it = iter(requests)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _results(items: list[FetchResult | BaseException | None]) -> Iterator[FetchResult]:
    """The results handed over together (None: a request deferred past the stop time), raising what failed."""
    for item in items:
        if isinstance(item, BaseException):
            raise item
        if item is not None:
            yield item


def _elapsed(result: FetchResult, started: float) -> FetchResult:
    return replace(result, elapsed_ms=int((time.monotonic() - started) * 1000))
