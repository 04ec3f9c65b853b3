"""No site holds more scrape instances than its politeness can use.

A site allows one request to start per delay and ``concurrency`` in flight; its batches beyond
that many would each hold a function instance (billed) only to wait for turns the others take.
So a scrape task first takes one of its site's batch slots (``knowledge.site_leases``, as many as
the site's concurrency); a task that finds them all taken is handed back to the queue to come back
when the first holder expects to be done (Cloud Tasks ``schedule_time``), and answers at once::

    slot free            -> run the batch, give the slot back when it ends (whatever happened)
    every slot taken     -> a new task for the same batch (its own name) at its turn: the holder's
                            expected end, behind the batches already sent away (a batch back at its
                            turn that finds the holder late waits for the holder only); answer 200:
                            Cloud Tasks counts no failed attempt, no instance waits
    database unreachable -> RetryableError: the task is delivered again

On by the same switch as the turns shared across processes (``GLEANER_SHARED_POLITENESS``): both
exist because several instances crawl one site at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from gleaner.app import Deps
from gleaner.messages import ScrapeBatch
from gleaner.store.siteleases import SiteLease, SiteLeases

log = logging.getLogger(__name__)

# Added to a batch's expected time before a holder that died lets its slot go: a live holder's
# last request may take its whole fetch timeout, and writing its outcomes takes a little more.
LEASE_MARGIN_SECONDS = 60.0
# A waiting batch comes back no sooner than this: a holder past its expected end is still working,
# and looking every instant would be the database polling this replaces.
MIN_DEFER_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Deferred:
    """The batch went back to the queue, to come back in ``seconds``."""

    seconds: float
    task_name: str


def expected_seconds(pages: int, spacing: float, soft_deadline: float) -> float:
    """How long a batch of ``pages`` should hold its slot: one start per ``spacing`` (the next batch's
    first request waits one spacing after this one's last anyway), never past the soft deadline at
    which it hands the rest on. Waiters come back then: sooner would find the slot still held, and
    every second later is a second the site is not crawled."""
    return min(pages * spacing, soft_deadline)


def politeness(deps: Deps, site: str) -> tuple[float, int]:
    """The site's (spacing, concurrency) as its fetches would see them (:class:`HostTable` precedence)."""
    s = deps.settings
    state = deps.host_table.get(site, default_delay=s.host_delay, default_concurrency=s.host_concurrency,
                                sources=s.politeness_sources)
    return max(state.delay, state.crawl_delay), state.concurrency


def take(deps: Deps, batch: ScrapeBatch) -> SiteLease | Deferred | None:
    """A slot for the batch, or the batch handed back to the queue; None when slots are not in use."""
    if not deps.settings.shared_politeness:
        return None
    spacing, concurrency = politeness(deps, batch.site_domain)
    s = deps.settings
    expected = expected_seconds(len(batch.document_ids), spacing, s.scrape_soft_deadline)
    # A batch already sent away once came back at its turn: it does not go behind the others again.
    got = SiteLeases(deps.engine).take(batch.site_domain, slots=concurrency, expected=expected,
                                       lease=expected + 2 * s.fetch_timeout + LEASE_MARGIN_SECONDS,
                                       queue=batch.deferrals == 0)
    if isinstance(got, SiteLease):
        return got
    wait = max(MIN_DEFER_SECONDS, got)
    again = replace(batch, deferrals=batch.deferrals + 1)
    deps.bus.defer(again, wait)
    log.info("batch %s of %s waits %.1fs for its site's turn as %s", batch.task_name, batch.site_domain, wait,
             again.task_name)
    return Deferred(wait, again.task_name)


def give_back(deps: Deps, lease: SiteLease | None) -> None:
    """Free the batch's slot; a failure only logs (the lease runs out by itself)."""
    if lease is None:
        return
    from gleaner.errors import RetryableError

    try:
        SiteLeases(deps.engine).give_back(lease)
    except RetryableError as exc:
        log.warning("%s", exc)
