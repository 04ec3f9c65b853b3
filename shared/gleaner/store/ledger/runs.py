"""The crawl ledger up to the scrape: source hosts, runs and their status, documents, run pages, batches.

The map stage creates the run, its documents and one ledger row per
(run, document) (``knowledge.crawl_page_decisions``); the sample stage decides
them (the statement lives in decisions.py) and assigns scrape batches. Creates are
keyed (``ON CONFLICT``) and the stage transitions are conditional on the run's status,
so a redelivered message finds its work done. A run's robots.txt decisions are kept
here too (runrobots.py is the mapping the fetcher reads them through).
The scrape's writes are in fetches.py and notmodified.py, the counters in counters.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from gleaner.store.backends.sqlstore import SqlStore, json_value
from gleaner.store.ledger import discovery
from gleaner.store.ledger.counters import CounterStore
from gleaner.store.ledger.decisions import PreviousSample
from gleaner.store.ledger.decisions import previous_samples as store_previous_samples
from gleaner.store.ledger.decisions import record_decisions as store_decisions
from gleaner.store.ledger.records import Decision, RunPage, SamplePage
from gleaner.store.ledger.runstate import RunStatus


class RunStore(SqlStore):
    # -- map ------------------------------------------------------------------------------------

    def upsert_source_host(self, site: str, host: str, own_site: bool) -> str:
        kind = "own_site" if own_site else "external_reference"
        row = self._write_first(
            "INSERT INTO knowledge.source_hosts (site_domain, host, kind) VALUES (:s, :h, :k)"
            " ON CONFLICT (site_domain, host) DO UPDATE SET updated_at = now() RETURNING id",
            {"s": site, "h": host, "k": kind},
        )
        return str(row[0])

    def host_politeness_for(self, host: str) -> tuple[float | None, int | None]:
        """The strictest delay and concurrency any tenant configured for a host (it is one server)."""
        row = self._first(
            "SELECT max(host_delay_seconds), min(host_concurrency) FROM knowledge.source_hosts"
            " WHERE host = :h",
            {"h": host},
        )
        return (row[0], row[1]) if row else (None, None)

    def run_robots(self, run_id: str, origin: str) -> tuple[str, str, bytes | None] | None:
        row = self._first("SELECT state, reason, body FROM knowledge.crawl_run_robots"
                          " WHERE run_id = :r AND origin = :o", {"r": run_id, "o": origin})
        return (str(row[0]), str(row[1]), bytes(row[2]) if row[2] is not None else None) if row else None

    def save_run_robots(self, run_id: str, origin: str, state: str, reason: str,
                        body: bytes | None) -> tuple[str, str, bytes | None]:
        """Store the run's decision for origin unless one exists; return the decision that stands."""
        self._run(
            "INSERT INTO knowledge.crawl_run_robots (run_id, origin, state, reason, body)"
            " VALUES (:r, :o, :s, :why, :b) ON CONFLICT (run_id, origin) DO NOTHING",
            {"r": run_id, "o": origin, "s": state, "why": reason, "b": body},
        )
        stored = self.run_robots(run_id, origin)
        return stored if stored is not None else (state, reason, body)

    def create_run(self, run_id: str, site: str, source_host_id: str, target_url: str, options: dict[str, Any],
                   mode: str, triggered_by: str, worker: str | None = None) -> bool:
        """True if this call created the run; False if it existed (a redelivered request).

        ``worker`` names the local process that drives the run (run control's liveness check)."""
        row = self._write_first(
            "INSERT INTO knowledge.crawl_runs (id, site_domain, source_host_id, target_url, options, mode,"
            " triggered_by, status, started_at, heartbeat_at, worker)"
            " VALUES (:id, :s, :h, :t, CAST(:o AS jsonb),"
            " CAST(:m AS knowledge.crawl_mode), CAST(:tb AS knowledge.crawl_trigger), 'mapping', now(), now(),"
            " :w)"
            " ON CONFLICT (id) DO NOTHING RETURNING id",
            {"id": run_id, "s": site, "h": source_host_id, "t": target_url, "o": json_value(options), "m": mode,
             "tb": triggered_by, "w": worker},
        )
        return row is not None

    def run_budget(self, run_id: str) -> dict[str, float]:
        """The run's own budget (a site's --max-*), as recorded by map; empty: the global settings."""
        budget = self._scalar(
            "SELECT options -> 'budget' FROM knowledge.crawl_runs WHERE id = :r",
            {"r": run_id},
        )
        return dict(budget or {})

    def run_status(self, run_id: str) -> str | None:
        status: str | None = self._scalar("SELECT status::text FROM knowledge.crawl_runs WHERE id = :r",
                                          {"r": run_id})
        return status

    def set_run_status(self, run_id: str, status: str, *, only_from: Sequence[str] = (),
                       error: str | None = None) -> bool:
        """Move a run to status (optionally only from the given statuses); True if it moved."""
        guard = " AND status::text = ANY(CAST(:from AS text[]))" if only_from else ""
        terminal = RunStatus(status).terminal
        finished = ", finished_at = COALESCE(finished_at, now())" if terminal else ""
        with self._tx() as conn:
            row = conn.execute(sa.text(
                f"UPDATE knowledge.crawl_runs SET status = CAST(:st AS knowledge.crawl_status),"
                f" error = COALESCE(:err, error){finished} WHERE id = :r{guard} RETURNING id"),
                {"st": status, "err": error, "r": run_id, "from": list(only_from)},
            ).first()
            if row is not None and terminal:
                CounterStore._refresh_counters(conn, run_id)  # whatever ends a run recounts it
        return row is not None

    def record_run_error(self, run_id: str, error: str) -> None:
        """Note an error on a run without changing its status (e.g. ingest failed after it finished)."""
        self._run(
            "UPDATE knowledge.crawl_runs SET error = :e WHERE id = :r",
            {"e": error, "r": run_id},
        )

    def upsert_documents(self, site: str, source_host_id: str | None,
                         rows: Sequence[tuple[str, str, str, str]]) -> dict[str, str]:
        """rows: (canonical_url, url_hash, path, source_url). Returns canonical_url -> document id."""
        with self._tx() as conn:
            return discovery.upsert_documents(conn, site, source_host_id, rows)

    def add_run_pages(self, run_id: str, rows: Sequence[tuple[str, int, str]]) -> int:
        """rows: (document_id, depth, discovered_via). Existing ledger rows are kept."""
        with self._tx() as conn:
            return discovery.add_run_pages(conn, run_id, rows)

    def finish_map(self, run_id: str, raw_map_uri: str, beyond_limit: int = 0) -> None:
        """Mark the run mapped; ``beyond_limit`` URLs were discovered past its limit (the run ends partial)."""
        self._run(
            "UPDATE knowledge.crawl_runs SET raw_map_uri = :u, status = 'mapped', urls_beyond_limit = :b,"
            " urls_discovered = (SELECT count(*) FROM knowledge.crawl_page_decisions WHERE run_id = :r)"
            " WHERE id = :r AND status IN ('queued', 'mapping')",
            {"u": raw_map_uri, "r": run_id, "b": beyond_limit},
        )

    # -- sample ---------------------------------------------------------------------------------

    _PAGE_COLUMNS = (
        "d.id, d.canonical_url, d.url_hash, d.path, c.depth, c.discovered_via, d.scrape_policy::text,"
        " d.skip_reason, c.decision::text, d.http_etag, d.http_last_modified, s.content_hash, c.fetch_outcome::text,"
        " d.source_url, c.snapshot_outcome::text, c.fetched_content_hash, c.fetched_raw_hash, c.extractor,"
        " c.fetch_status, c.fetch_time_ms, c.byte_size, d.operator_decision::text, c.prefetched, d.skip_by_decider"
    )

    def run_pages(self, run_id: str, document_ids: Sequence[str] | None = None) -> list[RunPage]:
        where = "c.run_id = :r"
        params: dict[str, Any] = {"r": run_id}
        if document_ids is not None:
            where += " AND c.document_id = ANY(CAST(:ids AS uuid[]))"
            params["ids"] = list(document_ids)
        rows = self._all(
            f"SELECT {self._PAGE_COLUMNS} FROM knowledge.crawl_page_decisions c"
            " JOIN knowledge.documents d ON d.id = c.document_id"
            " LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
            f" WHERE {where} ORDER BY c.depth, d.path",
            params,
        )
        return [RunPage(str(r[0]), *r[1:]) for r in rows]

    def sample_pages(self, run_id: str) -> list[SamplePage]:
        """Every page of a run as sample decides on it, in :meth:`run_pages`' order.

        One record a URL, held at once: the rows are turned into records as they are read (not all rows
        first), and the few distinct scrape policies are shared, not one string a row.
        """
        rows = self._each(
            "SELECT d.id::text, d.canonical_url, d.path, d.source_url, d.scrape_policy::text,"
            " d.skip_by_decider, d.skip_reason, d.operator_decision::text"
            " FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id"
            " WHERE c.run_id = :r ORDER BY c.depth, d.path", {"r": run_id})
        return [SamplePage(r[0], r[1], r[2], r[3], sys.intern(r[4]), r[5], r[6], r[7]) for r in rows]

    def record_decisions(self, run_id: str, decisions: Iterable[Decision],
                         batches: Mapping[str, int] | None = None,
                         prefetched: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """Write decisions (with each page's scrape batch and the sample's kept answer; see
        :func:`decisions.record_decisions`) and materialise them onto the documents (exclude -> skip)."""
        store_decisions(self.engine, run_id, decisions, batches, prefetched)

    def record_discovery(self, run_id: str, site: str, source_host_id: str | None,
                         rows: Iterable[tuple[str, str, str, str, int, str]],
                         lastmods: Mapping[str, datetime] | None = None,
                         prefetched: Mapping[str, Mapping[str, Any]] | None = None) -> int:
        """Map's documents and ledger rows in one statement; see :func:`discovery.record_discovery`."""
        return discovery.record_discovery(self.engine, run_id, site, source_host_id, rows, lastmods, prefetched)

    def mark_unmapped_stale(self, run_id: str, site: str, complete: bool) -> None:
        """Documents this (complete) mapping no longer found, towards ``stale`` (store/documents/lifecycle.py)."""
        from gleaner.store.documents.lifecycle import mark_unmapped_stale

        with self._tx() as conn:
            mark_unmapped_stale(conn, run_id, site, complete)

    def previous_samples(self, site: str, run_id: str) -> list[PreviousSample]:
        """The section samples of the site's latest earlier sampled run (a recrawl may reuse their verdicts)."""
        return store_previous_samples(self.engine, site, run_id)

    def run_options(self, run_id: str) -> dict[str, Any]:
        """The options a run was requested with (limit, globs, feeds, …); empty for an unknown run."""
        options = self._scalar(
            "SELECT options FROM knowledge.crawl_runs WHERE id = :r",
            {"r": run_id},
        )
        return dict(options or {})

    def start_scrape(self, run_id: str, batches: Sequence[Sequence[str]]) -> bool:
        """Assign batch numbers and move the run to scraping; False if already done (redelivery).

        Rows that already hold their batch number (written with the decisions) are not written again; one
        another delivery numbered differently meanwhile is set back to these batches, the ones enqueued."""
        with self._tx() as conn:
            row = conn.execute(
                sa.text(
                    "UPDATE knowledge.crawl_runs SET status = 'scraping', batches_total = :n,"
                    " urls_included = (SELECT count(*) FROM knowledge.crawl_page_decisions"
                    "   WHERE run_id = :r AND decision = 'include'),"
                    " urls_excluded = (SELECT count(*) FROM knowledge.crawl_page_decisions"
                    "   WHERE run_id = :r AND decision <> 'include')"
                    " WHERE id = :r AND status IN ('mapped', 'sampling') RETURNING id"
                ),
                {"r": run_id, "n": len(batches)},
            ).first()
            if row is None:
                return False
            if any(batches):
                # One JSON parameter: pg8000 escapes a uuid[] of a whole run's ids character by character.
                conn.execute(
                    sa.text(
                        "UPDATE knowledge.crawl_page_decisions c SET batch_no = b.n - 1"
                        " FROM json_array_elements(CAST(:b AS json)) WITH ORDINALITY AS b(ids, n),"
                        " json_array_elements_text(b.ids) AS t(d)"
                        " WHERE c.run_id = :r AND c.document_id = CAST(t.d AS uuid)"
                        " AND c.batch_no IS DISTINCT FROM b.n - 1"
                    ),
                    {"r": run_id, "b": json.dumps([list(batch) for batch in batches])},
                )
        return True

    def batches_of(self, run_id: str) -> list[list[str]]:
        rows = self._all(
            "SELECT batch_no, document_id FROM knowledge.crawl_page_decisions"
            " WHERE run_id = :r AND batch_no IS NOT NULL ORDER BY batch_no, document_id",
            {"r": run_id},
        )
        batches: dict[int, list[str]] = {}
        for no, doc in rows:
            batches.setdefault(int(no), []).append(str(doc))
        return [batches[k] for k in sorted(batches)]
