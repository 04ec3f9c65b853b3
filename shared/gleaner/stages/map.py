"""Stage 1, map: discover a site's URLs and open a run.

robots.txt (read first) → its Sitemap lines and /sitemap.xml (indexes, nested,
gzipped) → the start page's same-host links, breadth-first, bounded by limit and
max depth, filtered by include globs. Writes source_hosts, one documents row per
URL (status=discovered), the crawl_runs row, the run's ledger rows (unlabeled)
and the map JSON; then emits CrawlMapped.

Idempotent: the run id derives from the request id, so a redelivered request
finds its run; a run already past mapping just re-emits CrawlMapped.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from dataclasses import dataclass, field

from gleaner.app import Deps
from gleaner.discover.links import extract_links
from gleaner.discover.sitemaps import parse_sitemap
from gleaner.errors import BlobConflict, InvalidInput, PermanentError
from gleaner.fetch.fetcher import Fetcher
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest
from gleaner.messages import CrawlMapped, CrawlRequested
from gleaner.store.blobs import map_key
from gleaner.urls import (
    canonicalize,
    host_of,
    origin_of,
    path_allowed,
    path_of,
    site_domain_of,
    url_hash,
    validate_glob,
)

log = logging.getLogger(__name__)

# A sitemap index may nest; real sites rarely go past two levels, hostile ones go on forever.
MAX_SITEMAP_DEPTH = 3
MAX_SITEMAPS = 200


class MapFailed(PermanentError):
    """The whole run cannot proceed (robots unknown, start URL unreachable and nothing else found)."""


@dataclass
class Discovery:
    """URLs found so far, in discovery order: url -> (depth, via)."""

    limit: int
    include: tuple[str, ...]
    host: str
    urls: dict[str, tuple[int, str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def add(self, url: str, depth: int, via: str) -> bool:
        if len(self.urls) >= self.limit or url in self.urls:
            return False
        if host_of(url) != self.host or not path_allowed(path_of(url), self.include, ()):
            return False
        self.urls[url] = (depth, via)
        return True

    @property
    def full(self) -> bool:
        return len(self.urls) >= self.limit


def handle(message: CrawlRequested, deps: Deps) -> CrawlMapped | None:
    settings = deps.settings
    meta = deps.metadata
    target = canonicalize(message.target_url)
    include = tuple(validate_glob(g) for g in message.include)
    exclude = tuple(validate_glob(g) for g in message.exclude)
    limit = message.limit if message.limit is not None else settings.default_limit
    max_depth = message.max_depth if message.max_depth is not None else settings.default_max_depth
    if limit < 1 or max_depth < 0:
        raise InvalidInput("limit must be >= 1 and max_depth >= 0")
    site = message.site_domain or site_domain_of(target)
    host = host_of(target)
    run_id = message.run_id
    host_id = meta.upsert_source_host(site, host, own_site=site_domain_of(target) == site)
    options = {"limit": limit, "max_depth": max_depth, "include": list(include), "exclude": list(exclude),
               "feeds": list(message.feeds), "request_id": message.request_id}
    created = meta.create_run(run_id, site, host_id, target, options, message.mode, message.triggered_by)
    if not created:
        status = meta.run_status(run_id)
        if status != "mapping":
            log.info("run %s already %s; re-emitting crawl-mapped", run_id, status)
            if status != "failed":
                mapped = CrawlMapped(run_id=run_id, site_domain=site)
                deps.bus.publish(mapped, ordering_key=site)
                return mapped
            return None
    with deps.new_fetcher() as fetcher:
        try:
            found = discover(fetcher, target, limit=limit, max_depth=max_depth, include=include,
                             exclude=exclude, feeds=message.feeds)
        except MapFailed as exc:
            meta.set_run_status(run_id, "failed", error=str(exc))
            raise
    rows = [(url, url_hash(url), path_of(url), url) for url in found.urls]
    ids = meta.upsert_documents(site, host_id, rows)
    meta.add_run_pages(run_id, [(ids[url], depth, via) for url, (depth, via) in found.urls.items()])
    key = map_key(site, run_id)
    links = {"run_id": run_id, "target_url": target, "site_domain": site,
             "links": [{"url": u, "depth": d, "via": v} for u, (d, v) in found.urls.items()],
             "problems": found.problems}
    try:
        deps.blobs.put(key, json.dumps(links, indent=1, sort_keys=True).encode("utf-8"), "application/json")
    except BlobConflict:
        # A redelivery after a crash re-mapped a site that changed meanwhile: the first map JSON
        # stands (blobs are create-only), and the run must still move on rather than stay mapping.
        log.info("run %s: keeping the map JSON of the first delivery", run_id)
    meta.finish_map(run_id, key)
    mapped = CrawlMapped(run_id=run_id, site_domain=site)
    deps.bus.publish(mapped, ordering_key=site)
    return mapped


def discover(fetcher: Fetcher, target: str, *, limit: int, max_depth: int, include: tuple[str, ...],
             exclude: tuple[str, ...], feeds: tuple[str, ...] = ()) -> Discovery:
    found = Discovery(limit=limit, include=include, host=host_of(target))
    robots = fetcher.robots(target)
    if robots.state == "unknown":
        raise MapFailed(f"robots.txt of {host_of(target)} could not be read ({robots.reason}); "
                        "nothing is fetched from this host this run")
    found.add(target, 0, "start")
    sitemap_urls = [*robots.sitemaps, origin_of(target) + "/sitemap.xml"]
    _read_sitemaps(fetcher, sitemap_urls, found)
    _walk_links(fetcher, target, found, max_depth, exclude)
    if len(found.urls) == 1 and found.problems and found.problems[-1].startswith("start page"):
        raise MapFailed(found.problems[-1])
    return found


def _read_sitemaps(fetcher: Fetcher, roots: list[str], found: Discovery) -> None:
    queue: deque[tuple[str, int]] = deque()
    seen: set[str] = set()
    for url in roots:
        try:
            queue.append((canonicalize(url), 0))
        except InvalidInput as exc:
            found.problems.append(f"robots.txt names an invalid sitemap: {exc}")
    fetched = 0
    while queue and not found.full and fetched < MAX_SITEMAPS:
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
            sitemap = parse_sitemap(result.body or b"")
        except InvalidInput as exc:
            found.problems.append(f"sitemap {url}: {exc}")
            continue
        for loc in sitemap.locs:
            try:
                child = canonicalize(loc)
            except InvalidInput:
                found.problems.append(f"sitemap {url}: invalid <loc> {loc[:200]!r}")
                continue
            if sitemap.kind == "index":
                if level + 1 <= MAX_SITEMAP_DEPTH:
                    queue.append((child, level + 1))
            else:
                found.add(child, 1, "sitemap")
                if found.full:
                    break


def _walk_links(fetcher: Fetcher, target: str, found: Discovery, max_depth: int, exclude: tuple[str, ...]) -> None:
    """Breadth-first over same-host links; excluded paths are recorded but not walked."""
    queue: deque[tuple[str, int]] = deque([(target, 0)])
    walked: set[str] = set()
    while queue:
        url, depth = queue.popleft()
        if url in walked or (depth >= max_depth and url != target):
            continue
        walked.add(url)
        if not path_allowed(path_of(url), (), exclude):
            continue
        if not fetcher.robots(url).allows(url):
            continue
        result = fetcher.fetch(FetchRequest(url, accept=(ContentKind.HTML,)))
        if result.outcome is not FetchOutcome.FETCHED:
            if url == target:
                found.problems.append(f"start page {url}: {result.outcome} {result.reason}".strip())
            continue
        if depth >= max_depth:
            continue
        page = extract_links(result.text(), result.final_url or url)
        for link in page.links:
            if found.add(link, depth + 1, "link") or link in found.urls:
                queue.append((link, depth + 1))
        if found.full:
            # Keep walking only what is already queued? No: the limit is reached, discovery is done.
            return
