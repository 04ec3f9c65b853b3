"""Stage 3, scrape: fetch one batch (≤100 include URLs), extract, record a status for every URL.

Conditional GETs use the stored ETag / Last-Modified of pages that have a
snapshot; a 304 settles the page as unchanged with no body. Extraction runs in
the extract pool while other fetches are in flight. A page whose content hash
equals its current snapshot writes no blob at all; others leave content.md and
raw.md as run-scoped artefacts for the snapshot stage. Pages already settled in
this run (a redelivered task) are skipped. Pages map's walk or sample's sample
already asked for in this run are not asked again: their kept answers
(store/ledger/fetchonce.py) are settled as if this stage had fetched them, and so are the answers an earlier
delivery of the batch got and kept before it died (stages/answerkeep.py). A batch of a run that is no longer
scraping (cancelled, interrupted, ended by a storage failure) fetches nothing.

A body the blob store will not take settles its page as ``store-failed`` and
ends the run (partial if it stored anything, else failed): the store failed, not
the site, so the site is never asked for the page again in this run.

Outcomes are written every few pages as they settle, not only at the end (on the in-process bus
the written pages go on to snapshot at once, a few at a time:
:meth:`~gleaner.stages.scrapebatch.BatchScrape.hand_on`; the batch's steps are in
:mod:`gleaner.stages.scrapebatch`), and the batch has a soft deadline
(``GLEANER_SCRAPE_SOFT_DEADLINE``, under the function's timeout): past it no new fetch starts, and
the URLs not started go to a new task, part + 1 of the same batch under its own deterministic name.
A long Crawl-delay or a slow host therefore costs more tasks, never a killed batch that recorded nothing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from gleaner.app import Deps
from gleaner.changes import outbox
from gleaner.decide.port import Verdict
from gleaner.logs import Event
from gleaner.messages import PagesFetched, ScrapeBatch
from gleaner.stages.foundlinks import add_rendered_links, decide_found
from gleaner.stages.scrapebatch import BatchScrape
from gleaner.stages.upkeep import finish_run
from gleaner.store.ledger.runstate import RunStatus

log = logging.getLogger(__name__)


def handle(message: ScrapeBatch, deps: Deps) -> PagesFetched:
    meta = deps.metadata
    status = meta.touch_run(message.run_id)
    if status is not RunStatus.SCRAPING:
        # Cancelled, interrupted, failed (the blob store gave up) or already finished: ask the site nothing.
        log.info("run %s is %s: batch %d is not fetched", message.run_id, status, message.batch_no)
        return PagesFetched(run_id=message.run_id, site_domain=message.site_domain, batch_no=message.batch_no,
                            pages=())
    stop_at = time.monotonic() + deps.settings.scrape_soft_deadline
    included = [p for p in meta.run_pages(message.run_id, message.document_ids) if p.decision == Verdict.INCLUDE]
    batch = BatchScrape(deps, message, included)
    with deps.new_fetcher(run_id=message.run_id) as fetcher:
        batch.read(fetcher, stop_at=stop_at)
        batch.extract()  # the last pages' extraction starts while the fetcher closes
    batch.settle(block=True)
    batch.record_render_facts()
    if batch.store_failures:
        ended = meta.end_run_unstored(
            message.run_id, f"blob store failed: {batch.store_failures[0]}; {len(batch.store_failures)} fetched pages "
            f"of batch {message.batch_no} not stored, later batches not fetched")
        if ended is not None:
            log.error("run %s ends %s: the blob store failed (%s)", message.run_id, ended, batch.store_failures[0])
    left = [doc for doc in batch.pages if doc not in batch.answered]
    found = _found_by_rendering(deps, message, batch)
    if left or found:
        # The soft deadline passed before these could start, or rendered pages linked to pages new to the run:
        # a new task (its own name) takes them on.
        deps.bus.enqueue(replace(message, document_ids=tuple(left + found), part=message.part + 1,
                                 queued=False, woken=False))
    counts = batch.counts
    log.info("scraped batch %s part %s: %s fetched, %s not modified, %s failed, %s handed on",
             message.batch_no, message.part, counts["fetched"], counts["not-modified"], counts["failed"], len(left),
             extra={"fields": {"event": Event.SCRAPE_BATCH.value, "pages_fetched": counts["fetched"],
                               "pages_not_modified": counts["not-modified"], "pages_failed": counts["failed"],
                               "pages_handed_on": len(left)}})
    out = PagesFetched(run_id=message.run_id, site_domain=message.site_domain, batch_no=message.batch_no,
                       pages=tuple(batch.handed))
    if not batch.hand_on(block=True) and not left and not found:
        finish_run(deps, message.run_id)  # fetched bodies go if that settled the run
    outbox.flush_after_commit(deps)  # status changes (removed, restored) recorded with the fetch outcomes
    return out


def _found_by_rendering(deps: Deps, message: ScrapeBatch, batch: BatchScrape) -> list[str]:
    """Pages new to the run that this batch's rendered pages link to, decided and put in this batch
    (stages/foundlinks.py).

    Only handed pages' links: those pages wait for their snapshot, so the run cannot finish before the
    pages they found are in its ledger."""
    sources = batch.rendered_doms()
    if not sources:
        return []
    urls = add_rendered_links(deps, message.run_id, message.site_domain, sources)
    return decide_found(deps, message.run_id, message.site_domain, urls, message.batch_no) if urls else []
