"""The one component through which every Gleaner request goes.

For each URL, in order: the URL is checked as httpx parses it (http(s) only, no
userinfo, zone id, backslash or control character); robots.txt of its origin is
read first (once per Fetcher, i.e. per run or batch) and obeyed; its host is
resolved once and every address must be public or inside
``GLEANER_ALLOW_NETWORKS``; the transport connects to that checked address and
nothing else; the host's politeness (concurrency, delay, Crawl-delay, 429/503
backoff) and the run's budget are respected; the body is read under wire and
decoded caps and a total deadline. Redirects are followed up to
``max_redirects`` hops, each hop checked again from the start.

Every call returns a :class:`FetchResult` with exactly one
:class:`FetchOutcome`; nothing raises for a URL's failure. Library exceptions
are translated here::

    httpx.TimeoutException   -> unavailable (timeout), or exhausted when the run's deadline cut it
    httpx.HTTPError          -> unavailable (network: ...)
    UrlRefused               -> unavailable (refused-url: ...)
    AddressRefused           -> unavailable (non-public address / cannot resolve)
    BodyRefused              -> refused-size | refused-content | exhausted
"""

from __future__ import annotations

import http.cookiejar
import ssl
import threading
import time
from collections.abc import Iterable, Iterator, MutableMapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import httpx

from gleaner.config import Settings
from gleaner.errors import InvalidInput
from gleaner.fetch.addresses import AddressBook, AddressRefused, Resolver, UrlRefused, check_url, system_resolver
from gleaner.fetch.body import ACCEPT_ENCODING, BodyRefused, coding_of, read_body
from gleaner.fetch.budget import RunBudget, Spent
from gleaner.fetch.politeness import HostPoliteness, HostState, HostTable
from gleaner.fetch.robots import RobotsRules
from gleaner.fetch.transport import PinnedTransport
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest, FetchResult
from gleaner.urls import absolutize, fetchable

__all__ = ["Fetcher", "HostPoliteness", "Resolver", "system_resolver"]


_KIND_TYPES: dict[ContentKind, tuple[str, ...]] = {
    ContentKind.HTML: ("text/html", "application/xhtml+xml"),
    ContentKind.XML: ("application/xml", "text/xml", "application/x-gzip", "application/gzip",
                      "application/octet-stream", "text/plain"),
    ContentKind.FEED: ("application/rss+xml", "application/atom+xml", "application/rdf+xml",
                       "application/xml", "text/xml", "application/feed+json"),
    ContentKind.PDF: ("application/pdf",),
    ContentKind.TEXT: ("text/plain",),
}
_ACCEPT_HEADER: dict[ContentKind, str] = {
    ContentKind.HTML: "text/html,application/xhtml+xml",
    ContentKind.XML: "application/xml,text/xml",
    ContentKind.FEED: "application/rss+xml,application/atom+xml,application/xml",
    ContentKind.PDF: "application/pdf",
    ContentKind.TEXT: "text/plain",
}
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DENIED = frozenset({401, 403, 407, 451})
_BACKOFF = frozenset({429, 503})


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """A cookie policy that stores and returns nothing: Gleaner never sends cookies."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: object) -> bool:
        return False

    def return_ok(self, cookie: http.cookiejar.Cookie, request: object) -> bool:
        return False


class Fetcher:
    """Polite, safe HTTP fetching. One instance per stage of a run: DNS pins and the budget live on it.

    ``transport`` replaces the pinned network transport (tests of pure HTTP behaviour only: the
    address policy still decides, but an injected transport does its own connecting). ``resolver``
    replaces getaddrinfo (tests that need a name to answer something chosen). ``budget`` is the
    run's budget (by default one built from the settings); ``host_politeness`` gives per-host
    overrides of delay and concurrency; ``robots_cache`` is the run's robots decisions by origin
    (shared between the fetchers of one run); ``hosts`` is the process's per-host politeness state
    (shared by every fetcher, so concurrent stages take turns on a host; it carries its own
    ``host_politeness``); ``verify`` is the TLS trust (default: the system's CAs).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        transport: httpx.BaseTransport | None = None,
        resolver: Resolver | None = None,
        respect_robots: bool = True,
        budget: RunBudget | None = None,
        host_politeness: HostPoliteness | None = None,
        robots_cache: MutableMapping[str, RobotsRules] | None = None,
        hosts: HostTable | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.settings = settings
        self._book = AddressBook(resolver or system_resolver, settings.allow_networks)
        self._pinned: PinnedTransport | None = None
        if transport is None:
            self._pinned = PinnedTransport(self._book, verify=verify)
            transport = self._pinned
        self._respect_robots = respect_robots
        self.budget = budget or RunBudget(max_requests=settings.run_max_requests, max_bytes=settings.run_max_bytes,
                                          max_seconds=settings.run_max_seconds)
        self._client = httpx.Client(
            transport=transport,
            follow_redirects=False,
            trust_env=False,  # no proxy (it would defeat pinning), no .netrc credentials
            timeout=httpx.Timeout(settings.fetch_timeout),
            cookies=http.cookiejar.CookieJar(policy=_NoCookies()),
            headers={"User-Agent": settings.user_agent, "Accept-Encoding": ACCEPT_ENCODING},
        )
        self._hosts = hosts if hosts is not None else HostTable(host_politeness)
        # Shared by the fetchers of one run in one process, so robots.txt is read once per host per run.
        self._robots: MutableMapping[str, RobotsRules] = {} if robots_cache is None else robots_cache
        self._robots_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_run(cls, settings: Settings, spent: Spent, **kw: object) -> Fetcher:
        """A fetcher that continues a run which already spent ``spent`` of its budget."""
        budget = RunBudget(max_requests=settings.run_max_requests, max_bytes=settings.run_max_bytes,
                           max_seconds=settings.run_max_seconds, spent=spent)
        return cls(settings, budget=budget, **kw)  # type: ignore[arg-type]

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API ---------------------------------------------------------------------------

    def fetch(self, request: FetchRequest | str) -> FetchResult:
        """Fetch one URL (robots first, redirects followed and re-checked); one outcome, never raises."""
        if isinstance(request, str):
            request = FetchRequest(request)
        try:
            url = fetchable(request.url)  # as the site spells it; the canonical URL is only identity
        except InvalidInput as exc:
            return FetchResult(request.url, FetchOutcome.UNAVAILABLE, f"refused-url: {exc}", key=request.key)
        return self._follow(request, url, check_robots=self._respect_robots, max_bytes=None)

    def fetch_many(self, requests: Iterable[FetchRequest]) -> Iterator[FetchResult]:
        """Fetch concurrently (bounded overall and per host); yield results as they complete."""
        pending: set[Future[FetchResult]] = set()
        with ThreadPoolExecutor(max_workers=self.settings.fetch_concurrency,
                                thread_name_prefix="gleaner-fetch") as pool:
            for request in requests:
                pending.add(pool.submit(self.fetch, request))
                if len(pending) >= self.settings.fetch_concurrency * 4:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield future.result()
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield future.result()

    def robots(self, url: str) -> RobotsRules:
        """The robots decision for the URL's origin, read once per Fetcher before any page there."""
        parts = urlsplit(url)
        origin = f"{parts.scheme.lower()}://{parts.netloc.lower()}"
        with self._lock:
            lock = self._robots_locks.setdefault(origin, threading.Lock())
        with lock:
            rules = self._robots.get(origin)
            if rules is None:
                rules = self._load_robots(origin)
                if not rules.exhausted:  # a spent budget is not the site's answer: never cached
                    self._robots[origin] = rules
        if rules.crawl_delay:
            host = self._host(parts.hostname or "")
            host.crawl_delay = max(host.crawl_delay, rules.crawl_delay)
        return rules

    # -- robots, redirects --------------------------------------------------------------------

    def _load_robots(self, origin: str) -> RobotsRules:
        url = origin + "/robots.txt"
        result = self._follow(FetchRequest(url, accept=(ContentKind.ANY,)), url, check_robots=False,
                              max_bytes=self.settings.robots_max_bytes, robots=True)
        if result.outcome is FetchOutcome.FETCHED:
            return RobotsRules.parse(result.body or b"")
        if result.outcome is FetchOutcome.EXHAUSTED:
            return replace(RobotsRules.unknown(result.reason), exhausted=True)
        status = result.status
        if status is not None and 400 <= status < 500 and status != 429 and result.outcome is not (
                FetchOutcome.REDIRECT_REFUSED):
            return RobotsRules.allow_all(f"robots.txt answered {status}: no rules")
        if result.outcome is FetchOutcome.REFUSED_SIZE:
            return RobotsRules.unknown(f"robots.txt oversized ({result.reason})")
        return RobotsRules.unknown(f"robots.txt unavailable: {result.outcome} {result.reason}".strip())

    def _robots_verdict(self, request: FetchRequest, url: str, hop: int) -> FetchResult | None:
        rules = self.robots(url)
        via = f" (redirect target {url})" if hop else ""
        if rules.exhausted:
            return FetchResult(request.url, FetchOutcome.EXHAUSTED, rules.reason, final_url=url, key=request.key)
        if rules.state == "unknown":
            return FetchResult(request.url, FetchOutcome.ROBOTS_UNKNOWN, rules.reason + via, final_url=url,
                               key=request.key)
        if not rules.allows(url):
            return FetchResult(request.url, FetchOutcome.ROBOTS_DENIED, "disallowed by robots.txt" + via,
                               final_url=url, key=request.key)
        return None

    def _follow(self, request: FetchRequest, url: str, *, check_robots: bool, max_bytes: int | None,
                robots: bool = False) -> FetchResult:
        started = time.monotonic()
        current = url
        seen = {url}
        for hop in range(self.settings.max_redirects + 1):
            refused = self._admit(request, current, hop)
            if refused is not None:
                return _elapsed(refused, started)
            if check_robots:
                verdict = self._robots_verdict(request, current, hop)
                if verdict is not None:
                    return _elapsed(verdict, started)
            result = self._exchange(request, current, max_bytes=max_bytes, robots=robots)
            if result.status not in _REDIRECTS or result.outcome is not FetchOutcome.REDIRECT_REFUSED:
                return _elapsed(result, started)
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
            current = target
        return _elapsed(FetchResult(request.url, FetchOutcome.REDIRECT_REFUSED,
                                    f"more than {self.settings.max_redirects} redirects", final_url=current,
                                    key=request.key), started)

    # -- one exchange: address policy, politeness, budget, backoff ------------------------------

    def _host(self, hostname: str) -> HostState:
        return self._hosts.get(hostname, default_delay=self.settings.host_delay,
                               default_concurrency=self.settings.host_concurrency)

    def _admit(self, request: FetchRequest, url: str, hop: int) -> FetchResult | None:
        """The address policy for one hop: None if the URL may be requested, else the refusal.

        Checked before robots.txt, so a host the policy refuses gets no request at all.
        """
        via = f" (redirect target {url})" if hop else ""
        try:
            parsed = check_url(url)
            self._book.pin(parsed.raw_host.decode("ascii"), parsed.port or (443 if parsed.scheme == "https" else 80))
        except UrlRefused as exc:
            return FetchResult(request.url, FetchOutcome.UNAVAILABLE, f"refused-url: {exc}{via}", final_url=url,
                               key=request.key)
        except AddressRefused as exc:
            return FetchResult(request.url, FetchOutcome.UNAVAILABLE, f"{exc}{via}", final_url=url, key=request.key)
        return None

    def _exchange(self, request: FetchRequest, url: str, *, max_bytes: int | None, robots: bool) -> FetchResult:
        def done(outcome: FetchOutcome, reason: str) -> FetchResult:
            return FetchResult(request.url, outcome, reason, final_url=url, key=request.key)

        host = self._host(check_url(url).raw_host.decode("ascii"))  # admitted by _admit just before
        retries = 0
        while True:
            with host.slots:
                wait_for = host.next_at - time.monotonic()
                run_deadline = self.budget.deadline
                if wait_for > 0:
                    if run_deadline is not None and time.monotonic() + wait_for >= run_deadline:
                        return done(FetchOutcome.EXHAUSTED, f"run time budget of {self.settings.run_max_seconds:g}s "
                                    "would pass while waiting for the host's delay")
                    time.sleep(wait_for)
                spent = self.budget.claim_request()
                if spent is not None:
                    return done(FetchOutcome.EXHAUSTED, spent)
                try:
                    result = self._send(request, url, max_bytes=max_bytes, robots=robots)
                finally:
                    host.next_at = time.monotonic() + max(host.delay, host.crawl_delay)
                if result.status not in _BACKOFF:
                    return result
                pause = _retry_after(result.headers.get("retry-after"), default=max(1.0, host.delay))
                host.next_at = max(host.next_at, time.monotonic() + min(pause, self.settings.max_retry_after))
                if retries >= self.settings.max_retries or pause > self.settings.max_retry_after:
                    return _with(result, result.outcome, f"{result.reason} after {retries + 1} attempt(s); "
                                 f"Retry-After {pause:g}s")
                retries += 1

    def _send(self, request: FetchRequest, url: str, *, max_bytes: int | None, robots: bool) -> FetchResult:
        started = time.monotonic()
        fetch_deadline = started + self.settings.fetch_timeout
        run_deadline = self.budget.deadline
        deadline = min(fetch_deadline, run_deadline) if run_deadline is not None else fetch_deadline
        run_cut = run_deadline is not None and run_deadline <= fetch_deadline
        headers = {"Accept": "*/*" if robots else _accept(request.accept)}
        if request.etag:
            headers["If-None-Match"] = request.etag
        if request.last_modified:
            headers["If-Modified-Since"] = request.last_modified
        meta: dict[str, object] = {"final_url": url, "key": request.key}

        def done(outcome: FetchOutcome, reason: str, **kw: object) -> FetchResult:
            values = {**meta, **kw, "elapsed_ms": int((time.monotonic() - started) * 1000)}
            return FetchResult(request.url, outcome, reason, **values)  # type: ignore[arg-type]

        def timed_out(where: str) -> FetchResult:
            if run_cut and time.monotonic() >= deadline - 0.01:
                return done(FetchOutcome.EXHAUSTED, f"run time budget of {self.settings.run_max_seconds:g}s spent "
                                                    f"{where}")
            return done(FetchOutcome.UNAVAILABLE, f"timeout {where} (limit {self.settings.fetch_timeout:g}s)")

        with self._deadline(deadline):
            try:
                req = self._client.build_request("GET", url, headers=headers)
                req.headers.pop("Cookie", None)
                response = self._client.send(req, stream=True)
            except httpx.TimeoutException:
                return timed_out("before the response")
            except httpx.HTTPError as exc:
                return done(FetchOutcome.UNAVAILABLE, f"network: {exc.__class__.__name__}: {exc}")
            try:
                meta.update(status=response.status_code, headers={k.lower(): v for k, v in response.headers.items()},
                            etag=response.headers.get("etag"), last_modified=response.headers.get("last-modified"))
                outcome = self._judge(request, response, robots)
                if outcome is not None:
                    return done(*outcome)
                limit = max_bytes or self.settings.max_body_bytes
                declared = response.headers.get("content-length", "")
                if declared.strip().isdigit() and int(declared) > limit:
                    return done(FetchOutcome.REFUSED_SIZE, f"Content-Length {declared.strip()} exceeds {limit} bytes")
                content_type, charset = _parse_content_type(response.headers.get("content-type", ""))
                kind = ContentKind.ANY if robots else _kind_of(content_type, url, request.accept)
                sniff = kind is None and content_type is None and ContentKind.HTML in request.accept
                if kind is None and not sniff:
                    return done(FetchOutcome.REFUSED_CONTENT, f"content type {content_type or 'missing'!r} "
                                f"not accepted (wanted {', '.join(request.accept)})", content_type=content_type)
                coding = coding_of(response.headers.get("content-encoding"))
                body, wire = read_body(response.iter_raw(), coding=coding, max_wire=limit,
                                       max_decoded=limit if robots else self.settings.max_decompressed_bytes,
                                       on_wire=self._charge_bytes)
            except BodyRefused as exc:
                outcome_for = {"size": FetchOutcome.REFUSED_SIZE, "content": FetchOutcome.REFUSED_CONTENT,
                               "budget": FetchOutcome.EXHAUSTED}
                return done(outcome_for[exc.kind], exc.reason)
            except httpx.TimeoutException:
                return timed_out("while reading the body")
            except httpx.HTTPError as exc:
                return done(FetchOutcome.UNAVAILABLE, f"network: error while reading the body: {exc}")
            finally:
                response.close()
        if sniff:
            if not _looks_like_html(body):
                return done(FetchOutcome.REFUSED_CONTENT, "content type missing and the body is not HTML")
            kind, content_type = ContentKind.HTML, "text/html"
        return done(FetchOutcome.FETCHED, "", content_type=content_type, charset=charset, kind=kind, body=body,
                    wire_bytes=wire)

    def _judge(self, request: FetchRequest, response: httpx.Response, robots: bool) -> tuple[FetchOutcome, str] | None:
        """The outcome a status alone decides, or None when the body should be read."""
        status = response.status_code
        if status in _REDIRECTS:
            return FetchOutcome.REDIRECT_REFUSED, f"HTTP {status} redirect"  # _follow decides what happens next
        if status == 304:
            if request.etag or request.last_modified:
                return FetchOutcome.NOT_MODIFIED, "304 not modified"
            return FetchOutcome.UNAVAILABLE, "unexpected 304 to an unconditional request"
        if robots:
            return None if 200 <= status < 300 else (FetchOutcome.UNAVAILABLE, f"HTTP {status}")
        if status in _DENIED:
            return FetchOutcome.DENIED, f"HTTP {status}"
        if status not in (200, 203):
            return FetchOutcome.UNAVAILABLE, f"HTTP {status}"
        return None

    def _charge_bytes(self, count: int) -> None:
        reason = self.budget.add_bytes(count)
        if reason is not None:
            raise BodyRefused("budget", reason)

    def _deadline(self, at: float) -> AbstractContextManager[None]:
        if self._pinned is not None:
            return self._pinned.deadline(at)
        return nullcontext()  # an injected transport: the deadline is checked between chunks only


def _elapsed(result: FetchResult, started: float) -> FetchResult:
    return replace(result, elapsed_ms=int((time.monotonic() - started) * 1000))


def _with(result: FetchResult, outcome: FetchOutcome, reason: str) -> FetchResult:
    return replace(result, outcome=outcome, reason=reason, body=None)


def _retry_after(value: str | None, *, default: float) -> float:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return default
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default
    return max(0.0, when.timestamp() - time.time())


def _accept(kinds: tuple[ContentKind, ...]) -> str:
    values = [_ACCEPT_HEADER[k] for k in kinds if k in _ACCEPT_HEADER]
    return ",".join(values) + ";q=1.0,*/*;q=0.1" if values else "*/*"


def _looks_like_html(body: bytes) -> bool:
    head = body[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"\xef\xbb\xbf<!doctype html", b"\xef\xbb\xbf<html"))


def _parse_content_type(value: str) -> tuple[str | None, str | None]:
    if not value:
        return None, None
    parts = [p.strip() for p in value.split(";")]
    charset = None
    for p in parts[1:]:
        name, _, val = p.partition("=")
        if name.strip().lower() == "charset":
            charset = val.strip().strip('"\'') or None
    return parts[0].lower() or None, charset


def _kind_of(content_type: str | None, url: str, accept: tuple[ContentKind, ...]) -> ContentKind | None:
    if ContentKind.ANY in accept:
        return ContentKind.ANY
    path = urlsplit(url).path.lower()
    for kind in accept:
        if content_type and content_type in _KIND_TYPES.get(kind, ()):
            return kind
        if content_type is None and kind is ContentKind.XML and path.endswith((".xml", ".xml.gz", ".gz")):
            return kind
    return None
