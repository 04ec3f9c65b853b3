"""Map's discovery of a site's URLs: what the map stage reads, in order, and what it found.

robots.txt first (a site it cannot read is not crawled), then the feeds named in the request, the
sitemaps (robots.txt's Sitemap lines and /sitemap.xml: indexes, nested, gzipped), the breadth-first
walk of the start page's same-host links (bounded by limit, max depth, the include globs and the map's
soft deadline; pages chained by rel next / prev stay at their referrer's depth), and last the feeds
the walked pages announce. :func:`discover` returns a
:class:`Discovery`; the stage's entry (gleaner/stages/map.py) records it and opens the run.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import chain

from gleaner.discover.feeds import parse_feed
from gleaner.discover.links import MAX_LINKS_PER_PAGE, PageLinks, extract_links
from gleaner.discover.sitemaps import SitemapStream
from gleaner.errors import InvalidInput
from gleaner.fetch.fetcher import Fetcher
from gleaner.fetch.robots import RobotsState
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest, FetchResult
from gleaner.render.discovery import ReadLinks, merged
from gleaner.stages.walkkeep import MapFailed, WalkKeeper
from gleaner.store.ledger.fetchonce import PAGE_KINDS
from gleaner.store.ledger.prefetch import KnownLinks
from gleaner.urls import canonicalize, host_of, origin_of, path_allowed, path_of

# A sitemap index may nest; real sites rarely go past two levels, hostile ones go on forever.
MAX_SITEMAP_DEPTH = 3
MAX_SITEMAPS = 200
# Feeds read per run: the named ones plus those pages announce (a site announces a handful).
MAX_FEEDS = 50
# URLs past the limit that are still counted (to tell the operator how many were left), and how far
# one sitemap is read on once the run is full: enough to say "at least this many", bounded in memory.
MAX_BEYOND_COUNTED = 100_000
SITEMAP_READ_PAST_LIMIT = 10_000


@dataclass
class Discovery:
    """URLs found so far, in discovery order: canonical url -> (depth, via, url as the site spells it)."""

    limit: int
    include: tuple[str, ...]
    host: str
    urls: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # Feeds announced by walked pages: canonical url -> url as the page spells it, in discovery order.
    feeds: dict[str, str] = field(default_factory=dict)
    # URLs found once the limit was reached (counted, never mapped): the run ends partial and says so.
    beyond: set[str] = field(default_factory=set)
    # Sitemap <lastmod> of the URLs a sitemap listed: canonical url -> the text as written.
    lastmod: dict[str, str] = field(default_factory=dict)
    # Why the start page could not be read, if it could not: with nothing else found, the run fails on it.
    start_failure: str | None = None
    # Told the count after each URL found (progress while a polite map walks a large site).
    on_found: Callable[[int], None] | None = None
    # time.monotonic() after which the walk starts no new level (the map's soft deadline), and whether
    # it stopped there: then the map is incomplete (nothing is declared gone for not being found).
    stop_at: float | None = None
    cut_short: bool = False

    def out_of_time(self) -> bool:
        if self.stop_at is None or time.monotonic() < self.stop_at:
            return False
        if not self.cut_short:
            self.cut_short = True
            self.problems.append("the walk stopped at the map's soft deadline (GLEANER_MAP_SOFT_DEADLINE) with"
                                 f" {len(self.urls)} URLs found; the next run walks again")
        return True

    def add(self, source_url: str, depth: int, via: str, canonical: str | None = None) -> bool:
        """Add a URL (absolute, as found; ``canonical`` if the caller has it already); False if invalid,
        off-host, filtered, known or over the limit (then it is counted in ``beyond``)."""
        try:
            url = canonical or canonicalize(source_url)
        except InvalidInput:
            return False
        if url in self.urls or host_of(url) != self.host or not path_allowed(path_of(url), self.include, ()):
            return False
        if len(self.urls) >= self.limit:
            if len(self.beyond) < MAX_BEYOND_COUNTED:
                self.beyond.add(url)
            return False
        # Most URLs are spelt canonically already: hold one string for both then, not two equal ones.
        self.urls[url] = (depth, via, url if source_url == url else source_url)
        if self.on_found is not None:
            self.on_found(len(self.urls))
        return True

    @property
    def full(self) -> bool:
        return len(self.urls) >= self.limit



def discover(fetcher: Fetcher, start_url: str, *, limit: int, max_depth: int, include: tuple[str, ...],
             walkable: Callable[[str], bool] = lambda url: True, feeds: tuple[str, ...] = (),
             keeper: WalkKeeper | None = None, max_links: int = MAX_LINKS_PER_PAGE,
             skipped: Callable[[str], bool] = lambda url: False,
             on_found: Callable[[int], None] | None = None, stop_at: float | None = None,
             read_links: ReadLinks | None = None) -> Discovery:
    target = canonicalize(start_url)
    found = Discovery(limit=limit, include=include, host=host_of(target), on_found=on_found, stop_at=stop_at)
    robots = fetcher.robots(start_url)
    if robots.state is RobotsState.UNKNOWN:
        raise MapFailed(f"cannot crawl {host_of(target)}: {robots.reason}")
    found.add(start_url, 0, "start")
    named: dict[str, str] = {}
    for feed in feeds:
        try:
            named.setdefault(canonicalize(feed), feed.strip())
        except InvalidInput as exc:
            found.problems.append(f"invalid feed URL: {exc}")
    _read_feeds(fetcher, list(named.values()), found)
    sitemap_urls = [*robots.sitemaps, origin_of(start_url) + "/sitemap.xml"]
    _read_sitemaps(fetcher, sitemap_urls, found)
    _walk_links(fetcher, start_url, found, max_depth, walkable, keeper, max_links, skipped, read_links)
    _read_feeds(fetcher, [url for canonical, url in found.feeds.items() if canonical not in named], found)
    if len(found.urls) == 1 and found.start_failure is not None:
        raise MapFailed(found.start_failure)
    return found


def _read_sitemaps(fetcher: Fetcher, roots: list[str], found: Discovery) -> None:
    queue: deque[tuple[str, int]] = deque()
    seen: set[str] = set()
    for url in roots:
        try:
            canonicalize(url)
            queue.append((url.strip(), 0))
        except InvalidInput as exc:
            found.problems.append(f"robots.txt names an invalid sitemap: {exc}")
    fetched = 0
    while queue and not found.full and fetched < MAX_SITEMAPS and not found.out_of_time():
        url, level = queue.popleft()
        if url in seen:
            continue
        seen.add(url)
        fetched += 1
        result = fetcher.fetch(FetchRequest(url, accept=(ContentKind.XML, ContentKind.TEXT)))
        if result.outcome is not FetchOutcome.FETCHED:
            if not url.endswith("/sitemap.xml") or result.status not in (404, 410):
                found.problems.append(f"sitemap {url}: {result.outcome} {result.reason}".strip())
            continue
        try:
            _read_sitemap(SitemapStream(result.body or b""), url, level, queue, found)
        except InvalidInput as exc:
            found.problems.append(f"sitemap {url}: {exc}")


def _read_sitemap(sitemap: SitemapStream, url: str, level: int, queue: deque[tuple[str, int]],
                  found: Discovery) -> None:
    """Take a sitemap's entries as they stream in; once the run is full, read a little on only to count."""
    past_limit = 0
    for loc, lastmod in sitemap:
        try:
            canonical = canonicalize(loc)
        except InvalidInput:
            found.problems.append(f"sitemap {url}: invalid <loc> {loc[:200]!r}")
            continue
        if sitemap.kind == "index":
            if level + 1 <= MAX_SITEMAP_DEPTH:
                queue.append((loc, level + 1))
            continue
        if found.full:
            past_limit += 1
            if past_limit > SITEMAP_READ_PAST_LIMIT:
                return
        if (found.add(loc, 1, "sitemap", canonical) or canonical in found.urls) and lastmod:
            found.lastmod.setdefault(canonical, lastmod)
    if sitemap.truncated:
        found.problems.append(f"sitemap {url}: more than {sitemap.max_urls} URLs; the rest were ignored")


def _walk_links(fetcher: Fetcher, start_url: str, found: Discovery, max_depth: int,
                walkable: Callable[[str], bool], keeper: WalkKeeper | None = None,
                max_links: int = MAX_LINKS_PER_PAGE, skipped: Callable[[str], bool] = lambda url: False,
                read_links: ReadLinks | None = None) -> None:
    """Breadth-first over same-host links, one level at a time, each level fetched concurrently.

    Pages a sitemap listed are not expanded (the start page always is): the sitemap is the site's own
    list of its pages, and reading every listed page for links fetched the whole site once during
    discovery and again in scrape (a large share of a recrawl; infra/bench/README.md). Pages found only
    through links (section indexes, pages the sitemap forgot) are walked. Unwalkable pages (login, cart,
    search, tag, pagination, excluded paths) are recorded but not fetched, and so are pages the operator
    skipped (``skipped``), the start page included. ``read_links`` adds links a page's rendered DOM holds
    (where its rendering is known: gleaner.render.discovery).

    With a ``keeper`` (the map stage), every answer is kept for scrape (fetched once per run), and a page
    whose links are known from an earlier run is asked conditionally: a 304 follows the known links.
    """
    listed = {url for url, (_depth, via, _source) in found.urls.items() if via == "sitemap"}
    start = canonicalize(start_url)
    walked: set[str] = set()
    # Each URL with its canonical form, made once: a level's links are canonicalised as they are found.
    level = [(start_url, start)]
    for depth in range(max(max_depth, 1)):
        if depth and found.out_of_time():  # the start page is always read
            return
        following: list[tuple[str, str]] = []
        # A level is walked in rounds: the pages it holds, then the pages they chain to (rel next / prev),
        # which stay at this depth (a book's chapters are one level however long the book).
        round_ = level
        while round_:
            chained = _walk_round(fetcher, round_, depth, found, max_depth, walked, start, listed, walkable, keeper,
                                  max_links, skipped, read_links, following)
            if found.full:  # every answer of this level was kept; the next level would add nothing
                return
            round_ = chained
        level = following


def _walk_round(fetcher: Fetcher, round_: list[tuple[str, str]], depth: int, found: Discovery, max_depth: int,
                walked: set[str], start: str, listed: set[str], walkable: Callable[[str], bool],
                keeper: WalkKeeper | None, max_links: int, skipped: Callable[[str], bool],
                read_links: ReadLinks | None, following: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Fetch one round of a level; its links join ``following`` (the next level), and the pages they chain
    to that are not walked yet are returned (the next round of this level)."""
    todo: dict[str, str] = {}  # url -> canonical, in discovery order
    for url, canonical in round_:
        if canonical in walked or skipped(canonical) or (
                canonical != start and (canonical in listed or not walkable(canonical))):
            continue
        walked.add(canonical)
        if fetcher.robots(url).allows(url):
            todo[url] = canonical
    known = keeper.known(list(todo.values())) if keeper is not None else {}
    asks = {url: known.get(canonical) for url, canonical in todo.items()}
    # Each answer is kept and read for links as it arrives, and its body dropped: a level of
    # documents (PDFs up to the body cap) is never held in memory at once.
    results: dict[str, tuple[FetchResult, PageLinks | None]] = {}
    # A walk redone after a crash (a resume re-maps) replays what the site already answered this run.
    replays = {url: kept for url in todo if keeper is not None
               and (kept := keeper.kept_before(todo[url], url)) is not None}
    asked = (FetchRequest(url, key=url, accept=PAGE_KINDS, etag=ask.etag if ask else None,
                          last_modified=ask.last_modified if ask else None)
             for url, ask in asks.items() if url not in replays)
    for result in chain(replays.values(), fetcher.fetch_many(asked)):
        url = str(result.key)
        results[url] = (replace(result, body=None), _read_page(result, url, todo[url], asks[url],
                                                               depth < max_depth, keeper, max_links, read_links))
    chained: list[tuple[str, str]] = []
    for url, canonical in todo.items():  # in discovery order, not completion order: the same site maps the same way
        result, page = results[url]
        if result.outcome not in (FetchOutcome.FETCHED, FetchOutcome.NOT_MODIFIED) and canonical == start:
            found.start_failure = f"start page {url}: {result.outcome} {result.reason}".strip()
            found.problems.append(found.start_failure)
        if page is None:  # not reachable, not a page, or max_depth 0: fetched only to know it is reachable
            continue
        for feed in page.feeds:
            found.feeds.setdefault(canonicalize(feed), feed)
        for link in page.chain:
            try:
                target = canonicalize(link)
            except InvalidInput:
                continue
            if target in walked:
                continue
            if found.add(link, depth, "link", target):
                chained.append((link, target))
            elif target in found.urls:
                known_depth, via, source = found.urls[target]
                if known_depth > depth:  # found deeper by an ordinary link this level: it is this level's
                    found.urls[target] = (depth, via, source)
                chained.append((link, target))
        for link in page.links:
            try:
                target = canonicalize(link)
            except InvalidInput:
                continue
            if found.add(link, depth + 1, "link", target) or target in found.urls:
                following.append((link, target))
    return chained


def _read_page(result: FetchResult, url: str, canonical: str, ask: KnownLinks | None, expand: bool,
               keeper: WalkKeeper | None, max_links: int, read_links: ReadLinks | None = None) -> PageLinks | None:
    """Keep one walked page's answer; its links if it is to be expanded (from the body, or known on a 304)."""
    if keeper is not None:
        keeper.keep(canonical, result, ask)
    if not expand:
        return None
    if result.outcome is FetchOutcome.NOT_MODIFIED and ask is not None:
        return PageLinks(ask.links, ask.feeds, chain=ask.chain)
    if result.outcome is not FetchOutcome.FETCHED or result.kind is not ContentKind.HTML:
        return None
    page = extract_links(result.text(), result.final_url or url, max_links)
    if read_links is not None:
        page = merged(page, read_links(result, canonical), max_links)
    if keeper is not None:
        keeper.read(canonical, result.etag, result.last_modified, page)
    return page


def _read_feeds(fetcher: Fetcher, feeds: list[str], found: Discovery) -> None:
    """Each feed's entry links become documents (same host as the run, include globs apply)."""
    for url in feeds[:MAX_FEEDS]:
        if found.full:
            return
        result = fetcher.fetch(FetchRequest(url, accept=(ContentKind.FEED, ContentKind.XML)))
        if result.outcome is not FetchOutcome.FETCHED:
            found.problems.append(f"feed {url}: {result.outcome} {result.reason}".strip())
            continue
        try:
            feed = parse_feed(result.body or b"", result.final_url or url, result.content_type)
        except InvalidInput as exc:
            found.problems.append(f"feed {url}: {exc}")
            continue
        found.problems.extend(f"feed {url}: {problem}" for problem in feed.problems)
        elsewhere = 0
        for entry in feed.entries:
            if host_of(canonicalize(entry.link)) != found.host:
                elsewhere += 1
                continue
            found.add(entry.link, 1, "feed")
            if found.full:
                break
        if elsewhere:
            found.problems.append(f"feed {url}: {elsewhere} entries link to other hosts (not part of this run)")
        if feed.truncated:
            found.problems.append(f"feed {url}: more entries than are read from one feed; the rest were ignored")
