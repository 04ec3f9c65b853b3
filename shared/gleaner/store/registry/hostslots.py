"""Per-host request turns in PostgreSQL, shared by every process that fetches (``knowledge.host_slots``).

A host allows ``concurrency`` requests at once and one start every ``spacing`` seconds (the
larger of its delay and its Crawl-delay). Each slot is a row; a request takes a free slot
(:meth:`HostSlots.claim`) and gives it back (:meth:`HostSlots.release`), each in one short
transaction, so no lock is held while the request is in flight. The slot is a lease: a holder
that dies frees it when ``lease_until`` passes. Claims on one host are serialised by a
transaction-scoped advisory lock, because the spacing is a property of the whole host (all its
slots), which row locks on single slots cannot protect; claims on different hosts never wait
for each other. Times are the database's clock (``clock_timestamp()``), the one clock every
instance shares.

Errors: a database failure is a :class:`~gleaner.errors.RetryableError` (the batch is delivered
again; fetching on without the shared turns would break the politeness it exists for).
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.errors import RetryableError
from gleaner.fetch.politeness import Turn

# How soon a claimant looks again when every slot is taken and the host keeps no delay. With a
# delay there is no need to look sooner than one spacing: a holder's release pushes the host's next
# start to at least its release time plus the spacing, so no start can come before now + spacing.
BUSY_POLL_SECONDS = 0.1
# The advisory-lock key space of these claims (the second argument of hashtextextended).
_LOCK_SEED = 0x405715


class HostSlots:
    """The PostgreSQL implementation of :class:`gleaner.fetch.politeness.SharedTurns`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def claim(self, host: str, *, concurrency: int, spacing: float, lease: float) -> Turn | float:
        """A turn now, or the seconds to wait before asking again: until the host's next start when
        that is ahead, else (every slot held) one spacing, the earliest a start can follow a release."""
        holder = str(uuid.uuid4())
        try:
            with self.engine.begin() as conn:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:h, :seed))"),
                             {"h": host, "seed": _LOCK_SEED})
                rows: list[tuple[int, float, bool]] = [(int(r[0]), float(r[1]), bool(r[2])) for r in conn.execute(
                    sa.text(
                        "SELECT slot, EXTRACT(EPOCH FROM next_at - clock_timestamp()),"
                        " lease_until IS NOT NULL AND lease_until > clock_timestamp()"
                        " FROM knowledge.host_slots WHERE host = :h AND slot < :n ORDER BY slot"
                    ),
                    {"h": host, "n": concurrency},
                )]
                if len(rows) < concurrency:
                    conn.execute(
                        sa.text(
                            "INSERT INTO knowledge.host_slots (host, slot, next_at)"
                            " SELECT :h, s, clock_timestamp() FROM generate_series(0, :n - 1) AS s"
                            " ON CONFLICT DO NOTHING"
                        ),
                        {"h": host, "n": concurrency},
                    )
                    known = {r[0] for r in rows}
                    rows += [(s, -1.0, False) for s in range(concurrency) if s not in known]
                wait = max(r[1] for r in rows)
                if wait > 0:
                    return wait
                free = [r[0] for r in rows if not r[2]]
                if not free:
                    return max(spacing, BUSY_POLL_SECONDS)
                conn.execute(
                    sa.text(
                        "UPDATE knowledge.host_slots SET holder = CAST(:u AS uuid),"
                        " lease_until = clock_timestamp() + make_interval(secs => :lease),"
                        " next_at = clock_timestamp() + make_interval(secs => :spacing)"
                        " WHERE host = :h AND slot = :s"
                    ),
                    {"u": holder, "lease": lease, "spacing": spacing, "h": host, "s": free[0]},
                )
        except sa.exc.DBAPIError as exc:
            raise RetryableError(f"cannot claim a turn on {host}: {exc}") from exc
        return Turn(host, free[0], holder)

    def release(self, turn: Turn, *, pause: float) -> None:
        """Free the slot; the host's next request starts no sooner than ``pause`` seconds from now."""
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    sa.text(
                        "UPDATE knowledge.host_slots SET holder = NULL, lease_until = NULL,"
                        " next_at = GREATEST(next_at, clock_timestamp() + make_interval(secs => :pause))"
                        " WHERE host = :h AND slot = :s AND holder = CAST(:u AS uuid)"
                    ),
                    {"pause": pause, "h": turn.host, "s": turn.slot, "u": turn.holder},
                )
        except sa.exc.DBAPIError as exc:
            # The lease runs out by itself; the next claim then waits for it.
            raise RetryableError(f"cannot release the turn on {turn.host}: {exc}") from exc
