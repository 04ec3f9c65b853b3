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

from gleaner.store.sqlstore import json_rows


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
