"""A run's accounting: what it has spent of its budget, its counters, and finishing it exactly once.

Counters are recomputed from the ledger (``knowledge.crawl_page_decisions``),
never incremented, so a redelivered message cannot double-count. Recounting reads
the run's whole ledger, so while a run scrapes it is done after a batch only when
the counters are older than :data:`RECOUNT_SECONDS`; whatever ends a run recounts.
A run finishes (or ends partial) by one conditional UPDATE once every included
page is settled.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from gleaner.fetch.types import LIMITED_OUTCOMES, REFUSED_OUTCOMES
from gleaner.store.backends.sqlstore import SqlStore, text

# The status of a run some of whose pages could not be stored: partial if it stored any page, else failed.
UNSTORED_STATUS = (
    "CASE WHEN EXISTS (SELECT 1 FROM knowledge.crawl_page_decisions WHERE run_id = :r"
    " AND snapshot_outcome IS NOT NULL) THEN 'partial'::knowledge.crawl_status"
    " ELSE 'failed'::knowledge.crawl_status END"
)
# A ledger row the site failed to serve or that policy refused (DESIGN.md "Document lifecycle"): the
# fetcher records the address policy's refusals as unavailable, with fetch_refused set.
_REFUSED = (f"(fetch_outcome::text IN ({', '.join(repr(str(o)) for o in REFUSED_OUTCOMES)})"
            " OR (fetch_outcome = 'unavailable' AND fetch_refused))")
# A page Gleaner fetched but could not store (store-failed) counts as failed too: it was not kept, and
# the run's error says why; it is never refused (policy) nor limited.
_FAILED = f"(fetch_outcome IN ('unavailable', 'denied', 'store-failed') AND NOT {_REFUSED})"
_LIMITED = f"(fetch_outcome::text IN ({', '.join(repr(str(o)) for o in LIMITED_OUTCOMES)}))"
# How stale a scraping run's counters may be (progress only: they are exact once the run ends).
RECOUNT_SECONDS = 3.0


class CounterStore(SqlStore):
    def run_spent(self, run_id: str, counted: bool = True) -> tuple[int, int, float]:
        """What a run has used of its budget: (page fetches, body bytes, seconds since it started).

        The fetches and bytes are counted over the run's whole ledger; with ``counted`` false (the run
        has no such limit) they are 0 and only the seconds are read.
        """
        if not counted:
            seconds = self._scalar("SELECT EXTRACT(EPOCH FROM now() - COALESCE(started_at, now()))"
                                   " FROM knowledge.crawl_runs WHERE id = :r", {"r": run_id})
            return 0, 0, float(seconds or 0.0)
        row = self._first(
            # A page map or sample asked for (prefetched) was a request of this run even before
            # scrape settles it from that answer; it is counted once either way.
            "SELECT (SELECT count(*) FROM knowledge.crawl_page_decisions WHERE run_id = :r"
            "   AND (prefetched IS NOT NULL OR (fetch_outcome IS NOT NULL AND fetch_outcome <> 'exhausted'))),"
            " (SELECT COALESCE(sum(byte_size), 0) FROM knowledge.crawl_page_decisions WHERE run_id = :r),"
            " EXTRACT(EPOCH FROM now() - COALESCE(started_at, now()))"
            " FROM knowledge.crawl_runs WHERE id = :r",
            {"r": run_id},
        )
        return (int(row[0]), int(row[1]), float(row[2])) if row else (0, 0, 0.0)

    def refresh_counters(self, run_id: str) -> None:
        with self._tx() as conn:
            self._refresh_counters(conn, run_id)

    @staticmethod
    def _refresh_counters(conn: Connection, run_id: str, *, unless_fresh: bool = False) -> None:
        # Lock the run first, so the counting statement below starts after every concurrent refresh
        # committed and sees every ledger row they saw: an UPDATE … FROM counts with the snapshot of
        # its start and, if it then waits for the row lock, would write that stale count last.
        # A run that has ended is recounted whatever the age of its counters: a stage still in flight
        # when it ended (a snapshot written after a disk-full end) must not leave them stale.
        fresh = conn.execute(text(
            "SELECT counted_at > now() - make_interval(secs => :f) AND finished_at IS NULL"
            " FROM knowledge.crawl_runs WHERE id = :r FOR UPDATE"),
            {"r": run_id, "f": RECOUNT_SECONDS}).scalar()
        if unless_fresh and fresh:
            return
        conn.execute(
            text(
                "UPDATE knowledge.crawl_runs r SET"
                " urls_discovered = a.total, urls_included = a.included, urls_excluded = a.total - a.included,"
                " urls_scraped = a.fetched, urls_not_modified = a.not_modified, urls_failed = a.failed,"
                " urls_refused = a.refused, urls_limited = a.limited + r.urls_beyond_limit,"
                " snapshots_new = a.new, snapshots_changed = a.changed, snapshots_unchanged = a.unchanged,"
                " counted_at = clock_timestamp()"
                " FROM (SELECT count(*) AS total,"
                "   count(*) FILTER (WHERE decision = 'include') AS included,"
                "   count(*) FILTER (WHERE fetch_outcome = 'fetched') AS fetched,"
                "   count(*) FILTER (WHERE fetch_outcome = 'not-modified') AS not_modified,"
                f"   count(*) FILTER (WHERE {_FAILED}) AS failed,"
                f"   count(*) FILTER (WHERE {_REFUSED}) AS refused,"
                f"   count(*) FILTER (WHERE {_LIMITED}) AS limited,"
                "   count(*) FILTER (WHERE snapshot_outcome = 'new') AS new,"
                "   count(*) FILTER (WHERE snapshot_outcome = 'changed') AS changed,"
                "   count(*) FILTER (WHERE snapshot_outcome = 'unchanged') AS unchanged"
                "   FROM knowledge.crawl_page_decisions WHERE run_id = :r) a"
                " WHERE r.id = :r"
            ),
            {"r": run_id},
        )

    def try_finish_run(self, run_id: str) -> str | None:
        """Mark the run finished (or partial) once every included page is settled; the new status or None.

        The conditional UPDATE makes this exactly-once however deliveries interleave.
        """
        with self._tx() as conn:  # one transaction (one commit) for both: it runs after every batch
            self._refresh_counters(conn, run_id, unless_fresh=True)
            row = conn.execute(
                text(
                    "UPDATE knowledge.crawl_runs r SET"
                    " status = CASE WHEN EXISTS (SELECT 1 FROM knowledge.crawl_page_decisions"
                    f"   WHERE run_id = :r AND fetch_outcome = 'store-failed') THEN {UNSTORED_STATUS}"
                    "   WHEN EXISTS (SELECT 1 FROM knowledge.crawl_page_decisions"
                    "   WHERE run_id = :r AND fetch_outcome = 'exhausted') OR r.urls_beyond_limit > 0"
                    "   THEN 'partial'::knowledge.crawl_status"
                    "   ELSE 'finished'::knowledge.crawl_status END,"
                    " finished_at = now()"
                    " WHERE r.id = :r AND r.status = 'scraping' AND r.finished_at IS NULL AND NOT EXISTS ("
                    "   SELECT 1 FROM knowledge.crawl_page_decisions c WHERE c.run_id = :r AND c.decision = 'include'"
                    "   AND (c.fetch_outcome IS NULL OR (c.fetch_outcome = 'fetched' AND c.snapshot_outcome IS NULL)))"
                    " RETURNING status::text"
                ),
                {"r": run_id},
            ).first()
            if row is not None:
                self._refresh_counters(conn, run_id)  # the run ended: its counters exact, whatever their age
        return str(row[0]) if row else None
