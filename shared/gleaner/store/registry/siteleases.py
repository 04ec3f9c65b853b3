"""Scrape batches of one site running at once, capped in PostgreSQL (``knowledge.site_leases``).

A site's politeness lets one request start per delay however many of its batches are dispatched, so
a batch beyond the site's concurrency would hold a function instance only to wait for turns another
batch is taking. Each slot is a row; a scrape task takes a free one for its batch
(:meth:`SiteLeases.take`) or is given a time to come back, and gives it back when the batch ends
(:meth:`SiteLeases.give_back`). The times queue up: the first batch sent away comes back when the
holder expects to be done, the next when that one should be, and so on (``queued_until``), so ten
waiting batches come back one after another rather than ten at once with nine sent away again. Each
is one short transaction, serialised per site by a transaction-scoped advisory lock (the count is a
property of all the site's slots). A holder that dies lets go when ``lease_until`` passes. Times are
the database's clock, the one every instance shares.

A batch sent away is also written down (``knowledge.site_waiters``, with its task) so the holder that
gives its slot back names the oldest one to send at once (:meth:`SiteLeases.give_back`): a holder done
early does not leave the slot idle until its expected end. The waiter's delayed task stays as the
fallback; whichever copy arrives first takes the row (``claim``), the other finds it gone. That
fallback is scheduled inside the transaction that writes the waiter down (``schedule``): if scheduling
fails, neither the new row nor a claimed row's deletion commits, so the task's retry finds its row
again rather than taking itself for its other copy and leaving a waiter nobody sends for.

A holder slower than its expected time keeps its slot by renewing the lease while it works
(:meth:`SiteLeases.renew`); one that dies stops renewing and lets go.

Errors: a database failure is a :class:`~gleaner.errors.RetryableError` (the task is delivered
again).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.errors import RetryableError

# A waiter row older than this is dropped: its batch's both copies were lost (its run is long swept).
WAITER_KEEP_SECONDS = 86_400.0
# The advisory-lock key space of these claims (the second argument of hashtextextended).
_LOCK_SEED = 0x51AE1E


@dataclass(frozen=True, slots=True)
class SiteLease:
    """A batch's slot on its site; given back with :meth:`SiteLeases.give_back`."""

    site: str
    slot: int
    holder: str


@dataclass(frozen=True, slots=True)
class Waiter:
    """A batch sent away to wait for a slot: its deferred task's name and its encoded task."""

    task: str
    body: bytes


class SiteLeases:
    """Per-site batch slots in PostgreSQL."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def take(self, site: str, *, slots: int, expected: float, lease: float, queue: bool = True,
             claim: str | None = None, wait_as: Waiter | None = None,
             schedule: Callable[[float], object] | None = None) -> SiteLease | float | None:
        """A slot for a batch expected to take ``expected`` seconds (held at most ``lease``), or the
        seconds until its turn: the holder's expected end, behind the batches already waiting when
        ``queue`` (a batch coming back at its turn to find the holder late waits for the holder only).

        ``claim`` names the waiter row of a batch that was written down (its task name): None when the
        row is gone, because the batch's other copy (woken, or the fallback) took it and runs it. When
        every slot is taken, ``wait_as`` is written down as a waiter, keeping a claimed row's place, and
        ``schedule`` is called with the wait before that commits (an error it raises undoes both)."""
        holder = str(uuid.uuid4())
        try:
            with self.engine.begin() as conn:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:s, :seed))"),
                             {"s": site, "seed": _LOCK_SEED})
                since = None
                if claim is not None:
                    since = conn.execute(sa.text("DELETE FROM knowledge.site_waiters WHERE task = :t"
                                                 " RETURNING queued_at"), {"t": claim}).scalar()
                    if since is None:
                        return None
                conn.execute(sa.text(
                    "INSERT INTO knowledge.site_leases (site, slot) SELECT :s, n FROM generate_series(0, :k - 1) AS n"
                    " ON CONFLICT DO NOTHING"), {"s": site, "k": slots})
                rows = conn.execute(sa.text(
                    "SELECT slot, holder IS NOT NULL AND lease_until > clock_timestamp(),"
                    " GREATEST(0, EXTRACT(EPOCH FROM GREATEST(expected_at, queued_until) - clock_timestamp())),"
                    " GREATEST(0, EXTRACT(EPOCH FROM expected_at - clock_timestamp()))"
                    " FROM knowledge.site_leases WHERE site = :s AND slot < :k ORDER BY slot"),
                    {"s": site, "k": slots}).all()
                free = [int(r[0]) for r in rows if not r[1]]
                if not free and wait_as is not None:
                    conn.execute(sa.text(
                        "INSERT INTO knowledge.site_waiters (task, site, batch, queued_at)"
                        " VALUES (:t, :s, :b, COALESCE(CAST(:since AS timestamptz), clock_timestamp()))"
                        " ON CONFLICT (task) DO NOTHING"),
                        {"t": wait_as.task, "s": site, "b": wait_as.body, "since": since})
                if not free and not queue:
                    wait = min(float(r[3]) for r in rows)
                    if schedule is not None:
                        schedule(wait)
                    return wait
                if not free:
                    wait, slot = min((float(r[2]), int(r[0])) for r in rows)
                    conn.execute(sa.text(  # the next batch sent away waits behind this one
                        "UPDATE knowledge.site_leases SET queued_until = clock_timestamp()"
                        " + make_interval(secs => :until) WHERE site = :s AND slot = :n"),
                        {"until": wait + expected, "s": site, "n": slot})
                    if schedule is not None:
                        schedule(wait)
                    return wait
                conn.execute(sa.text(
                    "UPDATE knowledge.site_leases SET holder = CAST(:u AS uuid),"
                    " expected_at = clock_timestamp() + make_interval(secs => :expected),"
                    " lease_until = clock_timestamp() + make_interval(secs => :lease)"
                    " WHERE site = :s AND slot = :n"),
                    {"u": holder, "expected": expected, "lease": lease, "s": site, "n": free[0]})
        except sa.exc.DBAPIError as exc:
            raise RetryableError(f"cannot take a batch slot on {site}: {exc}") from exc
        return SiteLease(site, free[0], holder)

    def renew(self, lease: SiteLease, seconds: float) -> bool:
        """Hold the slot at least ``seconds`` more (a lease never shortens); False when it is no longer
        this holder's (its lease ran out and another batch took it)."""
        try:
            with self.engine.begin() as conn:
                return bool(conn.execute(sa.text(
                    "UPDATE knowledge.site_leases SET lease_until = GREATEST(lease_until,"
                    " clock_timestamp() + make_interval(secs => :secs))"
                    " WHERE site = :s AND slot = :n AND holder = CAST(:u AS uuid)"),
                    {"secs": seconds, "s": lease.site, "n": lease.slot, "u": lease.holder}).rowcount)
        except sa.exc.DBAPIError as exc:
            raise RetryableError(f"cannot renew the batch slot on {lease.site}: {exc}") from exc

    def robots_bodies(self, run_id: str) -> list[bytes]:
        """The robots.txt bodies the run's fetches obey (``crawl_run_robots``, as its tenant reads them)."""
        try:
            with self.engine.connect() as conn:
                return [bytes(b) for b in conn.execute(sa.text(
                    "SELECT body FROM knowledge.crawl_run_robots WHERE run_id = :r AND body IS NOT NULL"),
                    {"r": run_id}).scalars()]
        except sa.exc.DBAPIError as exc:
            raise RetryableError(f"cannot read the robots.txt of run {run_id}: {exc}") from exc

    def give_back(self, lease: SiteLease) -> Waiter | None:
        """Free the slot (a no-op if its lease ran out and another batch took it); the oldest waiter not
        yet sent for, now marked sent for, which the caller sends at once."""
        try:
            with self.engine.begin() as conn:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:s, :seed))"),
                             {"s": lease.site, "seed": _LOCK_SEED})
                freed = conn.execute(sa.text(
                    "UPDATE knowledge.site_leases SET holder = NULL, expected_at = NULL, lease_until = NULL"
                    " WHERE site = :s AND slot = :n AND holder = CAST(:u AS uuid)"),
                    {"s": lease.site, "n": lease.slot, "u": lease.holder}).rowcount
                if not freed:
                    return None
                # Rows whose both copies were lost (a purged queue) would wait here for ever.
                conn.execute(sa.text("DELETE FROM knowledge.site_waiters WHERE site = :s"
                                     " AND queued_at < clock_timestamp() - make_interval(secs => :keep)"),
                             {"s": lease.site, "keep": WAITER_KEEP_SECONDS})
                row = conn.execute(sa.text(
                    "UPDATE knowledge.site_waiters SET woken_at = clock_timestamp() WHERE task = ("
                    " SELECT task FROM knowledge.site_waiters WHERE site = :s AND woken_at IS NULL"
                    " ORDER BY queued_at, task LIMIT 1) RETURNING task, batch"), {"s": lease.site}).first()
        except sa.exc.DBAPIError as exc:
            raise RetryableError(f"cannot give back the batch slot on {lease.site}: {exc}") from exc
        return Waiter(str(row[0]), bytes(row[1])) if row is not None else None

    def unwake(self, waiter: Waiter) -> None:
        """The waiter could not be sent for: the next slot given back sends for it again."""
        try:
            with self.engine.begin() as conn:
                conn.execute(sa.text("UPDATE knowledge.site_waiters SET woken_at = NULL WHERE task = :t"),
                             {"t": waiter.task})
        except sa.exc.DBAPIError as exc:
            raise RetryableError(f"cannot put back the waiter {waiter.task}: {exc}") from exc
