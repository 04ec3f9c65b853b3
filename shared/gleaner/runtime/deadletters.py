"""Record the failure of a message that will not be delivered again.

Called for a message that reached the dead-letter topic, and for a Cloud Tasks
task on its last attempt, so that nothing accepted disappears silently: the
URLs of a scrape batch get the ``unavailable`` outcome with the reason (and the
run can finish), a run that could not be mapped or sampled is marked failed,
a snapshot batch that died leaves the run partial, and an ingest failure is
noted on the run. Every write is conditional, so recording twice (dead-letter
topics may deliver twice, FACTS.md) changes nothing more.
"""

from __future__ import annotations

import logging

from gleaner.app import Deps
from gleaner.decide.port import Verdict
from gleaner.fetch.types import FetchOutcome
from gleaner.messages import CrawlMapped, CrawlRequested, Message, PagesFetched, ScrapeBatch, SnapshotsWritten
from gleaner.stages.upkeep import finish_run
from gleaner.store.ledger.records import FetchRecord
from gleaner.store.ledger.runstate import RunStatus

log = logging.getLogger(__name__)

# Runs that have not reached scraping fail as a whole when a stage before scrape gives up.
_BEFORE_SCRAPE = (RunStatus.QUEUED, RunStatus.MAPPING, RunStatus.MAPPED, RunStatus.SAMPLING)


def record_failure(message: Message, deps: Deps, reason: str) -> None:
    from gleaner.stages import acting_for

    with acting_for(message):
        _record(message, deps, reason)


def _record(message: Message, deps: Deps, reason: str) -> None:
    meta = deps.metadata
    log.error("giving up on %s: %s", type(message).__name__, reason)
    if isinstance(message, CrawlRequested | CrawlMapped):
        meta.set_run_status(message.run_id, RunStatus.FAILED, only_from=_BEFORE_SCRAPE, error=reason)
    elif isinstance(message, ScrapeBatch):
        pending = [p for p in meta.run_pages(message.run_id, message.document_ids)
                   if p.decision == Verdict.INCLUDE and p.fetch_outcome is None]
        meta.record_fetches(message.run_id, [
            FetchRecord(p.document_id, FetchOutcome.UNAVAILABLE, reason[:500], None, 0, None, None, None)
            for p in pending])
        finish_run(deps, message.run_id)  # fetched bodies go if that settled the run
    elif isinstance(message, PagesFetched):
        meta.set_run_status(message.run_id, RunStatus.PARTIAL, only_from=(RunStatus.SCRAPING,),
                            error=f"snapshot of batch {message.batch_no}: {reason}")
    elif isinstance(message, SnapshotsWritten) and message.run_id is not None:
        meta.record_run_error(message.run_id, f"ingest: {reason}")
