"""The map stage's writes: a run's discovered URLs as documents and ledger rows, in one statement.

A recrawl rediscovers the same URLs: known documents are looked up, not rewritten
(an ``ON CONFLICT DO UPDATE`` of every row wrote a new version of each document
row every run), only new ones are inserted, and the run's ledger rows are inserted
from the ids in the same statement, so no list of ids travels back and forth.
Rows travel as one JSON parameter: pg8000 escapes ``text[]`` parameters character
by character in Python (infra/bench/README.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from itertools import chain
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner.store.access.rls import ADMIN_OPTION
from gleaner.store.backends.sqlstore import json_rows, statement_slices

# Documents of :s for the rows t(cu, uh, p, su): the known ones (a source host adopted where none was
# set, as a feed-landed document may have none), then the new ones. A row another transaction inserts
# meanwhile meets ON CONFLICT and is returned all the same.
# Each row's document is looked up on its own (LATERAL, fenced by OFFSET 0) by the unique index: all of a
# run's slices go in one transaction, so the table's statistics still say what it held before the run, and
# joined freely the planner scanned every document of the site once per row (a 15,000-document site: 75
# million comparisons for a slice of 5,000).
_DOCUMENTS = (
    " known AS (SELECT d.canonical_url, d.id FROM t CROSS JOIN LATERAL (SELECT k.canonical_url, k.id"
    "   FROM knowledge.documents k WHERE k.site_domain = :s AND k.canonical_url = t.cu"
    "   AND k.canonical_url IS NOT NULL OFFSET 0) d),"
    " adopted AS (UPDATE knowledge.documents d SET source_host_id = CAST(:h AS uuid), updated_at = now()"
    "   FROM known k WHERE d.id = k.id AND d.source_host_id IS NULL AND CAST(:h AS uuid) IS NOT NULL),"
    " fresh AS (INSERT INTO knowledge.documents (site_domain, source_host_id, kind, path, origin, source_url,"
    "   canonical_url, url_hash, status)"
    "   SELECT :s, CAST(:h AS uuid), 'page', t.p, 'scrape', t.su, t.cu, t.uh, 'discovered' FROM t"
    "   WHERE NOT EXISTS (SELECT 1 FROM known k WHERE k.canonical_url = t.cu)"
    "   ON CONFLICT (site_domain, canonical_url) WHERE canonical_url IS NOT NULL"
    "   DO UPDATE SET updated_at = now(), source_host_id ="
    "   COALESCE(knowledge.documents.source_host_id, EXCLUDED.source_host_id)"
    "   RETURNING canonical_url, id),"
    " ids AS (SELECT canonical_url, id FROM known UNION ALL SELECT canonical_url, id FROM fresh)"
)


def upsert_documents(conn: Connection, site: str, source_host_id: str | None,
                     rows: Sequence[tuple[str, str, str, str]]) -> dict[str, str]:
    """rows: (canonical_url, url_hash, path, source_url). Returns canonical_url -> document id."""
    if not rows:
        return {}
    params = {"s": site, "h": source_host_id,
              "rows": json_rows([{"cu": cu, "uh": uh, "p": p, "su": su} for cu, uh, p, su in rows])}
    result = conn.execute(
        sa.text("WITH t AS (SELECT * FROM json_to_recordset(CAST(:rows AS json)) AS t(cu text, uh text, p text,"
                " su text))," + _DOCUMENTS + " SELECT canonical_url, id FROM ids"),
        params,
    ).all()
    return {str(r[0]): str(r[1]) for r in result}


def add_run_pages(conn: Connection, run_id: str, rows: Sequence[tuple[str, int, str]]) -> int:
    """rows: (document_id, depth, discovered_via). Existing ledger rows are kept; returns how many were new."""
    if not rows:
        return 0
    result = conn.execute(
        sa.text(
            "INSERT INTO knowledge.crawl_page_decisions (run_id, document_id, depth, discovered_via)"
            " SELECT :r, t.d, t.dp, t.v FROM json_to_recordset(CAST(:rows AS json)) AS t(d uuid, dp int, v text)"
            " ON CONFLICT (run_id, document_id) DO NOTHING"
        ),
        {"r": run_id, "rows": json_rows([{"d": d, "dp": dp, "v": v} for d, dp, v in rows])},
    )
    return int(result.rowcount or 0)


# A run that adds at least this many ledger rows refreshes the planner's statistics (below) of the
# tables whose statistics know fewer than STATISTICS_COVER times as many rows as the run added
# (never analysed: -1): past that, the run is a small part of what the planner already knows.
ANALYZE_AFTER_ROWS = 1000
STATISTICS_COVER = 10


def record_discovery(engine: Engine, run_id: str, site: str, source_host_id: str | None,
                     rows: Iterable[tuple[str, str, str, str, int, str]],
                     lastmods: Mapping[str, datetime] | None = None,
                     prefetched: Mapping[str, Mapping[str, Any]] | None = None) -> int:
    """rows: (canonical_url, url_hash, path, source_url, depth, discovered_via): the documents and the run's
    ledger rows, a statement's rows at a time (so a caller can make them as they are written). Returns how
    many ledger rows were new.

    ``lastmods`` (a sitemap's ``<lastmod>``) and ``prefetched`` (map's walk's answers, kept for scrape),
    both by canonical URL, go into the ledger rows as they are inserted: each was an update of every row
    it touched. A redelivery that finds a row sets them where the first delivery left them unset (a walk
    answer only before the page's fetch outcome: the first answer stands).
    """
    lastmods = lastmods or {}
    prefetched = prefetched or {}
    slices = statement_slices(rows)
    first = next(slices, None)
    if first is None:
        return 0
    new = 0
    with engine.begin() as conn:
        for chunk in chain((first,), slices):
            params = {"r": run_id, "s": site, "h": source_host_id,
                      "rows": json_rows([{"cu": cu, "uh": uh, "p": p, "su": su, "dp": dp, "v": v,
                                          "lm": lm.isoformat() if (lm := lastmods.get(cu)) is not None else None,
                                          "pf": prefetched.get(cu)}
                                         for cu, uh, p, su, dp, v in chunk])}
            new += int(conn.execute(
                sa.text(
                    "WITH t AS (SELECT * FROM json_to_recordset(CAST(:rows AS json)) AS t(cu text, uh text, p text,"
                    " su text, dp int, v text, lm timestamptz, pf jsonb))," + _DOCUMENTS + ","
                    " ledger AS (INSERT INTO knowledge.crawl_page_decisions AS c (run_id, document_id, depth,"
                    "   discovered_via, sitemap_lastmod, prefetched)"
                    "   SELECT :r, ids.id, t.dp, t.v, t.lm, t.pf FROM ids JOIN t ON t.cu = ids.canonical_url"
                    "   ON CONFLICT (run_id, document_id) DO UPDATE SET"
                    "   sitemap_lastmod = COALESCE(EXCLUDED.sitemap_lastmod, c.sitemap_lastmod),"
                    "   prefetched = CASE WHEN c.prefetched IS NULL AND c.fetch_outcome IS NULL"
                    "     THEN EXCLUDED.prefetched ELSE c.prefetched END"
                    "   WHERE (EXCLUDED.sitemap_lastmod IS NOT NULL"
                    "     AND EXCLUDED.sitemap_lastmod IS DISTINCT FROM c.sitemap_lastmod)"
                    "   OR (EXCLUDED.prefetched IS NOT NULL AND c.prefetched IS NULL AND c.fetch_outcome IS NULL)"
                    # xmax is 0 only on a row this statement inserted (an updated one carries its own xid).
                    "   RETURNING c.xmax = 0 AS inserted)"
                    " SELECT count(*) FILTER (WHERE inserted) FROM ledger"
                ),
                params,
            ).scalar_one())
    if new >= ANALYZE_AFTER_ROWS:
        # Fresh statistics for the tables this run just grew. Without them the planner keeps planning
        # scrape's ledger updates (one statement per 100 URLs) for the tables as they were, nearly empty,
        # and scans the whole run's ledger once per updated row, so the database's cost per page grows
        # with the run (infra/bench/README.md). Only where the statistics know too few rows: a site's
        # ledger grows by a run's size every recrawl, and sampling it again each time cost every recrawl
        # more (ANALYZE reads up to 30,000 rows). ANALYZE needs the tables' owner: it runs as the
        # migration role, not the application role (it reads statistics, no tenant's rows come back).
        with engine.execution_options(**{ADMIN_OPTION: True}).begin() as conn:
            stale = [f"knowledge.{name}" for (name,) in conn.execute(sa.text(
                "SELECT relname FROM pg_class WHERE relnamespace = 'knowledge'::regnamespace"
                " AND relname IN ('crawl_page_decisions', 'documents') AND reltuples < :n ORDER BY relname"),
                {"n": new * STATISTICS_COVER})]
            if stale:
                conn.execute(sa.text(f"ANALYZE {', '.join(stale)}"))
    return new
