"""The scrape stage's ledger write of fetch outcomes: the run's ledger row and its document.

Each page's ``fetch_outcome`` is set once (a redelivered batch finds it set and
writes nothing more); only the pages this call settled update their documents'
validators, title and fetch times, and move their status (the lifecycle in
``gleaner.changes.lifecycle``, with its change events). Dead letters record their
unavailable pages here too. The scrape stage sends pages that answered 304
through notmodified.py, one cheaper statement; a not-modified record passed here
is still settled as unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gleaner.changes.lifecycle import FetchFacts
from gleaner.store.backends.sqlstore import SqlStore, text
from gleaner.store.documents.lifecycle import settle_fetches
from gleaner.store.ledger.notmodified import record_not_modified as store_not_modified
from gleaner.store.ledger.records import FetchRecord


class FetchStore(SqlStore):
    def record_not_modified(self, run_id: str, records: Sequence[FetchRecord]) -> None:
        """Settle the run's pages that answered 304 in one lean statement (see ``notmodified.py``)."""
        store_not_modified(self.engine, run_id, records)

    def record_fetches(self, run_id: str, records: Sequence[FetchRecord]) -> None:
        """Record each URL's fetch outcome once; a not-modified page is settled as unchanged here."""
        if not records:
            return
        cols: dict[str, list[Any]] = {
            k: [] for k in ("d", "o", "why", "st", "ms", "sz", "et", "lm", "ti", "ch", "rh", "ex", "sup", "ref")
        }
        for r in records:
            for key, value in zip(
                cols,
                (r.document_id, r.outcome, r.reason, r.status, r.time_ms, r.byte_size, r.etag, r.last_modified,
                 r.title, r.content_hash, r.raw_hash, r.extractor, r.superseded_by, r.refused),
                strict=True,
            ):
                cols[key].append(value)
        with self._tx() as conn:
            updated = conn.execute(
                text(
                    "UPDATE knowledge.crawl_page_decisions c SET fetch_outcome = CAST(t.o AS knowledge.fetch_outcome),"
                    " fetch_reason = t.why, fetch_refused = t.ref, fetch_status = t.st, fetch_time_ms = t.ms,"
                    " byte_size = t.sz,"
                    " fetched_at = now(), fetched_content_hash = t.ch, fetched_raw_hash = t.rh, extractor = t.ex,"
                    " fetched_etag = t.et, fetched_last_modified = t.lm,"
                    " snapshot_outcome = CASE WHEN t.o = 'not-modified' OR t.sup IS NOT NULL"
                    "   THEN 'unchanged'::knowledge.snapshot_outcome ELSE c.snapshot_outcome END"
                    " FROM unnest(CAST(:d AS uuid[]), CAST(:o AS text[]), CAST(:why AS text[]), CAST(:st AS int[]),"
                    " CAST(:ms AS int[]), CAST(:sz AS int[]), CAST(:et AS text[]), CAST(:lm AS text[]),"
                    " CAST(:ti AS text[]), CAST(:ch AS text[]), CAST(:rh AS text[]), CAST(:ex AS text[]),"
                    " CAST(:sup AS text[]), CAST(:ref AS boolean[]))"
                    " AS t(d, o, why, st, ms, sz, et, lm, ti, ch, rh, ex, sup, ref)"
                    " WHERE c.run_id = :r AND c.document_id = t.d AND c.fetch_outcome IS NULL"
                    " RETURNING c.document_id"
                ),
                {"r": run_id, **cols},
            ).all()
            fresh = [str(row[0]) for row in updated]
            if not fresh:
                return
            conn.execute(
                text(
                    # New content's validators wait for its version (snapshots.py): stored beside the old
                    # version, a crash before the snapshot would turn the next run's fetch into a 304.
                    "UPDATE knowledge.documents d SET"
                    " http_etag = CASE WHEN t.o = 'fetched' AND t.ch = s.content_hash THEN t.et ELSE d.http_etag END,"
                    " http_last_modified = CASE WHEN t.o = 'fetched' AND t.ch = s.content_hash THEN t.lm"
                    "   ELSE d.http_last_modified END,"
                    " title = COALESCE(t.ti, d.title),"
                    " last_fetched_at = CASE WHEN t.o IN ('fetched', 'not-modified') THEN now()"
                    "   ELSE d.last_fetched_at END,"
                    " last_seen_at = CASE WHEN t.o = 'not-modified' THEN now() ELSE d.last_seen_at END,"
                    " updated_at = now()"
                    " FROM unnest(CAST(:d AS uuid[]), CAST(:o AS text[]), CAST(:et AS text[]), CAST(:lm AS text[]),"
                    " CAST(:ti AS text[]), CAST(:ch AS text[])) AS t(d, o, et, lm, ti, ch)"
                    " LEFT JOIN knowledge.documents cur ON cur.id = t.d"
                    " LEFT JOIN knowledge.document_snapshots s ON s.id = cur.current_snapshot_id"
                    " WHERE d.id = t.d AND t.d = ANY(CAST(:fresh AS uuid[]))"
                ),
                {"d": cols["d"], "o": cols["o"], "et": cols["et"], "lm": cols["lm"], "ti": cols["ti"],
                 "ch": cols["ch"], "fresh": fresh},
            )
            settled = set(fresh)
            settle_fetches(conn, run_id, [
                FetchFacts(r.document_id, r.outcome, r.status, r.reason, r.superseded_by)
                for r in records if r.document_id in settled])
