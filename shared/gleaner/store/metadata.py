"""The metadata repository: every SQL statement the stages run, batched per call.

Each method is one short transaction. Per-page writes are one multi-row
statement (``unnest`` of arrays), never a loop of single statements: pg8000's
executemany is round-trip bound (FACTS.md). Idempotency comes from keys:
``ON CONFLICT`` on business identity, and a per-(run, document) ledger row whose
``fetch_outcome`` / ``snapshot_outcome`` once set is never overwritten, so a
redelivered message finds its work done. Counters are recomputed from the
ledger, never incremented, so they cannot double-count.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner.store import discovery
from gleaner.store.decisions import record_decisions as store_decisions


@dataclass(frozen=True, slots=True)
class RunPage:
    document_id: str
    canonical_url: str
    url_hash: str
    path: str
    depth: int
    discovered_via: str
    scrape_policy: str
    skip_reason: str | None
    decision: str
    etag: str | None
    last_modified: str | None
    current_hash: str | None
    fetch_outcome: str | None
    source_url: str | None = None
    snapshot_outcome: str | None = None
    fetched_content_hash: str | None = None
    fetched_raw_hash: str | None = None
    extractor: str | None = None
    fetch_status: int | None = None
    fetch_time_ms: int | None = None
    byte_size: int | None = None

    @property
    def fetch_url(self) -> str:
        """The URL as the site spells it (trailing slash and all); the canonical URL is only identity."""
        return self.source_url or self.canonical_url


@dataclass(frozen=True, slots=True)
class Decision:
    document_id: str
    decision: str  # include | exclude | needs_review
    source: str  # system | operator | rule
    reason: str
    confidence: float
    metadata: dict[str, Any]
    sample_uri: str | None = None
    sample_error: str | None = None


@dataclass(frozen=True, slots=True)
class FetchRecord:
    document_id: str
    outcome: str
    reason: str
    status: int | None
    time_ms: int
    byte_size: int | None
    etag: str | None
    last_modified: str | None
    title: str | None = None
    content_hash: str | None = None
    raw_hash: str | None = None
    extractor: str | None = None


@dataclass(frozen=True, slots=True)
class SnapshotInput:
    document_id: str
    content_hash: str
    raw_hash: str
    content_key: str
    raw_key: str | None
    fetch_status: int
    fetch_time_ms: int
    byte_size: int
    extractor: str


@dataclass(frozen=True, slots=True)
class SnapshotResult:
    document_id: str
    outcome: str  # new | changed | unchanged | duplicate (already applied for this run)
    snapshot_id: str | None


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _json_rows(rows: list[dict[str, Any]]) -> str:
    """Rows for ``json_to_recordset``: one parameter however many rows, encoded in C."""
    return json.dumps(rows, separators=(",", ":"), ensure_ascii=False)


class MetadataStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _tx(self) -> Any:
        return self.engine.begin()

    # -- map ------------------------------------------------------------------------------------

    def upsert_source_host(self, site: str, host: str, own_site: bool) -> str:
        kind = "own_site" if own_site else "external_reference"
        with self._tx() as conn:
            row = conn.execute(
                sa.text(
                    "INSERT INTO knowledge.source_hosts (site_domain, host, kind) VALUES (:s, :h, :k)"
                    " ON CONFLICT (site_domain, host) DO UPDATE SET updated_at = now() RETURNING id"
                ),
                {"s": site, "h": host, "k": kind},
            ).one()
        return str(row[0])

    def host_politeness_for(self, host: str) -> tuple[float | None, int | None]:
        """The strictest delay and concurrency any tenant configured for a host (it is one server)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.text(
                    "SELECT max(host_delay_seconds), min(host_concurrency) FROM knowledge.source_hosts"
                    " WHERE host = :h"
                ),
                {"h": host},
            ).first()
        return (row[0], row[1]) if row else (None, None)

    def run_spent(self, run_id: str) -> tuple[int, int, float]:
        """What a run has used of its budget: (page fetches, body bytes, seconds since it started)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.text(
                    "SELECT (SELECT count(*) FROM knowledge.crawl_page_decisions WHERE run_id = :r"
                    "   AND fetch_outcome IS NOT NULL AND fetch_outcome <> 'exhausted'),"
                    " (SELECT COALESCE(sum(byte_size), 0) FROM knowledge.crawl_page_decisions WHERE run_id = :r),"
                    " EXTRACT(EPOCH FROM now() - COALESCE(started_at, now()))"
                    " FROM knowledge.crawl_runs WHERE id = :r"
                ),
                {"r": run_id},
            ).first()
        return (int(row[0]), int(row[1]), float(row[2])) if row else (0, 0, 0.0)

    def run_robots(self, run_id: str, origin: str) -> tuple[str, str, bytes | None] | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.text("SELECT state, reason, body FROM knowledge.crawl_run_robots WHERE run_id = :r AND origin = :o"),
                {"r": run_id, "o": origin},
            ).first()
        return (str(row[0]), str(row[1]), bytes(row[2]) if row[2] is not None else None) if row else None

    def save_run_robots(self, run_id: str, origin: str, state: str, reason: str,
                        body: bytes | None) -> tuple[str, str, bytes | None]:
        """Store the run's decision for origin unless one exists; return the decision that stands."""
        with self._tx() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO knowledge.crawl_run_robots (run_id, origin, state, reason, body)"
                    " VALUES (:r, :o, :s, :why, :b) ON CONFLICT (run_id, origin) DO NOTHING"
                ),
                {"r": run_id, "o": origin, "s": state, "why": reason, "b": body},
            )
        stored = self.run_robots(run_id, origin)
        return stored if stored is not None else (state, reason, body)

    def create_run(self, run_id: str, site: str, source_host_id: str, target_url: str, options: dict[str, Any],
                   mode: str, triggered_by: str) -> bool:
        """True if this call created the run; False if it existed (a redelivered request)."""
        with self._tx() as conn:
            row = conn.execute(
                sa.text(
                    "INSERT INTO knowledge.crawl_runs (id, site_domain, source_host_id, target_url, options, mode,"
                    " triggered_by, status, started_at) VALUES (:id, :s, :h, :t, CAST(:o AS jsonb),"
                    " CAST(:m AS knowledge.crawl_mode), CAST(:tb AS knowledge.crawl_trigger), 'mapping', now())"
                    " ON CONFLICT (id) DO NOTHING RETURNING id"
                ),
                {"id": run_id, "s": site, "h": source_host_id, "t": target_url, "o": _json(options), "m": mode,
                 "tb": triggered_by},
            ).first()
        return row is not None

    def run_status(self, run_id: str) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(sa.text("SELECT status::text FROM knowledge.crawl_runs WHERE id = :r"),
                                {"r": run_id}).scalar()

    def set_run_status(self, run_id: str, status: str, *, only_from: Sequence[str] = (),
                       error: str | None = None) -> bool:
        """Move a run to status (optionally only from the given statuses); True if it moved."""
        guard = " AND status::text = ANY(CAST(:from AS text[]))" if only_from else ""
        finished = ", finished_at = COALESCE(finished_at, now())" if status in ("failed", "finished", "partial") else ""
        with self._tx() as conn:
            row = conn.execute(
                sa.text(
                    f"UPDATE knowledge.crawl_runs SET status = CAST(:st AS knowledge.crawl_status),"
                    f" error = COALESCE(:err, error){finished} WHERE id = :r{guard} RETURNING id"
                ),
                {"st": status, "err": error, "r": run_id, "from": list(only_from)},
            ).first()
        return row is not None

    def record_run_error(self, run_id: str, error: str) -> None:
        """Note an error on a run without changing its status (e.g. ingest failed after it finished)."""
        with self._tx() as conn:
            conn.execute(sa.text("UPDATE knowledge.crawl_runs SET error = :e WHERE id = :r"),
                         {"e": error, "r": run_id})

    def upsert_documents(self, site: str, source_host_id: str | None,
                         rows: Sequence[tuple[str, str, str, str]]) -> dict[str, str]:
        """rows: (canonical_url, url_hash, path, source_url). Returns canonical_url -> document id."""
        with self._tx() as conn:
            return discovery.upsert_documents(conn, site, source_host_id, rows)

    def add_run_pages(self, run_id: str, rows: Sequence[tuple[str, int, str]]) -> int:
        """rows: (document_id, depth, discovered_via). Existing ledger rows are kept."""
        with self._tx() as conn:
            return discovery.add_run_pages(conn, run_id, rows)

    def finish_map(self, run_id: str, raw_map_uri: str) -> None:
        with self._tx() as conn:
            conn.execute(
                sa.text(
                    "UPDATE knowledge.crawl_runs SET raw_map_uri = :u, status = 'mapped',"
                    " urls_discovered = (SELECT count(*) FROM knowledge.crawl_page_decisions WHERE run_id = :r)"
                    " WHERE id = :r AND status IN ('queued', 'mapping')"
                ),
                {"u": raw_map_uri, "r": run_id},
            )

    # -- sample ---------------------------------------------------------------------------------

    _PAGE_COLUMNS = (
        "d.id, d.canonical_url, d.url_hash, d.path, c.depth, c.discovered_via, d.scrape_policy::text,"
        " d.skip_reason, c.decision::text, d.http_etag, d.http_last_modified, s.content_hash, c.fetch_outcome::text,"
        " d.source_url, c.snapshot_outcome::text, c.fetched_content_hash, c.fetched_raw_hash, c.extractor,"
        " c.fetch_status, c.fetch_time_ms, c.byte_size"
    )

    def run_pages(self, run_id: str, document_ids: Sequence[str] | None = None) -> list[RunPage]:
        where = "c.run_id = :r"
        params: dict[str, Any] = {"r": run_id}
        if document_ids is not None:
            where += " AND c.document_id = ANY(CAST(:ids AS uuid[]))"
            params["ids"] = list(document_ids)
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    f"SELECT {self._PAGE_COLUMNS} FROM knowledge.crawl_page_decisions c"
                    " JOIN knowledge.documents d ON d.id = c.document_id"
                    " LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
                    f" WHERE {where} ORDER BY c.depth, d.path"
                ),
                params,
            ).all()
        return [RunPage(str(r[0]), *r[1:]) for r in rows]

    def record_decisions(self, run_id: str, decisions: Sequence[Decision]) -> None:
        """Write decisions and materialise them onto the documents (exclude -> scrape_policy=skip)."""
        store_decisions(self.engine, run_id, decisions)

    def start_scrape(self, run_id: str, batches: Sequence[Sequence[str]]) -> bool:
        """Assign batch numbers and move the run to scraping; False if already done (redelivery)."""
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
                    ),
                    {"r": run_id, "b": json.dumps([list(batch) for batch in batches])},
                )
        return True

    def batches_of(self, run_id: str) -> list[list[str]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT batch_no, document_id FROM knowledge.crawl_page_decisions"
                    " WHERE run_id = :r AND batch_no IS NOT NULL ORDER BY batch_no, document_id"
                ),
                {"r": run_id},
            ).all()
        batches: dict[int, list[str]] = {}
        for no, doc in rows:
            batches.setdefault(int(no), []).append(str(doc))
        return [batches[k] for k in sorted(batches)]

    # -- scrape ---------------------------------------------------------------------------------

    def record_fetches(self, run_id: str, records: Sequence[FetchRecord]) -> None:
        """Record each URL's fetch outcome once; a not-modified page is settled as unchanged here."""
        if not records:
            return
        cols: dict[str, list[Any]] = {
            k: [] for k in ("d", "o", "why", "st", "ms", "sz", "et", "lm", "ti", "ch", "rh", "ex")
        }
        for r in records:
            for key, value in zip(
                cols,
                (r.document_id, r.outcome, r.reason, r.status, r.time_ms, r.byte_size, r.etag, r.last_modified,
                 r.title, r.content_hash, r.raw_hash, r.extractor),
                strict=True,
            ):
                cols[key].append(value)
        with self._tx() as conn:
            updated = conn.execute(
                sa.text(
                    "UPDATE knowledge.crawl_page_decisions c SET fetch_outcome = CAST(t.o AS knowledge.fetch_outcome),"
                    " fetch_reason = t.why, fetch_status = t.st, fetch_time_ms = t.ms, byte_size = t.sz,"
                    " fetched_at = now(), fetched_content_hash = t.ch, fetched_raw_hash = t.rh, extractor = t.ex,"
                    " snapshot_outcome = CASE WHEN t.o = 'not-modified' THEN 'unchanged'::knowledge.snapshot_outcome"
                    "   ELSE c.snapshot_outcome END"
                    " FROM unnest(CAST(:d AS uuid[]), CAST(:o AS text[]), CAST(:why AS text[]), CAST(:st AS int[]),"
                    " CAST(:ms AS int[]), CAST(:sz AS int[]), CAST(:et AS text[]), CAST(:lm AS text[]),"
                    " CAST(:ti AS text[]), CAST(:ch AS text[]), CAST(:rh AS text[]), CAST(:ex AS text[]))"
                    " AS t(d, o, why, st, ms, sz, et, lm, ti, ch, rh, ex)"
                    " WHERE c.run_id = :r AND c.document_id = t.d AND c.fetch_outcome IS NULL"
                    " RETURNING c.document_id"
                ),
                {"r": run_id, **cols},
            ).all()
            fresh = [str(row[0]) for row in updated]
            if not fresh:
                return
            conn.execute(
                sa.text(
                    "UPDATE knowledge.documents d SET"
                    " http_etag = CASE WHEN t.o = 'fetched' THEN t.et ELSE d.http_etag END,"
                    " http_last_modified = CASE WHEN t.o = 'fetched' THEN t.lm ELSE d.http_last_modified END,"
                    " title = COALESCE(t.ti, d.title),"
                    " last_fetched_at = CASE WHEN t.o IN ('fetched', 'not-modified') THEN now()"
                    "   ELSE d.last_fetched_at END,"
                    " last_seen_at = CASE WHEN t.o = 'not-modified' THEN now() ELSE d.last_seen_at END,"
                    " status = CASE WHEN t.o NOT IN ('fetched', 'not-modified', 'exhausted')"
                    "   AND d.current_snapshot_id IS NULL THEN 'failed'::knowledge.document_status ELSE d.status END,"
                    " updated_at = now()"
                    " FROM unnest(CAST(:d AS uuid[]), CAST(:o AS text[]), CAST(:et AS text[]), CAST(:lm AS text[]),"
                    " CAST(:ti AS text[])) AS t(d, o, et, lm, ti)"
                    " WHERE d.id = t.d AND t.d = ANY(CAST(:fresh AS uuid[]))"
                ),
                {"d": cols["d"], "o": cols["o"], "et": cols["et"], "lm": cols["lm"], "ti": cols["ti"],
                 "fresh": fresh},
            )

    # -- snapshot -------------------------------------------------------------------------------

    def apply_snapshots(self, run_id: str | None, pages: Sequence[SnapshotInput],
                        meta: dict[str, Any]) -> list[SnapshotResult]:
        """Version each page whose content hash differs from its current snapshot, in one transaction.

        Documents are locked in id order (no deadlock between racing deliveries); a page whose ledger row
        already has a snapshot outcome for this run is reported as a duplicate and left alone.
        """
        if not pages:
            return []
        ids = sorted({p.document_id for p in pages})
        results: list[SnapshotResult] = []
        with self._tx() as conn:
            state = {
                str(r[0]): (r[1], r[2], r[3], r[4])
                for r in conn.execute(
                    sa.text(
                        "SELECT d.id, s.content_hash, d.current_snapshot_id, c.snapshot_outcome::text,"
                        " c.produced_snapshot_id"
                        " FROM knowledge.documents d"
                        " LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
                        " LEFT JOIN knowledge.crawl_page_decisions c ON c.document_id = d.id AND c.run_id = :r"
                        " WHERE d.id = ANY(CAST(:ids AS uuid[])) ORDER BY d.id FOR UPDATE OF d"
                    ),
                    {"ids": ids, "r": run_id},
                ).all()
            }
            unchanged: list[str] = []
            versioned: list[tuple[SnapshotInput, str]] = []
            for page in pages:
                current_hash, current_id, done, produced = state.get(page.document_id, (None, None, None, None))
                if run_id is not None and done is not None:
                    # Already settled by an earlier delivery; report what it produced so a lost
                    # snapshots-written message is sent again (ingest is idempotent).
                    results.append(SnapshotResult(page.document_id, "duplicate", str(produced) if produced else None))
                    continue
                if current_hash == page.content_hash:
                    unchanged.append(page.document_id)
                    results.append(SnapshotResult(page.document_id, "unchanged", str(current_id)))
                    continue
                outcome = "new" if current_id is None else "changed"
                versioned.append((page, outcome))
                results.append(SnapshotResult(page.document_id, outcome, None))
            if len({page.document_id for page, _ in versioned}) == len(versioned):
                ids_by_doc = self._insert_snapshots(conn, run_id, versioned, meta)
            else:  # one document twice in one message: versions must follow each other, one at a time
                ids_by_doc = {}
                for page, outcome in versioned:
                    ids_by_doc[page.document_id] = self._insert_snapshot(conn, run_id, page, outcome, meta)
            results = [SnapshotResult(r.document_id, r.outcome, ids_by_doc[r.document_id])
                       if r.outcome in ("new", "changed") else r for r in results]
            changed = [r for r in results if r.outcome in ("new", "changed")]
            if changed:
                conn.execute(
                    sa.text(
                        "UPDATE knowledge.documents d SET current_snapshot_id = t.s, status = 'active',"
                        " last_seen_at = now(), last_fetched_at = now(), updated_at = now()"
                        " FROM unnest(CAST(:d AS uuid[]), CAST(:s AS uuid[])) AS t(d, s) WHERE d.id = t.d"
                    ),
                    {"d": [r.document_id for r in changed], "s": [r.snapshot_id for r in changed]},
                )
            if unchanged:
                conn.execute(
                    sa.text("UPDATE knowledge.documents SET last_seen_at = now() WHERE id = ANY(CAST(:d AS uuid[]))"),
                    {"d": unchanged},
                )
            settled = [r for r in results if r.outcome != "duplicate"]
            if run_id is not None and settled:
                conn.execute(
                    sa.text(
                        "UPDATE knowledge.crawl_page_decisions c"
                        " SET snapshot_outcome = CAST(t.o AS knowledge.snapshot_outcome),"
                        " produced_snapshot_id = CASE WHEN t.o = 'unchanged' THEN NULL ELSE t.s END"
                        " FROM unnest(CAST(:d AS uuid[]), CAST(:o AS text[]), CAST(:s AS uuid[])) AS t(d, o, s)"
                        " WHERE c.run_id = :r AND c.document_id = t.d AND c.snapshot_outcome IS NULL"
                    ),
                    {"r": run_id, "d": [r.document_id for r in settled], "o": [r.outcome for r in settled],
                     "s": [r.snapshot_id for r in settled]},
                )
        return results

    @staticmethod
    def _insert_snapshots(conn: Connection, run_id: str | None, pages: Sequence[tuple[SnapshotInput, str]],
                          meta: dict[str, Any]) -> dict[str, str]:
        """One INSERT for every new version of a message (each document at most once); document id -> snapshot id.

        The documents are locked by the caller, so max(version) + 1 cannot race.
        """
        if not pages:
            return {}
        rows = [{"d": page.document_id, "h": page.content_hash, "ck": page.content_key, "rk": page.raw_key,
                 "m": {**meta, "raw_content_hash": page.raw_hash, "extractor": page.extractor},
                 "fs": page.fetch_status, "ft": page.fetch_time_ms, "bs": page.byte_size,
                 "cs": "hash_changed" if outcome == "changed" else None} for page, outcome in pages]
        params = {"rows": _json_rows(rows), "r": run_id}
        inserted = {str(d): str(i) for i, d in conn.execute(
            sa.text(
                "INSERT INTO knowledge.document_snapshots (document_id, version, content_hash,"
                " processed_markdown_ref, raw_markdown_ref, extraction_metadata, render_mode, fetch_status,"
                " fetch_time_ms, byte_size, change_signal, produced_by_run_id)"
                " SELECT t.d, COALESCE((SELECT max(s.version) FROM knowledge.document_snapshots s"
                "   WHERE s.document_id = t.d), 0) + 1, t.h, t.ck, t.rk, t.m, 'plain_fetch', t.fs, t.ft, t.bs,"
                " CAST(t.cs AS knowledge.change_signal), CAST(:r AS uuid)"
                " FROM json_to_recordset(CAST(:rows AS json))"
                "   AS t(d uuid, h text, ck text, rk text, m jsonb, fs int, ft int, bs int, cs text)"
                " ON CONFLICT (document_id, content_hash) DO NOTHING RETURNING id, document_id"
            ),
            params,
        )}
        if len(inserted) < len(rows):
            # Content back to an earlier version: point at that snapshot again (bodies are immutable).
            inserted.update({str(d): str(i) for i, d in conn.execute(
                sa.text(
                    "SELECT s.id, s.document_id FROM knowledge.document_snapshots s"
                    " JOIN json_to_recordset(CAST(:rows AS json)) AS t(d uuid, h text)"
                    " ON s.document_id = t.d AND s.content_hash = t.h"
                ),
                {"rows": _json_rows([{"d": r["d"], "h": r["h"]} for r in rows if r["d"] not in inserted])},
            )})
        return inserted

    @staticmethod
    def _insert_snapshot(conn: Connection, run_id: str | None, page: SnapshotInput, outcome: str,
                         meta: dict[str, Any]) -> str:
        metadata = {**meta, "raw_content_hash": page.raw_hash, "extractor": page.extractor}
        row = conn.execute(
            sa.text(
                "INSERT INTO knowledge.document_snapshots (document_id, version, content_hash,"
                " processed_markdown_ref, raw_markdown_ref, extraction_metadata, render_mode, fetch_status,"
                " fetch_time_ms, byte_size, change_signal, produced_by_run_id)"
                " SELECT :d, COALESCE(max(version), 0) + 1, :h, :ck, :rk, CAST(:m AS jsonb), 'plain_fetch', :fs,"
                " :ft, :bs, CAST(:cs AS knowledge.change_signal), :r"
                " FROM knowledge.document_snapshots WHERE document_id = :d"
                " ON CONFLICT (document_id, content_hash) DO NOTHING RETURNING id"
            ),
            {"d": page.document_id, "h": page.content_hash, "ck": page.content_key, "rk": page.raw_key,
             "m": _json(metadata), "fs": page.fetch_status, "ft": page.fetch_time_ms, "bs": page.byte_size,
             "cs": "hash_changed" if outcome == "changed" else None, "r": run_id},
        ).first()
        if row is not None:
            return str(row[0])
        # The content went back to an earlier version: point at that snapshot again (bodies are immutable).
        existing = conn.execute(
            sa.text("SELECT id FROM knowledge.document_snapshots WHERE document_id = :d AND content_hash = :h"),
            {"d": page.document_id, "h": page.content_hash},
        ).scalar_one()
        return str(existing)

    # -- run accounting -------------------------------------------------------------------------

    def refresh_counters(self, run_id: str) -> None:
        with self._tx() as conn:
            self._refresh_counters(conn, run_id)

    @staticmethod
    def _refresh_counters(conn: Connection, run_id: str) -> None:
        # Lock the run first, so the counting statement below starts after every concurrent refresh
        # committed and sees every ledger row they saw: an UPDATE … FROM counts with the snapshot of
        # its start and, if it then waits for the row lock, would write that stale count last.
        conn.execute(sa.text("SELECT 1 FROM knowledge.crawl_runs WHERE id = :r FOR UPDATE"), {"r": run_id})
        conn.execute(
            sa.text(
                "UPDATE knowledge.crawl_runs r SET"
                " urls_discovered = a.total, urls_included = a.included, urls_excluded = a.total - a.included,"
                " urls_scraped = a.fetched, urls_not_modified = a.not_modified, urls_failed = a.failed,"
                " snapshots_new = a.new, snapshots_changed = a.changed, snapshots_unchanged = a.unchanged"
                " FROM (SELECT count(*) AS total,"
                "   count(*) FILTER (WHERE decision = 'include') AS included,"
                "   count(*) FILTER (WHERE fetch_outcome = 'fetched') AS fetched,"
                "   count(*) FILTER (WHERE fetch_outcome = 'not-modified') AS not_modified,"
                "   count(*) FILTER (WHERE fetch_outcome NOT IN ('fetched', 'not-modified')) AS failed,"
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
            self._refresh_counters(conn, run_id)
            row = conn.execute(
                sa.text(
                    "UPDATE knowledge.crawl_runs r SET"
                    " status = CASE WHEN EXISTS (SELECT 1 FROM knowledge.crawl_page_decisions"
                    "   WHERE run_id = :r AND fetch_outcome = 'exhausted') THEN 'partial'::knowledge.crawl_status"
                    "   ELSE 'finished'::knowledge.crawl_status END,"
                    " finished_at = now()"
                    " WHERE r.id = :r AND r.status = 'scraping' AND r.finished_at IS NULL AND NOT EXISTS ("
                    "   SELECT 1 FROM knowledge.crawl_page_decisions c WHERE c.run_id = :r AND c.decision = 'include'"
                    "   AND (c.fetch_outcome IS NULL OR (c.fetch_outcome = 'fetched' AND c.snapshot_outcome IS NULL)))"
                    " RETURNING status::text"
                ),
                {"r": run_id},
            ).first()
        return str(row[0]) if row else None

    def run_summary(self, run_id: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.text(
                    "SELECT id, site_domain, status::text, urls_discovered, urls_included, urls_excluded,"
                    " urls_scraped, urls_not_modified, urls_failed, snapshots_new, snapshots_changed,"
                    " snapshots_unchanged, target_url, started_at, finished_at, error"
                    " FROM knowledge.crawl_runs WHERE id = :r"
                ),
                {"r": run_id},
            ).first()
        if row is None:
            return None
        return {
            "run_id": str(row[0]),
            "site_domain": row[1],
            "status": row[2],
            "discovered": row[3],
            "included": row[4],
            "excluded": row[5],
            "fetched": row[6],
            "not_modified": row[7],
            "failed": row[8],
            "snapshots": {"new": row[9], "changed": row[10], "unchanged": row[11]},
            "target_url": row[12],
            "started_at": row[13].isoformat() if row[13] else None,
            "finished_at": row[14].isoformat() if row[14] else None,
            "error": row[15],
        }

    def outcome_breakdown(self, run_id: str) -> dict[str, int]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT COALESCE(fetch_outcome::text, CASE WHEN decision = 'include' THEN 'pending'"
                    " ELSE 'not-fetched (' || decision::text || ')' END), count(*)"
                    " FROM knowledge.crawl_page_decisions WHERE run_id = :r GROUP BY 1 ORDER BY 1"
                ),
                {"r": run_id},
            ).all()
        return {str(k): int(v) for k, v in rows}

    def recent_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            ids = conn.execute(
                sa.text("SELECT id FROM knowledge.crawl_runs ORDER BY created_at DESC LIMIT :n"), {"n": limit}
            ).scalars().all()
        return [s for s in (self.run_summary(str(i)) for i in ids) if s is not None]

    # -- reads for the CLI and ingest -------------------------------------------------------------

    def documents_tree(self, site: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT d.path, d.status::text, d.scrape_policy::text, d.skip_reason, s.version, d.canonical_url"
                    " FROM knowledge.documents d"
                    " LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
                    " WHERE d.site_domain = :s AND NOT d.is_deleted ORDER BY d.path"
                ),
                {"s": site},
            ).all()
        return [
            {"path": r[0], "status": r[1], "scrape_policy": r[2], "skip_reason": r[3], "version": r[4],
             "url": r[5]}
            for r in rows
        ]

    def document_by_url(self, canonical_url: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.text(
                    "SELECT id, site_domain, canonical_url, path, status::text, scrape_policy::text, title,"
                    " current_snapshot_id FROM knowledge.documents WHERE canonical_url = :u"
                    " ORDER BY updated_at DESC LIMIT 1"
                ),
                {"u": canonical_url},
            ).first()
        if row is None:
            return None
        return dict(zip(("id", "site_domain", "canonical_url", "path", "status", "scrape_policy", "title",
                         "current_snapshot_id"), (str(row[0]), *row[1:7], str(row[7]) if row[7] else None),
                        strict=True))

    def snapshots_of(self, document_id: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT id, version, content_hash, processed_markdown_ref, raw_markdown_ref, change_signal::text,"
                    " produced_by_run_id, created_at, fetch_status, byte_size"
                    " FROM knowledge.document_snapshots WHERE document_id = :d ORDER BY version DESC"
                ),
                {"d": document_id},
            ).all()
        keys = ("id", "version", "content_hash", "content_ref", "raw_ref", "change_signal", "run_id", "created_at",
                "fetch_status", "byte_size")
        return [dict(zip(keys, (str(r[0]), *r[1:6], str(r[6]) if r[6] else None, r[7].isoformat(), *r[8:]),
                         strict=True)) for r in rows]

    def snapshots_for_ingest(self, snapshot_ids: Iterable[str]) -> list[tuple[str, str, str]]:
        """(snapshot_id, processed_markdown_ref, content_hash) for snapshots not yet ingested."""
        ids = list(snapshot_ids)
        if not ids:
            return []
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT s.id, s.processed_markdown_ref, s.content_hash FROM knowledge.document_snapshots s"
                    " LEFT JOIN knowledge.snapshot_texts t ON t.snapshot_id = s.id"
                    " WHERE s.id = ANY(CAST(:ids AS uuid[])) AND t.snapshot_id IS NULL ORDER BY s.id"
                ),
                {"ids": ids},
            ).all()
        return [(str(r[0]), r[1], r[2]) for r in rows]

    def texts_of_document(self, document_id: str) -> list[tuple[int, str, str, bool]]:
        """(version, snapshot_id, text_hash, is_current) of every ingested version, newest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT s.version, s.id, t.text_hash, s.id = d.current_snapshot_id"
                    " FROM knowledge.document_snapshots s JOIN knowledge.snapshot_texts t ON t.snapshot_id = s.id"
                    " JOIN knowledge.documents d ON d.id = s.document_id WHERE s.document_id = :d"
                    " ORDER BY s.version DESC"
                ),
                {"d": document_id},
            ).all()
        return [(int(r[0]), str(r[1]), str(r[2]), bool(r[3])) for r in rows]

    def canonical_text(self, text_hash: str) -> tuple[str, list[tuple[int, int, str]]] | None:
        with self.engine.connect() as conn:
            body = conn.execute(sa.text("SELECT body FROM knowledge.canonical_texts WHERE text_hash = :h"),
                                {"h": text_hash}).scalar()
            if body is None:
                return None
            spans = conn.execute(
                sa.text("SELECT span_start, span_end, kind FROM knowledge.text_spans WHERE text_hash = :h"
                        " ORDER BY ordinal"),
                {"h": text_hash},
            ).all()
        return str(body), [(int(s), int(e), str(k)) for s, e, k in spans]

