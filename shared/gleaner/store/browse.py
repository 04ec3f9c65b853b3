"""Reads for the back office: sites, runs by site, one level of a site's tree, filtered document pages.

Every list is paginated in SQL (``LIMIT``/``OFFSET`` with a total), and the tree
is read one level at a time from the ``(site_domain, path text_pattern_ops)``
index, so a 20,000-page site costs one folder's worth of rows per request.
Nothing here writes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from gleaner.store.backends.sqlstore import SqlStore
from gleaner.store.feeds.references import QUALITY_COLUMNS, quality_row
from gleaner.store.reads import URL_REASON, URL_STATUS

DOCUMENT_STATUSES = ("discovered", "active", "failed", "stale", "blocked", "superseded", "erased")
_STATUS = "CASE WHEN d.is_deleted AND d.skip_reason = 'erased' THEN 'erased' ELSE d.status::text END"
SCRAPE_POLICIES = ("scrape", "skip")
DOCUMENT_ORIGINS = ("scrape", "upload", "feedback", "unknown")


def _like_prefix(prefix: str) -> str:
    """A LIKE pattern matching paths that start with ``prefix`` literally."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"

_DOC_COLUMNS = (
    # An erased page is shown by its erased form (store/documents/erasure.py) with the status "erased".
    "d.id, d.site_domain, d.canonical_url, d.path,"
    f" {_STATUS}, d.scrape_policy::text, d.title,"
    " d.current_snapshot_id, d.status_reason, d.skip_reason, d.blocked_reason, d.origin::text, d.tags,"
    " d.http_etag, d.http_last_modified, d.last_fetched_at, d.last_seen_at,"
    " (SELECT count(*) FROM knowledge.document_snapshots v WHERE v.document_id = d.id),"
    " s.version, s.fetch_status, s.byte_size, s.fetch_time_ms, s.created_at"
)
_DOC_KEYS = ("id", "site_domain", "url", "path", "status", "scrape_policy", "title", "current_snapshot_id",
             "status_reason", "skip_reason", "blocked_reason", "origin", "tags", "etag", "last_modified",
             "last_fetched_at", "last_seen_at", "versions", "version", "http_status", "byte_size", "fetch_ms",
             "version_created_at")


def _doc(row: Any) -> dict[str, Any]:
    out = dict(zip(_DOC_KEYS, row, strict=True))
    for key in ("id", "current_snapshot_id"):
        out[key] = str(out[key]) if out[key] else None
    for key in ("last_fetched_at", "last_seen_at", "version_created_at"):
        out[key] = out[key].isoformat() if out[key] else None
    out["tags"] = list(out["tags"] or [])
    out["versions"] = int(out["versions"])
    return out


class BrowseStore(SqlStore):
    """The back office's reads (``Deps.browse``)."""

    def sites(self) -> list[dict[str, Any]]:
        """Every site with documents or a run that did not fail: counts by status and its latest run.

        A crawl of a mistyped host fails before it keeps anything: that run stays in the runs index,
        but it makes no site."""
        rows = self._all(
            "WITH s AS (SELECT site_domain FROM knowledge.documents"
            "   UNION SELECT site_domain FROM knowledge.crawl_runs WHERE status <> 'failed')"
            " SELECT s.site_domain,"
            " (SELECT count(*) FROM knowledge.documents d"
            "   WHERE d.site_domain = s.site_domain AND NOT d.is_deleted),"
            " (SELECT count(*) FROM knowledge.documents d WHERE d.site_domain = s.site_domain AND NOT d.is_deleted"
            "   AND d.status = 'active'),"
            " r.id, r.status::text, r.started_at"
            " FROM s LEFT JOIN LATERAL (SELECT id, status, started_at FROM knowledge.crawl_runs c"
            "   WHERE c.site_domain = s.site_domain ORDER BY c.created_at DESC LIMIT 1) r ON TRUE"
            " ORDER BY s.site_domain")
        return [{"site_domain": r[0], "documents": int(r[1]), "active": int(r[2]),
                 "last_run": {"run_id": str(r[3]), "status": r[4], "started_at": r[5].isoformat() if r[5] else None}
                 if r[3] else None} for r in rows]


    def site_exists(self, site: str) -> bool:
        return bool(self._scalar(
            "SELECT EXISTS (SELECT 1 FROM knowledge.documents WHERE site_domain = :s)"
            " OR EXISTS (SELECT 1 FROM knowledge.crawl_runs WHERE site_domain = :s)", {"s": site}))


    def run_ids(self, site: str | None, limit: int, offset: int, status: str | None = None) -> tuple[list[str], int]:
        """Newest first: one page of run ids (of one site or all, in one status or any) and how many there are."""
        params = {"s": site, "n": limit, "o": offset, "st": status}
        where = ("(CAST(:s AS text) IS NULL OR site_domain = :s)"
                 " AND (CAST(:st AS text) IS NULL OR status::text = :st)")
        with self.engine.connect() as conn:
            ids = conn.execute(sa.text(f"SELECT id FROM knowledge.crawl_runs WHERE {where}"
                                       " ORDER BY created_at DESC, id LIMIT :n OFFSET :o"), params).scalars().all()
            total = conn.execute(sa.text(f"SELECT count(*) FROM knowledge.crawl_runs WHERE {where}"), params).scalar()
        return [str(i) for i in ids], int(total or 0)


    def run_urls_page(self, run_id: str, status: str | None, limit: int, offset: int
                      ) -> tuple[list[dict[str, Any]], int]:
        """One page of a run's URLs with their status and reason (the shape of ``ReadStore.run_urls``)."""
        inner = (
            f"SELECT d.id AS document_id, d.canonical_url, {URL_STATUS} AS status, {URL_REASON} AS reason,"
            " c.fetch_status, c.snapshot_outcome::text AS snapshot, c.decision::text AS decision"
            " FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id"
            " JOIN knowledge.crawl_runs r ON r.id = c.run_id WHERE c.run_id = :r"
        )
        params = {"r": run_id, "st": status, "n": limit, "o": offset}
        where = "CAST(:st AS text) IS NULL OR u.status = :st"
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(f"SELECT * FROM ({inner}) u WHERE {where} ORDER BY 3, 2 LIMIT :n OFFSET :o"),
                                params).all()
            total = conn.execute(sa.text(f"SELECT count(*) FROM ({inner}) u WHERE {where}"), params).scalar()
        return ([{"document_id": str(r[0]), "url": r[1], "status": r[2], "reason": r[3], "http_status": r[4],
                  "snapshot": r[5], "decision": r[6]} for r in rows], int(total or 0))




    def document(self, document_id: str) -> dict[str, Any] | None:
        row = self._first(
            f"SELECT {_DOC_COLUMNS} FROM knowledge.documents d"
            " LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
            " WHERE d.id = :d AND (NOT d.is_deleted OR d.skip_reason = 'erased')", {"d": document_id})
        return _doc(row) if row is not None else None


    def documents(self, site: str, *, status: str | None = None, policy: str | None = None,
                  origin: str | None = None, tag: str | None = None, prefix: str | None = None,
                  direct_only: bool = False, limit: int = 100, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """One page of a site's documents by path, filtered; ``direct_only``: only those right under ``prefix``."""
        where = ["d.site_domain = :s", "(NOT d.is_deleted OR d.skip_reason = 'erased')"]
        params: dict[str, Any] = {"s": site, "n": limit, "o": offset}
        filters = (("st", status, f"{_STATUS} = :st"), ("po", policy, "d.scrape_policy::text = :po"),
                   ("og", origin, "d.origin::text = :og"), ("tg", tag, ":tg = ANY(d.tags)"),
                   ("pf", _like_prefix(prefix) if prefix else None, "d.path LIKE :pf"))
        for key, value, clause in filters:
            if value:
                where.append(clause)
                params[key] = value
        if prefix and direct_only:
            where.append("position('/' in substr(d.path, :pn)) = 0")
            params["pn"] = len(prefix) + 1
        clause = " AND ".join(where)
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                f"SELECT {_DOC_COLUMNS} FROM knowledge.documents d"
                " LEFT JOIN knowledge.document_snapshots s ON s.id = d.current_snapshot_id"
                f" WHERE {clause} ORDER BY d.path, d.id LIMIT :n OFFSET :o"), params).all()
            total = conn.execute(sa.text(f"SELECT count(*) FROM knowledge.documents d WHERE {clause}"), params).scalar()
        return [_doc(r) for r in rows], int(total or 0)


    def tree_folders(self, site: str, prefix: str) -> list[dict[str, Any]]:
        """The folders right under ``prefix`` (which ends in '/'), synthesised from the paths below it,
        each with how many documents it holds and how many of them are in each status."""
        rows = self._all(
            "SELECT seg, count(*), jsonb_object_agg(st, n) FROM ("
            "  SELECT split_part(substr(path, :pn), '/', 1) AS seg, status::text AS st, count(*) AS n"
            "  FROM knowledge.documents WHERE site_domain = :s AND NOT is_deleted AND path LIKE :pf"
            "  AND position('/' in substr(path, :pn)) > 0 GROUP BY 1, 2) g GROUP BY seg ORDER BY seg",
            {"s": site, "pf": _like_prefix(prefix), "pn": len(prefix) + 1})
        out = []
        for seg, _groups, statuses in rows:
            counts = {str(k): int(v) for k, v in dict(statuses).items()}
            out.append({"name": seg + "/", "prefix": prefix + seg + "/", "documents": sum(counts.values()),
                        "statuses": counts})
        return out


    def citations_of(self, document_id: str) -> list[dict[str, Any]]:
        """The citations that pin a document's versions (``gleaner cite``), newest first."""
        rows = self._all(
            "SELECT id, version, text_hash, span_start, span_end, quote, created_at, erased_at IS NOT NULL"
            " FROM knowledge.citations WHERE document_id = :d ORDER BY created_at DESC, id", {"d": document_id})
        return [{"citation_id": str(r[0]), "version": r[1], "text_hash": r[2], "start": r[3], "end": r[4],
                 "quote": r[5], "created_at": r[6].isoformat(), "erased": bool(r[7])} for r in rows]


    def quality_log(self, kind: str | None, since: datetime | None, limit: int, offset: int
                    ) -> tuple[list[dict[str, Any]], int]:
        """Newest first: one page of the ingestion quality log (of one flag type, from a time on) and the total."""
        params = {"k": kind, "t": since, "n": limit, "o": offset}
        where = ("(CAST(:k AS text) IS NULL OR flag_type = :k)"
                 " AND (CAST(:t AS timestamptz) IS NULL OR created_at >= CAST(:t AS timestamptz))")
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(f"SELECT {QUALITY_COLUMNS} FROM knowledge.ingestion_quality_log WHERE {where}"
                                        " ORDER BY created_at DESC, id LIMIT :n OFFSET :o"), params).all()
            total = conn.execute(sa.text(f"SELECT count(*) FROM knowledge.ingestion_quality_log WHERE {where}"),
                                 params).scalar()
        return [quality_row(r) for r in rows], int(total or 0)


    def delivery_subscription(self, delivery_id: str) -> str | None:
        """The subscription of a delivery, if the transaction's tenant may see that subscription.

        Deliveries carry no site_domain; the join through ``notify_subscriptions`` (row-level security)
        is what keeps one site from another's deliveries."""
        with self.engine.connect() as conn:
            found = conn.execute(sa.text(
                "SELECT d.subscription_id FROM knowledge.notify_deliveries d"
                " JOIN knowledge.notify_subscriptions s ON s.id = d.subscription_id WHERE d.id = CAST(:i AS uuid)"),
                {"i": delivery_id}).scalar()
        return str(found) if found is not None else None
