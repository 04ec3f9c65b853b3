"""One scrape batch's pages on their way in this process: read -> extracted -> settled -> written -> handed on.

Split from :mod:`gleaner.stages.scrape`, the stage's entry (which pages a batch asks for, its soft deadline,
what is left for a new task, the run's end): :class:`BatchScrape` asks its reader for the pages
(:class:`~gleaner.render.reader.PageReader`: a kept answer, the plain fetch or the browser, decided there),
takes each as read, has it extracted in the extract pool, checks it against the erasure blocklist, leaves
its run-scoped artefacts (content.md, raw.md, a document's original) for snapshot, records every page's
outcome a few at a time and, on the in-process bus, hands recorded pages on to snapshot while the batch
still fetches (:meth:`BatchScrape._stream`).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gleaner.app import Deps
from gleaner.errors import BlobConflict, GleanerError
from gleaner.extract.page import PDF, ExtractedPage
from gleaner.extract.pdf import EXTRACTION_METHOD as PDF_EXTRACTOR
from gleaner.fetch.types import FetchOutcome, FetchResult
from gleaner.messages import FetchedPage, PagesFetched, ScrapeBatch, SnapshotsWritten
from gleaner.render.reader import PageRead, PageReader
from gleaner.stages.answerkeep import KeptAnswers
from gleaner.stages.cpugauge import GAUGE
from gleaner.store.backends.blobs import run_body_key, run_content_key, run_raw_key
from gleaner.store.backends.dberrors import again_on_transient
from gleaner.store.ledger.records import FetchRecord, RunPage
from gleaner.store.ledger.rendering import record_render_facts

if TYPE_CHECKING:
    from gleaner.fetch.fetcher import Fetcher

# Pages handed to an extraction process at once: fewer tasks cost the pool less in this process
# (its feeder and manager threads wake once a task), while a batch of 100 still spreads over the
# workers; past eight pages a task, the per-page cost no longer falls.
PAGES_PER_EXTRACTION = 8
# Settled pages written in one statement while the batch goes on: few enough that a batch killed
# at its hard deadline loses little, many enough that the writes stay batched (FACTS.md).
RECORDS_PER_WRITE = 10
# In-process, extracted pages go on to snapshot in one message when there are this many (the batch's
# last one goes at its end): each message costs snapshot and ingest a few transactions of their own.
PAGES_PER_SNAPSHOT = 10
# In-process, fetched pages go on to snapshot once the oldest of them has waited this long (seconds), however
# few, while the machine's cores are less busy than SPARE_BELOW (see gleaner.stages.cpugauge and _stream).
HAND_ON_AFTER = 3.0
SPARE_BELOW = 0.7
# 304s waiting for one statement: such a page costs the site no body and a redelivery only a conditional
# request, so they wait for more company (an unchanged recrawl is nothing but 304s, each write a transaction).
NOT_MODIFIED_PER_WRITE = 50


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


class BatchScrape:
    """One batch's pages on their way, each step a method: read -> extracted -> settled -> written.

    :meth:`read` asks the batch's reader for its pages and :meth:`read_one` takes each as read (a kept
    answer, the fetcher's, the browser's) and either records its outcome or queues the page for
    extraction; :meth:`extract` hands queued pages to the extraction pool a few at a time; :meth:`settle`
    takes extracted pages back, checks them against the erasure blocklist and hands their artefacts to
    snapshot; :meth:`write` records settled outcomes a few at a time, so a batch cut short keeps what it did.
    """

    def __init__(self, deps: Deps, message: ScrapeBatch, batch: list[RunPage]) -> None:
        self.deps = deps
        self.message = message
        self.pages = {p.document_id: p for p in batch if p.fetch_outcome is None}
        # Each answer is kept as it comes (stages/answerkeep.py): those an earlier delivery of this batch got
        # but never recorded (a kill -9 before their write) stand for this delivery's fetches. In-process only,
        # where `runs resume` redoes a batch: in the cloud each would be two object writes on the batch's path.
        self.keeper = KeptAnswers(deps.blobs, message.site_domain, message.run_id, f"scrape-{message.batch_no}",
                                  "scrape") if deps.local_bus is not None else None
        earlier = self.keeper.earlier() if self.keeper is not None and self.pages else {}
        self.pages = {doc: replace(p, prefetched=earlier[p.url_hash]) if p.url_hash in earlier else p
                      for doc, p in self.pages.items()}
        # Fetched by an earlier delivery whose hand-off to snapshot was lost: announce again, don't refetch.
        self.handed: list[FetchedPage] = [_announce_again(deps, message, p) for p in batch
                                          if p.fetch_outcome == "fetched" and p.snapshot_outcome is None
                                          and p.fetched_content_hash]
        # How each page is read (an answer kept this run, the plain fetch, the browser) is the reader's decision.
        self.reader = PageReader(deps, message.run_id, message.site_domain, self.pages.values(),
                                 on_answer=self._keep if self.keeper is not None else None)
        self.rendered: dict[str, PageRead] = {}  # pages read by the browser, by page (their DOMs feed discovery)
        self.render_facts: dict[str, dict[str, Any]] = {}  # recorded on the ledger at the batch's end
        self.records: list[FetchRecord] = []  # settled, not yet written
        self.waiting: list[tuple[RunPage, FetchResult]] = []  # fetched, not yet handed to extraction
        self.extracting: list[tuple[list[tuple[RunPage, FetchResult]], Future[list[ExtractedPage]]]] = []
        self.extracted: list[tuple[tuple[RunPage, FetchResult], ExtractedPage]] = []  # not yet checked
        self.answered: set[str] = set()
        self.unhanded: dict[str, float] = {}  # fetched, not yet handed off: when (see _stream)
        self.published = 0  # how many of ``handed`` went to snapshot already
        # In-process only (see hand_on): on Pub/Sub each message is an invocation of its own, billed as such.
        self.streams = deps.local_bus is not None and not self.reader.renders
        self.counts: Counter[str] = Counter()
        self.store_failures: list[GleanerError] = []

    def read(self, fetcher: Fetcher, *, stop_at: float | None = None) -> None:
        """Step 1: every page as the reader reads it, each taken in as it comes (its fetch is ``fetcher``'s;
        a page that could not start by ``stop_at`` is not read)."""
        for read in self.reader.read(fetcher, stop_at=stop_at):
            self.read_one(read)

    def _keep(self, page: RunPage, result: FetchResult) -> None:
        """A fresh answer kept before anything else is done with it: a kill -9 now costs no request."""
        if self.keeper is not None:
            self.keeper.keep(page.url_hash, result)

    def read_one(self, read: PageRead) -> None:
        """One page in as read: its outcome recorded, or the page queued for extraction."""
        page, result = read.page, read.result
        self.answered.add(page.document_id)
        if read.store_failure is not None:
            self.store_failures.append(read.store_failure)
            self.records.append(_record(page, result, None))
            return
        self.deps.observer.page_fetched(self.message.run_id)
        if read.render_facts is not None:
            self.render_facts[page.document_id] = read.render_facts
        if read.superseded_by is not None:
            self.records.append(_record(page, result, None, superseded_by=read.superseded_by))
        elif result.outcome is FetchOutcome.FETCHED:
            if read.rendered:
                self.rendered[page.document_id] = read
            self.unhanded[page.document_id] = time.monotonic()
            self.waiting.append((page, result))
            if len(self.waiting) >= PAGES_PER_EXTRACTION:
                self.extract()
        else:
            self.records.append(_record(page, result, None))
        self.settle(block=False)

    def extract(self) -> None:
        """Step 2: hand the queued pages to the extraction pool as one task."""
        if not self.waiting:
            return
        items = [(result.body or b"", result.charset, result.final_url or page.fetch_url, result.content_type)
                 for page, result in self.waiting]
        self.extracting.append((list(self.waiting), self.deps.extract_pool.submit(items)))
        self.waiting.clear()

    def settle(self, block: bool) -> None:
        """Step 3: hand off extracted pages (the finished ones, or all when ``block``), then write."""
        while self.extracting and (block or self.extracting[0][1].done()):
            fetched_pages, future = self.extracting.pop(0)
            self.extracted.extend(zip(fetched_pages, future.result(), strict=True))
        if self.streams and not block:
            self._stream()
            return
        # The blocklist is asked about several extraction tasks' pages at once: each question is a transaction.
        if self.extracted and (block or len(self.extracted) >= RECORDS_PER_WRITE):
            done = list(self.extracted)
            self.extracted.clear()
            self._hand_off(done)
        self.write(block)

    def _hand_off(self, done: list[tuple[tuple[RunPage, FetchResult], ExtractedPage]]) -> None:
        message = self.message
        # Erased content never comes back: not at its own URL, not at another (seed 004's blocklist).
        erased = self.deps.blocklist.refused(message.site_domain, {
            page.document_id: (page.canonical_url.encode("utf-8"), extracted.content, extracted.canonical.text)
            for (page, _result), extracted in done})
        for (page, result), extracted in done:
            self.unhanded.pop(page.document_id, None)
            if extracted.refused is not None:  # a document nothing could be read from (an unreadable PDF)
                self.records.append(_record(page, replace(result, outcome=FetchOutcome.REFUSED_CONTENT,
                                                          reason=extracted.refused, body=None), None))
                continue
            if page.document_id in erased:
                self.records.append(FetchRecord(page.document_id, str(FetchOutcome.REFUSED_ERASED),
                                                "content was erased", result.status, result.elapsed_ms,
                                                len(result.body or b""), None, None))
                continue
            try:
                handed = _hand_off(self.deps, message, page, result, extracted)
            except GleanerError as exc:
                # Storage failed, not the site: fetching the page again cannot help, so the page is
                # settled as not stored (a redelivery would ask the site for the whole batch again).
                self.store_failures.append(exc)
                self.records.append(_record(page, result, extracted.title, outcome=FetchOutcome.STORE_FAILED,
                                            reason=f"blob store: {exc}"[:500]))
                continue
            if page.document_id in self.rendered:
                handed = replace(handed, render_mode=self.rendered[page.document_id].render_mode)
            self.handed.append(handed)
            self.records.append(_record(page, result, extracted.title, handed))

    def record_render_facts(self) -> None:
        """At the batch's end: the fetch facts of each page the browser was asked to read, on its ledger row
        (one statement)."""
        record_render_facts(self.deps.engine, self.message.run_id, self.render_facts)
        self.render_facts.clear()

    def rendered_doms(self) -> list[tuple[RunPage, bytes, str]]:
        """The handed pages' rendered DOMs and their URLs: the pages they link to may join the run."""
        handed = {page.document_id for page in self.handed}
        return [(read.page, read.result.body or b"", read.result.final_url or read.result.url)
                for doc, read in self.rendered.items() if doc in handed]

    def write(self, block: bool) -> None:
        """Step 4: record settled pages when enough are in hand (all of them when ``block``)."""
        if self.records and (block or _write_due(self.records)):
            _write(self.deps, self.message.run_id, self.records, self.counts)

    def _stream(self) -> None:
        """Steps 2-5 while an in-process batch goes on: fetched pages are handed off, recorded and handed on
        to snapshot when ten are extracted, and, while the run's earlier pages are stored already and fewer
        runs' are being stored than there are cores, when the batch's last fetch is next, when the pages not
        yet handed on are twice as many as those left to fetch, or when the oldest of them has waited
        ``HAND_ON_AFTER`` seconds and the machine's cores have room.

        By count alone, a polite host's pages went on in lumps of ten and more, and every run's last lump
        was stored after its last request: the tail of a crawl of many hosts that end together. The lumps
        shrink towards the end (15, 10, 3 of 30 pages), so only the last page or two are stored after the
        last request. By age, a slow host's first pages go while the cores idle through the hosts' delays
        (by count, the first lump of 30 pages went at the 15th, and fifty hosts' first lumps went together,
        a burst that held every host's next request back). A lump is a few messages more, and each costs
        snapshot and ingest their transactions: while the run's earlier pages are still being stored, or
        the cores are the limit, the pages wait to go with the next ones, and the bus merges what waits
        (one snapshot and one ingest message of a run at a time). The pages due are extracted at once and
        waited for (the fetches go on meanwhile, on the fetch loop), so they go on before the next answer
        comes, however long the host's delay."""
        left = len(self.pages) - len(self.answered)  # none: the batch's end hands on what is left
        unhanded = len(self.unhanded)
        due = left > 0 and unhanded >= 2 and not self._storing() and (
            left == 1 or unhanded >= 2 * left
            or (time.monotonic() - min(self.unhanded.values()) >= HAND_ON_AFTER and GAUGE.busy() < SPARE_BELOW))
        if due:
            self.extract()
            while self.extracting:
                fetched_pages, future = self.extracting.pop(0)
                self.extracted.extend(zip(fetched_pages, future.result(), strict=True))
        if due or len(self.extracted) >= PAGES_PER_SNAPSHOT:
            done = list(self.extracted)
            self.extracted.clear()
            self._hand_off(done)
            self.write(block=True)
            self.hand_on(block=False)
        else:
            self.write(block=False)

    def _storing(self) -> bool:
        """Whether the run's pages handed on before are still being snapshotted or ingested, or as many runs'
        as there are cores: then pages handed on now would wait behind them and cost a message more (when
        the cores cannot keep up with many hosts, a run's lumps stay few and large)."""
        bus = self.deps.local_bus
        if bus is None:
            return False
        topics = (PagesFetched.topic, SnapshotsWritten.topic)
        # Other runs' pages being stored on every core: an early lump would only wait for a core too.
        return bus.busy(self.message.run_id, topics) or bus.runs_busy(topics) >= (os.cpu_count() or 1)

    def hand_on(self, block: bool) -> bool:
        """Step 5: publish the recorded pages not yet handed to snapshot (all of them when ``block``, else
        all but the last); whether a message went.

        Published while the batch still fetches, snapshot and ingest of its first pages overlap the
        host's delay instead of all following its last page. Only recorded pages go (their outcomes are
        written just before), and one of them always waits for the batch's end, so the run cannot finish
        before its batch has. A batch the browser renders hands on once, at its end: the pages its
        renderings link to join the run before any of its pages is snapshotted."""
        pages = self.handed[self.published:] if block else self.handed[self.published:-1]
        if not pages:
            return False
        self.published += len(pages)
        message = self.message
        self.deps.bus.publish(PagesFetched(run_id=message.run_id, site_domain=message.site_domain,
                                           batch_no=message.batch_no, pages=tuple(pages)),
                              ordering_key=message.site_domain)
        return True


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
