"""No site holds more scrape instances than its politeness can use.

A site allows one request to start per delay and ``concurrency`` in flight; its batches beyond
that many would each hold a function instance (billed) only to wait for turns the others take.
So a scrape task first takes one of its site's batch slots (``knowledge.site_leases``, as many as
the site's concurrency); a task that finds them all taken is handed back to the queue to come back
when the first holder expects to be done (Cloud Tasks ``schedule_time``), and answers at once::

    slot free            -> run the batch, renewing the slot's lease while it runs (a slow batch keeps
                            its slot), give the slot back when it ends (whatever happened), and send
                            the oldest batch waiting for the site at once (``-w``: woken), deleting
                            that batch's delayed task (its run would be a billed no-op)
    every slot taken     -> a new task for the same batch (its own name) at its turn: the holder's
                            expected end, behind the batches already sent away (a batch back at its
                            turn that finds the holder late waits for the holder only); answer 200:
                            Cloud Tasks counts no failed attempt, no instance waits. The batch is
                            also written down as a waiter, so the holder that finishes sends for it
                            then, early or late; its delayed task is the fallback (a holder that died),
                            scheduled before the waiter is written down for good: if scheduling fails
                            the task's retry finds its place again
    the other copy ran   -> (woken and fallback both arrived) nothing to do: answer 200
    database unreachable -> RetryableError: the task is delivered again

The spacing and concurrency are the run's (``crawl --delay/--concurrency`` recorded with the run, else
the site's, else the settings'), as its fetches keep them.

On by the same switch as the turns shared across processes (``GLEANER_SHARED_POLITENESS``): both
exist because several instances crawl one site at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from gleaner import tenancy
from gleaner.app import Deps
from gleaner.messages import ScrapeBatch, decode, encode
from gleaner.store.registry.siteleases import SiteLease, SiteLeases, Waiter

log = logging.getLogger(__name__)

# Added to a batch's expected time before a holder that died lets its slot go: a live holder's
# last request may take its whole fetch timeout, and writing its outcomes takes a little more.
LEASE_MARGIN_SECONDS = 60.0
# A holder renews its lease every this many seconds at most (less when its renewal window is short).
RENEW_EVERY_SECONDS = 30.0
# Past this, a batch's task has outlived its dispatch deadline (Cloud Tasks counts the attempt failed
# and sends it again): a holder still running then is stuck, and its slot is let go.
HOLD_AT_MOST_SECONDS = 1800.0
# A waiting batch comes back no sooner than this: looking every instant would be the database polling
# this replaces.
MIN_DEFER_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Deferred:
    """The batch went back to the queue, to come back in ``seconds``."""

    seconds: float
    task_name: str


@dataclass(frozen=True, slots=True)
class RunElsewhere:
    """The batch's other copy (woken, or the delayed fallback) took its turn: nothing to do here."""

    task_name: str


def expected_seconds(pages: int, spacing: float, soft_deadline: float) -> float:
    """How long a batch of ``pages`` should hold its slot: one start per ``spacing`` (the next batch's
    first request waits one spacing after this one's last anyway), never past the soft deadline at
    which it hands the rest on. Waiters come back then at the latest: a holder done sooner sends
    for the next one itself."""
    return min(pages * spacing, soft_deadline)


def politeness(deps: Deps, batch: ScrapeBatch) -> tuple[float, int]:
    """The site's (spacing, concurrency) as the batch's fetches will see them: the run's own politeness
    first (:meth:`Deps.run_settings`), then :class:`HostTable` precedence, and the largest Crawl-delay
    of the run's robots.txt (read before any batch; a fresh instance has not met the host yet, and a
    lease sized without it would run out while its holder still fetches)."""
    from gleaner.fetch.robots import RobotsRules

    with tenancy.scope(batch.site_domain):  # the run's options and robots.txt are its tenant's to read
        s = deps.run_settings(batch.run_id)
        bodies = SiteLeases(deps.engine).robots_bodies(batch.run_id)
    crawl_delay = max((RobotsRules.parse(body).crawl_delay or 0.0 for body in bodies), default=0.0)
    state = deps.host_table.get(batch.site_domain, default_delay=s.host_delay, default_concurrency=s.host_concurrency,
                                sources=s.politeness_sources)
    return max(state.delay, state.crawl_delay, crawl_delay), state.concurrency


def waiter_key(batch: ScrapeBatch) -> str:
    """The name of a written-down batch's row: its delayed task's, which its woken copy shares."""
    return replace(batch, woken=False).task_name


def take(deps: Deps, batch: ScrapeBatch) -> SiteLease | Deferred | RunElsewhere | None:
    """A slot for the batch, the batch handed back to the queue, or nothing to do (its other copy ran);
    None when slots are not in use."""
    if not deps.settings.shared_politeness:
        return None
    spacing, concurrency = politeness(deps, batch)
    s = deps.settings
    expected = expected_seconds(len(batch.document_ids), spacing, s.scrape_soft_deadline)
    again = replace(batch, deferrals=batch.deferrals + 1, queued=True, woken=False)
    waits: list[float] = []

    def schedule(turn: float) -> None:
        # Back at its turn to find the holder late: the holder sends for it when done, so the fallback
        # can wait a batch's time rather than ask again every second.
        waits.append(turn if turn >= MIN_DEFER_SECONDS else max(MIN_DEFER_SECONDS, expected))
        deps.bus.defer(again, waits[-1])

    # A batch already sent away once came back at its turn: it does not go behind the others again.
    got = SiteLeases(deps.engine).take(batch.site_domain, slots=concurrency, expected=expected,
                                       lease=expected + renewal_seconds(deps),
                                       queue=batch.deferrals == 0,
                                       claim=waiter_key(batch) if batch.queued else None,
                                       wait_as=Waiter(again.task_name, encode(again)), schedule=schedule)
    if got is None:
        log.info("batch %s of %s was run by its other copy", batch.task_name, batch.site_domain)
        return RunElsewhere(batch.task_name)
    if isinstance(got, SiteLease):
        return got
    wait = waits[-1]
    log.info("batch %s of %s waits %.1fs for its site's turn as %s", batch.task_name, batch.site_domain, wait,
             again.task_name)
    return Deferred(wait, again.task_name)


def renewal_seconds(deps: Deps) -> float:
    """How long a live holder may go without a word: its last request may take its whole fetch timeout
    (twice: a redirect), and writing its outcomes a little more."""
    return 2 * deps.settings.fetch_timeout + LEASE_MARGIN_SECONDS


@contextmanager
def kept(deps: Deps, lease: SiteLease | None) -> Iterator[None]:
    """Renew the batch's lease while the body runs, so a batch slower than its expected time (a slow
    host, a long Crawl-delay) keeps its slot and no second batch of the site takes an instance; one
    whose process died stops renewing and lets go a renewal window later."""
    if lease is None:
        yield
        return
    window = renewal_seconds(deps)
    every = min(RENEW_EVERY_SECONDS, window / 3)
    done = threading.Event()

    def renew() -> None:
        leases = SiteLeases(deps.engine)
        give_up_at = time.monotonic() + HOLD_AT_MOST_SECONDS
        while not done.wait(every) and time.monotonic() < give_up_at:
            try:
                if not leases.renew(lease, window):
                    log.warning("batch slot %s/%s was taken over: its lease ran out", lease.site, lease.slot)
                    return
            except Exception as exc:  # the database may be back by the next beat; the lease still holds
                log.warning("%s", exc)

    beat = threading.Thread(target=renew, name=f"lease-{lease.site}", daemon=True)
    beat.start()
    try:
        yield
    finally:
        done.set()
        beat.join(timeout=5.0)


def give_back(deps: Deps, lease: SiteLease | None) -> None:
    """Free the batch's slot and send the oldest batch waiting for it at once; a failure only logs (the
    lease runs out by itself, the waiter's delayed task comes anyway)."""
    if lease is None:
        return
    from gleaner.errors import RetryableError

    leases = SiteLeases(deps.engine)
    try:
        waiter = leases.give_back(lease)
    except RetryableError as exc:
        log.warning("%s", exc)
        return
    if waiter is None:
        return
    try:
        woken = replace(decode(waiter.body, ScrapeBatch), woken=True)
        assert isinstance(woken, ScrapeBatch)
        deps.bus.enqueue(woken)
        log.info("batch %s of %s goes now: the slot it waited for is free", woken.task_name, lease.site)
    except Exception as exc:  # the waiter's delayed task still comes; the next slot given back tries again
        log.warning("could not send for waiting batch %s: %s", waiter.task, exc)
        try:
            leases.unwake(waiter)
        except RetryableError as again:
            log.warning("%s", again)
        return
    try:  # its delayed copy would only find the batch gone: an invocation billed for nothing
        deps.bus.cancel(waiter.task)
    except Exception as exc:  # then it comes, and answers 200 doing nothing
        log.warning("could not delete the delayed task %s: %s", waiter.task, exc)
