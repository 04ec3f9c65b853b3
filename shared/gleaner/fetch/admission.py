"""Whether and when one hop of a fetch is asked: the address policy, the host's turn, the budget, backoff.

Split from :mod:`gleaner.fetch.fetcher`, which orders a request's steps (robots.txt first, redirects
followed); :class:`HopAdmission` is the part of the :class:`~gleaner.fetch.fetcher.Fetcher` that admits
one hop's URL (public address, pinned once), waits its host's delay and shared turn (or defers it past
the fetcher's stop time), claims the run's budget, sends it through :mod:`gleaner.fetch.exchange` and
retries a 429/503 within ``max_retries`` and ``max_retry_after``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from dataclasses import replace

import aiohttp

from gleaner.errors import RetryableError
from gleaner.fetch import loop
from gleaner.fetch.addresses import AddressBook, AddressRefused, CheckedUrl, UrlRefused, check_url
from gleaner.fetch.body import ACCEPT_ENCODING
from gleaner.fetch.budget import RunBudget
from gleaner.fetch.exchange import exchange
from gleaner.fetch.judgement import BACKOFF, retry_after
from gleaner.fetch.politeness import HostState, HostTable, SharedTurns, Turn, asked_of
from gleaner.fetch.transport import open_session
from gleaner.fetch.types import FetchOutcome, FetchRequest, FetchResult
from gleaner.settings.config import Settings

log = logging.getLogger(__name__)


# A shared turn is leased for the request's own deadline plus this much (then a dead holder's turn frees).
LEASE_MARGIN_SECONDS = 10.0


class Deferred(Exception):
    """The request could not start before the fetcher's stop time: it is left for a later task."""


class HopAdmission:
    """One hop's admission and exchange; the state it reads is set up by :class:`~gleaner.fetch.fetcher.Fetcher`."""

    settings: Settings
    budget: RunBudget
    _book: AddressBook
    _verify: ssl.SSLContext | bool
    _session: aiohttp.ClientSession | None
    _hosts: HostTable
    _shared: SharedTurns | None
    _stop_at: float | None

    async def _host(self, hostname: str) -> HostState:
        state, s = self._hosts.peek(hostname), self.settings  # unseen, or set for another run's politeness
        if state is None or state.asked != asked_of(s.host_delay, s.host_concurrency, s.politeness_sources):
            state = await loop.in_thread(lambda: self._hosts.get(hostname, default_delay=s.host_delay,
                                                                 default_concurrency=s.host_concurrency,
                                                                 sources=s.politeness_sources))
        return state

    async def _admit(self, request: FetchRequest, url: str, hop: int) -> CheckedUrl | FetchResult:
        """The address policy for one hop: the checked URL if it may be requested, else the refusal.

        Checked before robots.txt, so a host the policy refuses gets no request at all.
        """
        via = f" (redirect target {url})" if hop else ""
        try:
            checked = check_url(url)
            if not self._book.pinned(checked.host, checked.port):  # resolving blocks: off the loop
                await loop.in_thread(self._book.pin, checked.host, checked.port)
        except UrlRefused as exc:
            return FetchResult(request.url, FetchOutcome.UNAVAILABLE, f"refused-url: {exc}{via}", final_url=url,
                               key=request.key, url_refused=True)
        except AddressRefused as exc:
            return FetchResult(request.url, FetchOutcome.UNAVAILABLE, f"{exc}{via}", final_url=url, key=request.key,
                               non_public_address=exc.non_public)
        return checked

    async def _exchange(self, request: FetchRequest, target: CheckedUrl, *, max_bytes: int | None,
                        robots: bool) -> FetchResult:
        def done(outcome: FetchOutcome, reason: str) -> FetchResult:
            return FetchResult(request.url, outcome, reason, final_url=target.text, key=request.key)

        host = await self._host(target.host)
        retries = 0
        while True:
            async with host.slots:
                run_deadline = self.budget.deadline
                # One start per delay on a host, whatever its concurrency: each slot holder that wakes
                # looks again, since another may have taken the start it waited for.
                while (wait_for := host.next_at - time.monotonic()) > 0:
                    if run_deadline is not None and time.monotonic() + wait_for >= run_deadline:
                        return done(FetchOutcome.EXHAUSTED, f"run time budget of {self.settings.run_max_seconds:g}s "
                                    "would pass while waiting for the host's delay")
                    self._defer_if_past(time.monotonic() + wait_for)
                    await asyncio.sleep(wait_for)
                host.next_at = time.monotonic() + max(host.delay, host.crawl_delay)
                turn = await self._shared_turn(target.host, host)
                if isinstance(turn, str):
                    return done(FetchOutcome.EXHAUSTED, turn)
                spent = self.budget.claim_request()
                if spent is not None:
                    await self._release(turn, 0.0)
                    return done(FetchOutcome.EXHAUSTED, spent)
                result: FetchResult | None = None
                try:
                    async with self._hosts.in_flight:
                        result = await self._send(request, target, max_bytes=max_bytes, robots=robots)
                finally:
                    pause = max(host.delay, host.crawl_delay)
                    if result is not None and result.status in BACKOFF:
                        backoff = retry_after(result.headers.get("retry-after"), default=max(1.0, host.delay))
                        pause = max(pause, min(backoff, self.settings.max_retry_after))
                    host.next_at = max(host.next_at, time.monotonic() + pause)
                    await self._release(turn, pause)
                if result.status not in BACKOFF:
                    return result
                pause = retry_after(result.headers.get("retry-after"), default=max(1.0, host.delay))
                if retries >= self.settings.max_retries or pause > self.settings.max_retry_after:
                    return with_outcome(result, result.outcome, f"{result.reason} after {retries + 1} attempt(s); "
                                 f"Retry-After {pause:g}s")
                retries += 1

    def _defer_if_past(self, start: float) -> None:
        """Give up on a request that would start after the fetcher's stop time (fetch_many's stop_at)."""
        if self._stop_at is not None and start >= self._stop_at:
            raise Deferred

    async def _shared_turn(self, hostname: str, host: HostState) -> Turn | str | None:
        """The host's turn among all processes (None when not shared), or why the run cannot wait for it."""
        if self._shared is None:
            self._defer_if_past(time.monotonic())
            return None
        lease = self.settings.fetch_timeout + LEASE_MARGIN_SECONDS
        while True:
            self._defer_if_past(time.monotonic())
            got = await loop.in_thread(lambda: self._shared.claim(  # type: ignore[union-attr]
                hostname.lower(), concurrency=host.concurrency, spacing=max(host.delay, host.crawl_delay),
                lease=lease))
            if isinstance(got, Turn):
                return got
            run_deadline = self.budget.deadline
            if run_deadline is not None and time.monotonic() + got >= run_deadline:
                return (f"run time budget of {self.settings.run_max_seconds:g}s would pass while waiting for "
                        "the host's turn")
            self._defer_if_past(time.monotonic() + got)
            await asyncio.sleep(got)

    async def _release(self, turn: Turn | None, pause: float) -> None:
        if turn is None or self._shared is None:
            return
        shared = self._shared
        try:
            await loop.in_thread(lambda: shared.release(turn, pause=pause))
        except RetryableError as exc:  # the lease runs out by itself; the result in hand still counts
            log.warning("%s", exc)

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = open_session(self._book, verify=self._verify, user_agent=self.settings.user_agent,
                                         accept_encoding=ACCEPT_ENCODING)
        return self._session

    async def _send(self, request: FetchRequest, target: CheckedUrl, *, max_bytes: int | None,
                    robots: bool) -> FetchResult:
        return await exchange(self._open_session(), self.settings, self.budget, request, target,
                              max_bytes=max_bytes, robots=robots)


def with_outcome(result: FetchResult, outcome: FetchOutcome, reason: str) -> FetchResult:
    return replace(result, outcome=outcome, reason=reason, body=None)
