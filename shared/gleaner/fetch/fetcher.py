"""The one component through which every Gleaner request goes.

It resolves each host once, refuses non-public addresses (unless allowed by
``GLEANER_ALLOW_NETWORKS``), connects to the address it checked, follows a
bounded number of redirects re-checking each hop, reads robots.txt before any
page of a host, enforces per-host politeness, and refuses (never truncates)
oversized bodies. Every call returns a :class:`FetchResult` with one outcome.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from urllib.parse import urldefrag, urlsplit, urlunsplit

import httpx

from gleaner.config import Settings
from gleaner.errors import InvalidInput
from gleaner.fetch.addresses import IPAddress, is_allowed, parse_address
from gleaner.fetch.robots import RobotsRules
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest, FetchResult
from gleaner.urls import absolutize, canonicalize

Resolver = Callable[[str, int], list[str]]

_KIND_TYPES: dict[ContentKind, tuple[str, ...]] = {
    ContentKind.HTML: ("text/html", "application/xhtml+xml"),
    ContentKind.XML: ("application/xml", "text/xml", "application/x-gzip", "application/gzip",
                      "application/octet-stream", "text/plain"),
    ContentKind.FEED: ("application/rss+xml", "application/atom+xml", "application/rdf+xml",
                       "application/xml", "text/xml", "application/feed+json"),
    ContentKind.PDF: ("application/pdf",),
    ContentKind.TEXT: ("text/plain",),
}
_DENIED = {401, 403, 407, 451}


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(slots=True)
class _HostState:
    lock: threading.Semaphore
    next_at: float = 0.0
    robots: RobotsRules | None = None
    robots_lock: threading.Lock | None = None


class Fetcher:
    """Polite, safe HTTP fetching. One instance per run: robots and host state live on it."""

    def __init__(
        self,
        settings: Settings,
        *,
        transport: httpx.BaseTransport | None = None,
        resolver: Resolver | None = None,
        respect_robots: bool = True,
    ) -> None:
        self.settings = settings
        self._resolver = resolver or system_resolver
        self._respect_robots = respect_robots
        self._client = httpx.Client(
            transport=transport or httpx.HTTPTransport(retries=0),
            follow_redirects=False,
            trust_env=False,  # a proxy from the environment would defeat address pinning
            timeout=httpx.Timeout(settings.fetch_timeout),
            headers={"User-Agent": settings.user_agent, "Accept-Encoding": "gzip, deflate, br"},
        )
        self._hosts: dict[str, _HostState] = {}
        self._hosts_lock = threading.Lock()
        self._requests = 0
        self._bytes = 0
        self._started = time.monotonic()
        self._budget_lock = threading.Lock()

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API ---------------------------------------------------------------------------

    def fetch(self, request: FetchRequest | str) -> FetchResult:
        if isinstance(request, str):
            request = FetchRequest(request)
        try:
            canonicalize(request.url)  # validation only: fetch the URL as the site spells it
            url = urldefrag(request.url.strip())[0]
        except InvalidInput as exc:
            return FetchResult(request.url, FetchOutcome.UNAVAILABLE, f"invalid URL: {exc}", key=request.key)
        if self._respect_robots:
            rules = self.robots(url)
            if rules.state == "unknown":
                return FetchResult(request.url, FetchOutcome.ROBOTS_UNKNOWN, rules.reason, key=request.key)
            if not rules.allows(url):
                return FetchResult(request.url, FetchOutcome.ROBOTS_DENIED, "disallowed by robots.txt",
                                   key=request.key)
        return self._fetch_following(request, url)

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
            for future in list(pending):
                yield future.result()

    def robots(self, url: str) -> RobotsRules:
        """The robots decision for the URL's host, fetched once per Fetcher (= per run)."""
        parts = urlsplit(url)
        state = self._host(parts.netloc)
        assert state.robots_lock is not None
        with state.robots_lock:
            if state.robots is None:
                state.robots = self._load_robots(urlunsplit((parts.scheme, parts.netloc, "/robots.txt", "", "")))
            return state.robots

    # -- internals ----------------------------------------------------------------------------

    def _host(self, netloc: str) -> _HostState:
        with self._hosts_lock:
            state = self._hosts.get(netloc)
            if state is None:
                state = _HostState(lock=threading.Semaphore(self.settings.host_concurrency),
                                   robots_lock=threading.Lock())
                self._hosts[netloc] = state
            return state

    def _load_robots(self, robots_url: str) -> RobotsRules:
        result = self._fetch_following(FetchRequest(robots_url, accept=(ContentKind.ANY,)), robots_url,
                                       max_bytes=512 * 1024)
        if result.outcome is FetchOutcome.FETCHED:
            return RobotsRules.parse(result.body or b"")
        if result.status is not None and 400 <= result.status < 500:
            return RobotsRules.allow_all(f"robots.txt answered {result.status}")
        return RobotsRules.unknown(f"robots.txt unavailable: {result.reason}")

    def _budget_exhausted(self) -> str | None:
        s = self.settings
        with self._budget_lock:
            if s.run_max_requests and self._requests >= s.run_max_requests:
                return f"run request budget of {s.run_max_requests} spent"
            if s.run_max_bytes and self._bytes >= s.run_max_bytes:
                return f"run byte budget of {s.run_max_bytes} spent"
            if s.run_max_seconds and time.monotonic() - self._started >= s.run_max_seconds:
                return f"run time budget of {s.run_max_seconds}s spent"
            self._requests += 1
        return None

    def _pin(self, url: str) -> tuple[str, str, IPAddress] | str:
        """Resolve once, check every address, return (pinned URL, host header, address) or a reason."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        literal = parse_address(host)
        try:
            addresses = [host] if literal is not None else self._resolver(host, port)
        except (OSError, UnicodeError) as exc:
            return f"cannot resolve {host}: {exc}"
        checked: list[IPAddress] = []
        for text in addresses:
            address = parse_address(text)
            if address is None:
                return f"resolver returned a non-address {text!r}"
            if not is_allowed(address, self.settings.allow_networks):
                return f"{host} resolves to non-public address {address}"
            checked.append(address)
        if not checked:
            return f"{host} has no addresses"
        chosen = checked[0]
        ip_host = f"[{chosen}]" if chosen.version == 6 else str(chosen)
        netloc = ip_host if parts.port is None else f"{ip_host}:{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")), parts.netloc, chosen

    def _fetch_following(self, request: FetchRequest, url: str, max_bytes: int | None = None) -> FetchResult:
        started = time.monotonic()
        current = url
        seen: set[str] = set()
        for _hop in range(self.settings.max_redirects + 1):
            seen.add(current)
            result = self._fetch_once(request, current, max_bytes, started)
            if result.status is None or result.status not in (301, 302, 303, 307, 308):
                return result
            location = result.headers.get("location")
            if not location:
                return _with(result, FetchOutcome.UNAVAILABLE, f"redirect {result.status} without Location")
            target = absolutize(current, location)
            if target is None:
                return _with(result, FetchOutcome.REDIRECT_REFUSED, f"redirect to an unusable URL {location[:200]!r}")
            if target in seen:
                return _with(result, FetchOutcome.REDIRECT_REFUSED, f"redirect loop at {target}")
            if self._respect_robots and urlsplit(target).path != "/robots.txt":
                rules = self.robots(target)
                if not rules.allows(target):
                    outcome = FetchOutcome.ROBOTS_UNKNOWN if rules.state == "unknown" else FetchOutcome.ROBOTS_DENIED
                    return _with(result, outcome, f"redirect target {target} refused by robots.txt")
            current = target
        return FetchResult(request.url, FetchOutcome.REDIRECT_REFUSED,
                           f"more than {self.settings.max_redirects} redirects", key=request.key,
                           elapsed_ms=int((time.monotonic() - started) * 1000))

    def _fetch_once(self, request: FetchRequest, url: str, max_bytes: int | None, started: float) -> FetchResult:
        limit = max_bytes or self.settings.max_body_bytes

        def done(outcome: FetchOutcome, reason: str, **kw: object) -> FetchResult:
            return FetchResult(request.url, outcome, reason, final_url=url, key=request.key,
                               elapsed_ms=int((time.monotonic() - started) * 1000), **kw)  # type: ignore[arg-type]

        exhausted = self._budget_exhausted()
        if exhausted:
            return done(FetchOutcome.EXHAUSTED, exhausted)
        pinned = self._pin(url)
        if isinstance(pinned, str):
            return done(FetchOutcome.UNAVAILABLE, pinned)
        pinned_url, host_header, _address = pinned
        headers = {"Host": host_header}
        if request.etag:
            headers["If-None-Match"] = request.etag
        if request.last_modified:
            headers["If-Modified-Since"] = request.last_modified
        host = self._host(urlsplit(url).netloc)
        delay = self.settings.host_delay
        if host.robots is not None and host.robots.crawl_delay:
            delay = max(delay, host.robots.crawl_delay)
        with host.lock:
            wait_for = host.next_at - time.monotonic()
            if wait_for > 0:
                time.sleep(wait_for)
            try:
                extensions = {"sni_hostname": urlsplit(url).hostname or ""}
                req = self._client.build_request("GET", pinned_url, headers=headers, extensions=extensions)
                response = self._client.send(req, stream=True)
            except httpx.TimeoutException as exc:
                host.next_at = time.monotonic() + delay
                return done(FetchOutcome.UNAVAILABLE, f"timeout: {exc.__class__.__name__}")
            except httpx.HTTPError as exc:
                host.next_at = time.monotonic() + delay
                return done(FetchOutcome.UNAVAILABLE, f"network error: {exc}")
            try:
                return self._read(request, url, response, limit, done)
            finally:
                response.close()
                host.next_at = time.monotonic() + delay

    def _read(self, request: FetchRequest, url: str, response: httpx.Response, limit: int,
              done: Callable[..., FetchResult]) -> FetchResult:
        status = response.status_code
        headers = {k.lower(): v for k, v in response.headers.items()}
        meta = dict(status=status, headers=headers, etag=headers.get("etag"),
                    last_modified=headers.get("last-modified"))
        if status in (301, 302, 303, 307, 308):
            return done(FetchOutcome.UNAVAILABLE, f"redirect {status}", **meta)
        if status == 304:
            return done(FetchOutcome.NOT_MODIFIED, "304 not modified", **meta)
        if status in _DENIED:
            return done(FetchOutcome.DENIED, f"HTTP {status}", **meta)
        if status != 200:
            return done(FetchOutcome.UNAVAILABLE, f"HTTP {status}", **meta)
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            return done(FetchOutcome.REFUSED_SIZE, f"Content-Length {declared} exceeds {limit} bytes", **meta)
        content_type, charset = _parse_content_type(headers.get("content-type", ""))
        kind = _kind_of(content_type, url, request.accept)
        if kind is None:
            return done(FetchOutcome.REFUSED_CONTENT, f"content type {content_type or 'missing'!r} not accepted",
                        content_type=content_type, **meta)
        chunks: list[bytes] = []
        total = 0
        try:
            for chunk in response.iter_bytes():
                total += len(chunk)
                if total > limit:
                    return done(FetchOutcome.REFUSED_SIZE, f"body exceeds {limit} bytes", **meta)
                chunks.append(chunk)
        except httpx.TimeoutException:
            return done(FetchOutcome.UNAVAILABLE, "timeout while reading the body", **meta)
        except httpx.HTTPError as exc:
            return done(FetchOutcome.UNAVAILABLE, f"error while reading the body: {exc}", **meta)
        body = b"".join(chunks)
        with self._budget_lock:
            self._bytes += len(body)
        return done(FetchOutcome.FETCHED, "", content_type=content_type, charset=charset, kind=kind, body=body,
                    **meta)


def _with(result: FetchResult, outcome: FetchOutcome, reason: str) -> FetchResult:
    return FetchResult(result.url, outcome, reason, final_url=result.final_url, status=result.status,
                       headers=result.headers, elapsed_ms=result.elapsed_ms, key=result.key)


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
        if content_type is None:
            if kind is ContentKind.XML and path.endswith((".xml", ".xml.gz", ".gz")):
                return kind
            if kind is ContentKind.HTML and path.endswith((".html", ".htm", "/")):
                return kind
    return None
