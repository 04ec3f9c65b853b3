"""The ledger's part in rendering: which pages of a run a sample judged for the browser, and what
each rendered page asked for (its fetch facts), both in ``crawl_page_decisions.decision_metadata``.

The verdict lives beside the sample's other facts, so it is carried to the next run the way the
section's verdict is (a 304 on the sample carries its metadata over: stages/sample.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.store.backends.sqlstore import json_rows


def browser_pages(engine: Engine, run_id: str, document_ids: Sequence[str]) -> frozenset[str]:
    """The pages among ``document_ids`` whose section's sample was judged to need the browser."""
    if not document_ids:
        return frozenset()
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT document_id::text FROM knowledge.crawl_page_decisions"
            " WHERE run_id = :r AND document_id = ANY(CAST(:ids AS uuid[]))"
            " AND decision_metadata ->> 'render' = 'browser'"), {"r": run_id, "ids": list(document_ids)})
        return frozenset(str(r[0]) for r in rows)


def record_render_facts(engine: Engine, run_id: str, facts: Mapping[str, dict[str, Any]]) -> None:
    """Add each rendered page's facts (outcome, sub-requests) to its ledger row of the run."""
    if not facts:
        return
    with engine.begin() as conn:
        conn.execute(sa.text(
            "UPDATE knowledge.crawl_page_decisions c"
            " SET decision_metadata = c.decision_metadata || jsonb_build_object('rendering', t.f)"
            " FROM json_to_recordset(CAST(:rows AS json)) AS t(d uuid, f jsonb)"
            " WHERE c.run_id = :r AND c.document_id = t.d"),
            {"r": run_id, "rows": json_rows([{"d": d, "f": f} for d, f in sorted(facts.items())])})


def run_urls(engine: Engine, run_id: str, canonical_urls: Sequence[str]) -> tuple[int, frozenset[str]]:
    """How many pages the run holds, and which of ``canonical_urls`` are among them."""
    with engine.connect() as conn:
        size = int(conn.execute(sa.text("SELECT count(*) FROM knowledge.crawl_page_decisions WHERE run_id = :r"),
                                {"r": run_id}).scalar_one())
        held = conn.execute(sa.text(
            "SELECT d.canonical_url FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d"
            " ON d.id = c.document_id WHERE c.run_id = :r AND d.canonical_url = ANY(CAST(:u AS text[]))"),
            {"r": run_id, "u": list(canonical_urls)})
        return size, frozenset(str(r[0]) for r in held)


def section_decision(engine: Engine, run_id: str, section: str) -> tuple[str, str, str, float, dict[str, Any]] | None:
    """The decision the run's sample made for a path section (decision, source, reason, confidence, metadata),
    as its members hold it; None when the run sampled no such section."""
    with engine.connect() as conn:
        row = conn.execute(sa.text(
            "SELECT c.decision::text, c.decision_source::text, c.decision_reason, c.decision_confidence,"
            " c.decision_metadata FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d"
            " ON d.id = c.document_id WHERE c.run_id = :r AND (d.path = :s OR d.path LIKE :p)"
            " AND c.decision IS NOT NULL AND c.decision_source <> 'operator' AND c.discovered_via <> 'rendered'"
            " ORDER BY (c.sample_uri IS NULL) DESC, d.path LIMIT 1"),
            {"r": run_id, "s": section, "p": section.rstrip("/") + "/%"}).first()
    if row is None:
        return None
    return str(row[0]), str(row[1]), str(row[2] or ""), float(row[3] or 0.0), dict(row[4] or {})


def put_in_batch(engine: Engine, run_id: str, batch_no: int, document_ids: Sequence[str]) -> None:
    """Give pages found while a batch was scraped that batch's number (their task is its next part)."""
    if not document_ids:
        return
    with engine.begin() as conn:
        conn.execute(sa.text(
            "UPDATE knowledge.crawl_page_decisions SET batch_no = :b WHERE run_id = :r"
            " AND document_id = ANY(CAST(:ids AS uuid[])) AND batch_no IS NULL"),
            {"r": run_id, "b": batch_no, "ids": list(document_ids)})
