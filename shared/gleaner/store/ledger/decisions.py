"""The sample stage's ledger queries: the previous run's section samples, a run's decisions in one statement.

A recrawl reuses a section's decision when its sample page answers 304 to the
validators the sample was decided on (stages/sample.py); ``previous_samples``
finds those samples. ``record_decisions`` writes every decision of a run and
materialises excludes onto the documents in one statement whose rows travel as
one JSON parameter: pg8000 escapes ``text[]`` parameters character by character
in Python, which cost more than the whole sample stage's other work on a recrawl.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner.store.backends.sqlstore import json_rows, statement_slices
from gleaner.store.ledger.records import DECIDER_SKIP_PREFIX, Decision


@dataclass(frozen=True, slots=True)
class PreviousSample:
    """A section sample of an earlier run of the same site, and what was decided on it."""

    run_id: str
    document_id: str
    path: str
    decision: str
    source: str
    reason: str
    confidence: float
    metadata: dict[str, Any]
    sample_uri: str
    # Validators: those the sample answered with (recorded in the decision's metadata), else the document's.
    etag: str | None
    last_modified: str | None
    exclude: tuple[str, ...]


def previous_samples(engine: Engine, site: str, run_id: str) -> list[PreviousSample]:
    """The stored samples of the latest earlier run of ``site`` that got past sampling (none on a first crawl)."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "WITH prev AS (SELECT p.id, p.options FROM knowledge.crawl_runs p"
                "   WHERE p.site_domain = :s AND p.id <> :r AND p.status IN ('scraping', 'finished', 'partial')"
                "   AND p.created_at <= (SELECT created_at FROM knowledge.crawl_runs WHERE id = :r)"
                "   ORDER BY p.created_at DESC LIMIT 1)"
                " SELECT prev.id, c.document_id, d.path, c.decision::text, c.decision_source::text,"
                " c.decision_reason, c.decision_confidence, c.decision_metadata, c.sample_uri,"
                " COALESCE(c.decision_metadata #>> '{sample,etag}', d.http_etag),"
                " COALESCE(c.decision_metadata #>> '{sample,last_modified}', d.http_last_modified),"
                " prev.options -> 'exclude'"
                " FROM prev JOIN knowledge.crawl_page_decisions c ON c.run_id = prev.id"
                " JOIN knowledge.documents d ON d.id = c.document_id"
                " WHERE c.sample_uri IS NOT NULL AND c.decision_source IS NOT NULL"
            ),
            {"s": site, "r": run_id},
        ).all()
    return [PreviousSample(str(r[0]), str(r[1]), r[2], r[3], r[4], r[5] or "", float(r[6] or 0.0), dict(r[7] or {}),
                           r[8], r[9], r[10], tuple(str(g) for g in (r[11] or ()))) for r in rows]


def record_decisions(engine: Engine, run_id: str, decisions: Iterable[Decision],
                     batches: Mapping[str, int] | None = None,
                     prefetched: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Write decisions and materialise them onto the documents (exclude -> scrape_policy=skip).

    Each page's scrape batch (``batches``: document id -> batch number; a page not in it: not scraped; no
    mapping: batches untouched) is written with its decision, one update of the ledger row where there were
    two. With ``batches`` (sample's write) nothing is written once the run has left sampling: a redelivery
    that re-decided a run already scraping (one pushed again while its first delivery was still sampling,
    a slow render past the ack deadline) would otherwise replace the decisions scrape acts on with its own,
    which may differ (a render that timed out this time) and match none of the enqueued batches
    (``RunStore.start_scrape`` sets back any batches a racing delivery wrote). ``prefetched`` (document id -> what
    the section sample fetched, kept for scrape) goes on the same write, where the row holds no answer yet.

    Rule decisions are re-made every run; only rule-made skips are lifted by a later include, and a
    document already skipped for the same reason is not rewritten. ``decisions`` is read a statement's
    rows at a time, so a caller can make them as they are written.
    """
    slices = statement_slices(decisions)
    first = next(slices, None)
    if first is None:
        return
    with engine.begin() as conn:
        for chunk in chain((first,), slices):
            _record_decisions(conn, run_id, chunk, batches, prefetched or {})


def _record_decisions(conn: Connection, run_id: str, decisions: Sequence[Decision],
                      batches: Mapping[str, int] | None, prefetched: Mapping[str, Mapping[str, Any]]) -> None:
    numbered = batches is not None
    batches = batches or {}
    rows = [{"d": d.document_id, "dec": d.decision, "src": d.source, "why": d.reason, "conf": d.confidence,
             "meta": d.metadata, "uri": d.sample_uri, "err": d.sample_error, "b": batches.get(d.document_id),
             "pf": prefetched.get(d.document_id)}
            for d in decisions]
    conn.execute(
        sa.text(
            "WITH t AS (SELECT * FROM json_to_recordset(CAST(:rows AS json))"
            "   AS t(d uuid, dec text, src text, why text, conf float8, meta jsonb, uri text, err text, b int,"
            "   pf jsonb)),"
            " sampling AS (SELECT EXISTS (SELECT 1 FROM knowledge.crawl_runs"
            "   WHERE id = :r AND status IN ('mapped', 'sampling')) AS open),"
            # Sample's write (numbered) lands only while the run is sampled; another caller's always.
            " writing AS (SELECT (sampling.open OR NOT CAST(:numbered AS boolean)) AS ok,"
            "   (sampling.open AND CAST(:numbered AS boolean)) AS numbering FROM sampling),"
            " ledger AS (UPDATE knowledge.crawl_page_decisions c"
            "   SET decision = CAST(t.dec AS knowledge.page_decision),"
            "   decision_source = CAST(t.src AS knowledge.decision_source), decision_reason = t.why,"
            "   decision_confidence = t.conf, decision_metadata = t.meta,"
            "   sample_uri = COALESCE(t.uri, c.sample_uri), sample_error = t.err,"
            "   sampled_at = CASE WHEN t.uri IS NOT NULL OR t.err IS NOT NULL THEN now() ELSE c.sampled_at END,"
            "   batch_no = CASE WHEN writing.numbering THEN t.b ELSE c.batch_no END,"
            # The sample's rendering, kept beside map's answer, replaces that answer (render/kept.py).
            "   prefetched = CASE WHEN c.fetch_outcome IS NULL AND (t.pf ->> 'rendered_key') IS NOT NULL"
            "     AND (c.prefetched ->> 'rendered_key') IS NULL THEN t.pf"
            "     ELSE COALESCE(c.prefetched, CASE WHEN c.fetch_outcome IS NULL THEN t.pf END) END"
            "   FROM t, writing WHERE c.run_id = :r AND c.document_id = t.d AND writing.ok RETURNING 1)"
            " UPDATE knowledge.documents d"
            " SET scrape_policy = CAST(CASE WHEN t.dec = 'exclude' THEN 'skip' ELSE 'scrape' END"
            "   AS knowledge.scrape_policy),"
            " skip_reason = CASE WHEN t.dec = 'exclude' THEN :rp || t.why END,"
            " skip_by_decider = (t.dec = 'exclude'), updated_at = now()"
            " FROM t, writing WHERE d.id = t.d AND writing.ok AND ("
            "   (t.dec = 'exclude' AND (d.scrape_policy = 'scrape' OR d.skip_by_decider)"
            "     AND NOT (d.scrape_policy = 'skip' AND d.skip_reason = :rp || t.why))"
            "   OR (t.dec = 'include' AND d.scrape_policy = 'skip' AND d.skip_by_decider))"
        ),
        {"r": run_id, "rows": json_rows(rows), "rp": DECIDER_SKIP_PREFIX, "numbered": numbered},
    )
