"""Stage 1, map: discover a site's URLs and open a run.

robots.txt (read first) → the feeds named in the request → its Sitemap lines
and /sitemap.xml (indexes, nested, gzipped) → the start page's same-host links,
breadth-first, bounded by limit and max depth, filtered by include globs → the
RSS/Atom feeds those pages announce (``<link rel="alternate">``). Feed entries'
links become documents like sitemap entries do (discovered_via = "feed"); a feed
that cannot be read or parsed is a recorded problem, never a failed run. Writes source_hosts, one documents row per
URL (status=discovered), the crawl_runs row, the run's ledger rows (unlabeled)
and the map JSON; then emits CrawlMapped.

A complete mapping run (no limit reached, no include globs) also marks the site's
active pages that it and the complete run before it did not find as stale.

Idempotent: the run id derives from the request id, so a redelivered request
finds its run; a run already past mapping just re-emits CrawlMapped.

The discovery itself (what is read, in what order, within which bounds) is
gleaner/stages/mapwalk.py; this module records what it found and opens the run.
"""

from __future__ import annotations

import json
import logging
import time

from gleaner.app import Deps
from gleaner.changes import outbox
from gleaner.decide.port import PageFacts, Verdict
from gleaner.errors import BlobConflict, GleanerError, InvalidInput
from gleaner.messages import CrawlMapped, CrawlRequested
from gleaner.operator.lastmod import parsed_lastmods
from gleaner.render.discovery import rendered_links
from gleaner.stages.mapwalk import discover
from gleaner.stages.walkkeep import MapFailed, WalkKeeper
from gleaner.store.backends.blobs import map_key
from gleaner.tenancy import site_for
from gleaner.urls import canonicalize, host_of, path_of, site_domain_of, url_hash, validate_glob

log = logging.getLogger(__name__)


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
    site = site_for(target, message.site_domain)
    host = host_of(target)
    run_id = message.run_id
    host_id = meta.upsert_source_host(site, host, own_site=site_domain_of(target) == site)
    options = {"limit": limit, "max_depth": max_depth, "include": list(include), "exclude": list(exclude),
               "feeds": list(message.feeds), "request_id": message.request_id}
    budget = {name: value for name, value in (("max_requests", message.max_requests),
                                              ("max_bytes", message.max_bytes), ("max_seconds", message.max_seconds))
              if value is not None}
    if budget:
        options["budget"] = budget
    if message.honour_lastmod:
        options["honour_lastmod"] = True
    if message.render:
        options["render"] = message.render
    politeness = {name: value for name, value in (("host_delay", message.delay),
                                                  ("host_concurrency", message.concurrency)) if value is not None}
    if politeness:
        options["politeness"] = politeness
    created = meta.create_run(run_id, site, host_id, target, options, message.mode, message.triggered_by,
                              worker=deps.worker)
    if not created:
        status = meta.run_status(run_id)
        if status != "mapping":
            log.info("run %s already %s; re-emitting crawl-mapped", run_id, status)
            if status != "failed":
                mapped = CrawlMapped(run_id=run_id, site_domain=site)
                deps.bus.publish(mapped, ordering_key=site)
                return mapped
            return None
    with deps.new_fetcher(run_id=run_id) as fetcher:
        # robots.txt comes first whatever else the walk needs: asked now, it is on its way while that is read.
        fetcher.prefetch_robots(message.target_url.strip())
        # An erased URL found again is named by its erased form (store/documents/erasure.py): its document is found by
        # it and excluded, it is never fetched, and the URL is written nowhere.
        erased = deps.blocklist.erased_urls(site)
        keeper = WalkKeeper(deps, site, run_id, erased)
        # The operator's skip rules and review exclusions hold for the walk too: a skipped page is never fetched.
        gate = meta.gate_for(site)
        try:
            found = discover(fetcher, message.target_url.strip(), limit=limit, max_depth=max_depth, include=include,
                             walkable=lambda url: _walkable(deps, url, exclude), feeds=message.feeds,
                             keeper=keeper, max_links=settings.max_links_per_page,
                             skipped=lambda url: gate.skipped(url, path_of(url)) or erased(url) is not None,
                             on_found=lambda count: deps.observer.urls_found(count, run_id),
                             stop_at=time.monotonic() + settings.map_soft_deadline if settings.map_soft_deadline
                             else None,
                             read_links=rendered_links(deps, fetcher, run_id, site, message.render,
                                                       settings.max_links_per_page, keeper))
        except MapFailed as exc:
            meta.set_run_status(run_id, "failed", error=str(exc))
            raise
    # The sitemap's lastmod and the walk's kept answers go into the ledger rows as they are inserted.
    masked = {url: form for url in found.urls if (form := erased(url)) is not None}
    if masked:
        found.urls = {masked.get(url, url): (depth, via, masked.get(url, source))
                      for url, (depth, via, source) in found.urls.items()}
    meta.record_discovery(run_id, site, host_id,
                          ((url, url_hash(url), url if url in masked.values() else path_of(url), source, depth, via)
                           for url, (depth, via, source) in found.urls.items()),
                          parsed_lastmods(found.lastmod), keeper.answers)
    keeper.save()
    meta.apply_site_rules(site)  # rules reach the documents this run discovered for the first time
    key = map_key(site, run_id)
    links = {"run_id": run_id, "target_url": target, "site_domain": site,
             "links": [{"url": u, "source_url": s, "depth": d, "via": v} for u, (d, v, s) in found.urls.items()],
             "problems": found.problems}
    try:
        # No indent: json.dumps with one falls back to the pure-Python encoder, far slower on large maps.
        deps.blobs.put(key, json.dumps(links, sort_keys=True).encode("utf-8"), "application/json")
    except BlobConflict:
        # A redelivery after a crash re-mapped a site that changed meanwhile: the first map JSON
        # stands (blobs are create-only), and the run must still move on rather than stay mapping.
        log.info("run %s: keeping the map JSON of the first delivery", run_id)
    except GleanerError as exc:
        # The blob store cannot take the map: it will not take the pages either. End the run now rather
        # than map the site again on every redelivery.
        reason = f"blob store failed: {exc}"
        meta.set_run_status(run_id, "failed", error=reason)
        raise MapFailed(reason) from exc
    # Before finish_map: a redelivery after a crash here still finds the run mapping and gets this far again.
    complete = not found.full and not found.cut_short and not include and max_depth >= 1
    meta.mark_unmapped_stale(run_id, site, complete)
    meta.finish_map(run_id, key, len(found.beyond))
    mapped = CrawlMapped(run_id=run_id, site_domain=site)
    deps.bus.publish(mapped, ordering_key=site)
    outbox.flush_after_commit(deps)  # pages this run declared stale
    return mapped


def _walkable(deps: Deps, url: str, exclude: tuple[str, ...]) -> bool:
    """Walk only into pages the decider would not exclude by URL alone: login, cart, search, tag and
    pagination pages are crawler traps, and a site owner does not expect them fetched."""
    facts = PageFacts(url=url, path=path_of(url))
    return deps.decider.decide(facts, exclude).decision != Verdict.EXCLUDE

