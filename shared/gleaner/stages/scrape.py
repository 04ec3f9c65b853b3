"""Stage 3, scrape: fetch one batch (≤100 include URLs), extract, record a status for every URL.

Conditional GETs use the stored ETag / Last-Modified of pages that have a
snapshot; a 304 settles the page as unchanged with no body. Extraction runs in
the extract pool while other fetches are in flight. A page whose content hash
equals its current snapshot writes no blob at all; others leave content.md and
raw.md as run-scoped artefacts for the snapshot stage. Pages already settled in
this run (a redelivered task) are skipped. Pages map's walk or sample's sample
already asked for in this run are not asked again: their kept answers
(stages/fetchonce.py) are settled as if this stage had fetched them. A batch of a run that is no longer
scraping (cancelled, interrupted, ended by a storage failure) fetches nothing.

A body the blob store will not take settles its page as ``store-failed`` and
ends the run (partial if it stored anything, else failed): the store failed, not
the site, so the site is never asked for the page again in this run.

Outcomes are written every few pages as they settle, not only at the end, and the
batch has a soft deadline (``GLEANER_SCRAPE_SOFT_DEADLINE``, under the function's
timeout): past it no new fetch starts, and the URLs not started go to a new task,
part + 1 of the same batch under its own deterministic name. A long Crawl-delay or
a slow host therefore costs more tasks, never a killed batch that recorded nothing.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import replace
from itertools import chain

from gleaner.app import Deps
from gleaner.changes import outbox
from gleaner.decide.port import Verdict
from gleaner.errors import BlobConflict, GleanerError, InvalidInput
from gleaner.extract.page import PDF, ExtractedPage
from gleaner.extract.pdf import EXTRACTION_METHOD as PDF_EXTRACTOR
from gleaner.fetch.types import FetchOutcome, FetchRequest, FetchResult
from gleaner.logs import Event
from gleaner.messages import FetchedPage, PagesFetched, ScrapeBatch
from gleaner.render.scraping import RenderPlan
from gleaner.runstate import RunStatus
from gleaner.stages.fetchonce import PAGE_KINDS, replay_for, replayable
from gleaner.store.blobs import run_body_key, run_content_key, run_raw_key
from gleaner.store.dberrors import again_on_transient
from gleaner.store.records import FetchRecord, RunPage
from gleaner.urls import canonicalize

log = logging.getLogger(__name__)

# Pages handed to an extraction process at once: fewer tasks cost the pool less in this process
# (its feeder and manager threads wake once a task), while a batch of 100 still spreads over the
# workers; past eight pages a task, the per-page cost no longer falls.
PAGES_PER_EXTRACTION = 8
# Settled pages written in one statement while the batch goes on: few enough that a batch killed
# at its hard deadline loses little, many enough that the writes stay batched (FACTS.md).
RECORDS_PER_WRITE = 10
# 304s waiting for one statement: such a page costs the site no body and a redelivery only a conditional
# request, so they wait for more company (an unchanged recrawl is nothing but 304s, each write a transaction).
NOT_MODIFIED_PER_WRITE = 50


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def handle(message: ScrapeBatch, deps: Deps) -> PagesFetched:
    meta = deps.metadata
    status = meta.touch_run(message.run_id)
    if status is not RunStatus.SCRAPING:
        # Cancelled, interrupted, failed (the blob store gave up) or already finished: ask the site nothing.
        log.info("run %s is %s: batch %d is not fetched", message.run_id, status, message.batch_no)
        return PagesFetched(run_id=message.run_id, site_domain=message.site_domain, batch_no=message.batch_no,
                            pages=())
    stop_at = time.monotonic() + deps.settings.scrape_soft_deadline
    batch = [p for p in meta.run_pages(message.run_id, message.document_ids) if p.decision == Verdict.INCLUDE]
    pages = {p.document_id: p for p in batch if p.fetch_outcome is None}
    # Fetched by an earlier delivery whose hand-off to snapshot was lost: announce again, don't refetch.
    fetched: list[FetchedPage] = [_announce_again(deps, message, p) for p in batch
                                  if p.fetch_outcome == "fetched" and p.snapshot_outcome is None
                                  and p.fetched_content_hash]
    # Pages map's walk or sample's sample already asked for this run: their answers, not a second request.
    kept = [p for p in pages.values() if replayable(p.prefetched, p.current_hash is not None)]
    kept_ids = {p.document_id for p in kept}
    # Which pages the browser reads (render = auto | always, by run or rule).
    render = RenderPlan(deps, message.run_id, message.site_domain, pages.values())
    kept = [p for p in kept if p.document_id not in render.browser_ids]  # a kept answer is the plain document
    kept_ids = {p.document_id for p in kept}
    requests = [render.request(_request(p)) for p in pages.values() if p.document_id not in kept_ids]
    missing: list[FetchRequest] = []  # kept answers whose body artefact is gone: asked after all

    def replays() -> Iterator[FetchResult]:
        """Kept answers one at a time (bodies are read as they are needed, never a batch of them at once)."""
        for p in kept:
            try:
                result = replay_for(deps.blobs, p.prefetched, p.fetch_url, p.document_id, p.current_hash is not None)
            except GleanerError as exc:
                # The store cannot give the kept body back, so it will not take this page's version either:
                # settled as not stored, like a body it refuses (the site is not asked again).
                store_failures.append(exc)
                answered.add(p.document_id)
                records.append(FetchRecord(p.document_id, str(FetchOutcome.STORE_FAILED), f"blob store: {exc}"[:500],
                                           None, 0, None, None, None))
                continue
            if result is None:
                missing.append(_request(p))
            else:
                yield result
    records: list[FetchRecord] = []
    pending: list[tuple[list[tuple[RunPage, FetchResult]], Future[list[ExtractedPage]]]] = []
    waiting: list[tuple[RunPage, FetchResult]] = []
    answered: set[str] = set()
    counts: Counter[str] = Counter()
    store_failures: list[GleanerError] = []

    def extract_waiting() -> None:
        items = [(result.body or b"", result.charset, result.final_url or page.fetch_url, result.content_type)
                 for page, result in waiting]
        pending.append((list(waiting), deps.extract_pool.submit(items)))
        waiting.clear()

    unchecked: list[tuple[tuple[RunPage, FetchResult], ExtractedPage]] = []  # extracted, not yet handed off

    def settle(block: bool) -> None:
        """Hand off extracted pages (the finished ones, or all when ``block``) and write what is settled."""
        while pending and (block or pending[0][1].done()):
            fetched_pages, future = pending.pop(0)
            unchecked.extend(zip(fetched_pages, future.result(), strict=True))
        # The blocklist is asked about several extraction tasks' pages at once: each question is a transaction.
        if unchecked and (block or len(unchecked) >= RECORDS_PER_WRITE):
            done = list(unchecked)
            unchecked.clear()
            # Erased content never comes back: not at its own URL, not at another (seed 004's blocklist).
            erased = deps.blocklist.refused(message.site_domain, {
                page.document_id: (page.canonical_url.encode("utf-8"), extracted.content, extracted.canonical.text)
                for (page, _result), extracted in done})
            for (page, result), extracted in done:
                if extracted.refused is not None:  # a document nothing could be read from (an unreadable PDF)
                    records.append(_record(page, replace(result, outcome=FetchOutcome.REFUSED_CONTENT,
                                                         reason=extracted.refused, body=None), None))
                    continue
                if page.document_id in erased:
                    records.append(FetchRecord(page.document_id, str(FetchOutcome.REFUSED_ERASED), "content was erased",
                                               result.status, result.elapsed_ms, len(result.body or b""), None, None))
                    continue
                try:
                    handed = _hand_off(deps, message, page, result, extracted)
                except GleanerError as exc:
                    # Storage failed, not the site: fetching the page again cannot help, so the page is
                    # settled as not stored (a redelivery would ask the site for the whole batch again).
                    store_failures.append(exc)
                    records.append(_record(page, result, extracted.title, outcome=FetchOutcome.STORE_FAILED,
                                           reason=f"blob store: {exc}"[:500]))
                    continue
                handed = render.handed(handed)
                fetched.append(handed)
                records.append(_record(page, result, extracted.title, handed))
        if records and (block or _write_due(records)):
            _write(deps, message.run_id, records, counts)

    with deps.new_fetcher(run_id=message.run_id) as fetcher:
        for result in chain(replays(), fetcher.fetch_many(requests, stop_at=stop_at),
                            fetcher.fetch_many(missing, stop_at=stop_at)):
            deps.observer.page_fetched()
            page = pages[str(result.key)]
            answered.add(page.document_id)
            moved_to = _moved_to_known(deps, message.site_domain, page, result)
            if moved_to is not None:
                records.append(_record(page, result, None, superseded_by=moved_to))
            elif result.outcome is FetchOutcome.FETCHED:
                waiting.append((page, render.read(fetcher, result)))
                if len(waiting) >= PAGES_PER_EXTRACTION:
                    extract_waiting()
            else:
                records.append(_record(page, result, None))
            settle(block=False)
    if waiting:
        extract_waiting()
    settle(block=True)
    render.finish()
    if store_failures:
        ended = meta.end_run_unstored(
            message.run_id, f"blob store failed: {store_failures[0]}; {len(store_failures)} fetched pages of batch "
            f"{message.batch_no} not stored, later batches not fetched")
        if ended is not None:
            log.error("run %s ends %s: the blob store failed (%s)", message.run_id, ended, store_failures[0])
    left = [doc for doc in pages if doc not in answered]
    if left:
        # The soft deadline passed before these could start: a new task (its own name) takes them on.
        deps.bus.enqueue(replace(message, document_ids=tuple(left), part=message.part + 1))
    log.info("scraped batch %s part %s: %s fetched, %s not modified, %s failed, %s handed on",
             message.batch_no, message.part, counts["fetched"], counts["not-modified"], counts["failed"], len(left),
             extra={"fields": {"event": Event.SCRAPE_BATCH.value, "pages_fetched": counts["fetched"],
                               "pages_not_modified": counts["not-modified"], "pages_failed": counts["failed"],
                               "pages_handed_on": len(left)}})
    out = PagesFetched(run_id=message.run_id, site_domain=message.site_domain, batch_no=message.batch_no,
                       pages=tuple(fetched))
    if fetched:
        deps.bus.publish(out, ordering_key=message.site_domain)
    elif not left:
        meta.try_finish_run(message.run_id)
    outbox.flush_after_commit(deps)  # status changes (removed, restored) recorded with the fetch outcomes
    return out


def _request(page: RunPage) -> FetchRequest:
    """Scrape's request for a page: conditional on the validators of its current snapshot."""
    return FetchRequest(page.fetch_url, key=page.document_id, accept=PAGE_KINDS,
                        etag=page.etag if page.current_hash else None,
                        last_modified=page.last_modified if page.current_hash else None)


def _write_due(records: list[FetchRecord]) -> bool:
    """Whether the settled pages in hand are enough for one write (304s wait for more of their kind)."""
    not_modified = sum(1 for r in records if r.outcome == FetchOutcome.NOT_MODIFIED)
    return len(records) - not_modified >= RECORDS_PER_WRITE or not_modified >= NOT_MODIFIED_PER_WRITE


def _write(deps: Deps, run_id: str, records: list[FetchRecord], counts: Counter[str]) -> None:
    """Record settled pages now, so a batch cut short by its hard deadline keeps what it did.

    The pages are fetched: a database blip now is waited out here, not by fetching them all again."""
    # 304s (every page of an unchanged recrawl) are settled by their own lean statement.
    not_modified = [r for r in records if r.outcome == FetchOutcome.NOT_MODIFIED]
    again_on_transient(lambda: deps.metadata.record_not_modified(run_id, not_modified))
    again_on_transient(lambda: deps.metadata.record_fetches(
        run_id, [r for r in records if r.outcome != FetchOutcome.NOT_MODIFIED]))
    for r in records:
        counts[r.outcome if r.outcome in (FetchOutcome.FETCHED, FetchOutcome.NOT_MODIFIED) else "failed"] += 1
    records.clear()


def _record(page: RunPage, result: FetchResult, title: str | None, handed: FetchedPage | None = None,
            superseded_by: str | None = None, *, outcome: FetchOutcome | None = None,
            reason: str | None = None) -> FetchRecord:
    return FetchRecord(page.document_id, str(outcome or result.outcome), reason or result.reason, result.status,
                       result.elapsed_ms,
                       len(result.body) if result.body is not None else None, result.etag, result.last_modified,
                       title, handed.content_hash if handed else None, handed.raw_hash if handed else None,
                       handed.extractor if handed else None, superseded_by, result.refused_by_policy)


PERMANENT_REDIRECTS = frozenset({301, 308})


def _moved_to_known(deps: Deps, site: str, page: RunPage, result: FetchResult) -> str | None:
    """The canonical URL of another known document of the site this page permanently redirected to.

    Such a page is superseded (DESIGN.md): what the redirect served is the other document's content,
    so it is not versioned as this one's.
    """
    if not result.ok or not result.redirects or not set(result.redirects) <= PERMANENT_REDIRECTS:
        return None
    try:
        target = canonicalize(result.final_url or "")
    except InvalidInput:
        return None
    if target == page.canonical_url or not deps.metadata.document_ids_by_url(site, [target]):
        return None
    return target


def _announce_again(deps: Deps, message: ScrapeBatch, page: RunPage) -> FetchedPage:
    content_key = run_content_key(message.site_domain, message.run_id, page.url_hash)
    raw_key = run_raw_key(message.site_domain, message.run_id, page.url_hash)
    has_blobs = deps.blobs.exists(content_key)
    original_key = run_body_key(message.site_domain, message.run_id, page.url_hash)
    document = page.extractor == PDF_EXTRACTOR and has_blobs and deps.blobs.exists(original_key)
    return FetchedPage(document_id=page.document_id, content_hash=page.fetched_content_hash or "",
                       raw_hash=page.fetched_raw_hash or "", content_key=content_key if has_blobs else None,
                       raw_key=raw_key if has_blobs and deps.blobs.exists(raw_key) else None,
                       fetch_status=page.fetch_status or 200, fetch_time_ms=page.fetch_time_ms or 0,
                       byte_size=page.byte_size or 0, extractor=page.extractor or "",
                       original_key=original_key if document else None, mime_type=PDF if document else None)


def _put_run_blob(deps: Deps, key: str, data: bytes) -> bytes:
    """Create the run-scoped artefact; if a redelivery already left one, the first one stands."""
    try:
        deps.blobs.put(key, data)
    except BlobConflict:
        return deps.blobs.get(key)
    return data


def _hand_off(deps: Deps, message: ScrapeBatch, page: RunPage, result: FetchResult,
              extracted: ExtractedPage) -> FetchedPage:
    content_hash, raw_hash = extracted.content_hash, extracted.raw_hash
    content_key = raw_key = original_key = None
    if content_hash != page.current_hash:
        if extracted.mime_type != "text/html":  # a document: its original goes with its new version
            original_key = run_body_key(message.site_domain, message.run_id, page.url_hash)
            _put_run_blob(deps, original_key, result.body or b"")
        content_key = run_content_key(message.site_domain, message.run_id, page.url_hash)
        raw_key = run_raw_key(message.site_domain, message.run_id, page.url_hash)
        content = _put_run_blob(deps, content_key, extracted.content)
        raw = _put_run_blob(deps, raw_key, extracted.raw)
        # The extraction processes hashed what they made; only bytes an earlier delivery left are hashed here.
        if content is not extracted.content:
            content_hash = sha1(content)
        if raw is not extracted.raw:
            raw_hash = sha1(raw)
        if content_hash == extracted.content_hash:
            deps.canonical_handover.put(content_hash, extracted.canonical)
    return FetchedPage(document_id=page.document_id, content_hash=content_hash, raw_hash=raw_hash,
                       content_key=content_key, raw_key=raw_key, fetch_status=result.status or 200,
                       fetch_time_ms=result.elapsed_ms, byte_size=len(result.body or b""),
                       extractor=extracted.extractor, source_blake3=extracted.source_blake3 or None,
                       original_key=original_key, mime_type=extracted.mime_type if original_key else None)
