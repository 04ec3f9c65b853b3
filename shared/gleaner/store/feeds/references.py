"""The reference-layer repository: the feed-article ledger, reference items, the quality log, search.

Every method is one short transaction and one statement per batch. Idempotency
comes from keys: the ledger's UNIQUE (workspace_id, normalised_url) makes a
re-sent article a duplicate (``ON CONFLICT DO NOTHING RETURNING`` answers nothing),
reference items are keyed by their URL-derived id, quality findings by a dedup key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from gleaner.errors import InvalidInput
from gleaner.references.identity import REFERENCES_SITE, source_document_id
from gleaner.store.backends.sqlstore import SqlStore
from gleaner.urls import fetchable, host_of, path_of, url_hash

# Findings that a later walk cannot change by itself: the URL is not retried until new ledger rows
# arrive for it or a full reprocess is asked for. (An SSRF refusal is re-checked every walk instead:
# the check costs no request to the target, and GLEANER_ALLOW_NETWORKS may have changed.)
PERMANENT_FLAGS = ("fetch_refused", "extraction_empty")
PREVIEW_CHARS = 280


@dataclass(frozen=True, slots=True)
class ArticleRow:
    """One validated article of a webhook batch."""

    workspace_id: str
    external_url: str
    normalised_url: str
    title: str
    summary: str | None
    published_at: datetime | None
    feed_source: str | None


@dataclass(frozen=True, slots=True)
class LandingItem:
    """One normalised URL to land, with every passed ledger row that names it."""

    url: str  # the normalised URL: the item's identity
    # What is requested: the URL as a poller spelled it (fragment dropped), preferring a spelling that is
    # already the normalised one, else the earliest row's.
    fetch_url: str
    ledger_ids: tuple[str, ...]
    workspace_ids: tuple[str, ...]  # provenance only: never written to the reference item
    title: str
    summary: str | None
    published_at: datetime | None
    ingestion_source: str  # rss_feed | url_import
    epoch: datetime


@dataclass(frozen=True, slots=True)
class ReferenceRow:
    id: str
    url: str
    title: str
    body: str
    summary: str | None
    published_at: datetime | None
    source_document_id: str
    source_snapshot_id: str | None
    ingestion_source: str
    extraction_method: str
    mime_type: str
    epoch: datetime


# A reference item is a workspace's when that workspace's feed brought it (a ledger row links it); with
# ``:w`` null (the operator) every item. The same rule as a workspace's texts (textsapi.py).
OF_WORKSPACE = (" (CAST(:w AS text) IS NULL OR EXISTS (SELECT 1 FROM knowledge.feed_articles fa"
                " WHERE fa.reference_item_id = r.id AND fa.workspace_id = CAST(:w AS text)))")


def _fetchable_or(spelled: str, normalised: str) -> str:
    # Sites can care about a trailing slash or a parameter the normalisation drops: ask as the poller did.
    try:
        return fetchable(spelled)
    except InvalidInput:
        return normalised


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


QUALITY_FLAGS = ("ssrf_rejected", "fetch_refused", "extraction_empty")  # the table's CHECK
QUALITY_COLUMNS = "id, flag_type, severity, source_url, reason, feed_article_ids, details, created_at"


def quality_row(r: Any) -> dict[str, Any]:
    """One ``ingestion_quality_log`` row (selected as QUALITY_COLUMNS) as the API shows it."""
    return {"id": str(r[0]), "flag_type": r[1], "severity": r[2], "source_url": r[3], "reason": r[4],
            "feed_article_ids": [str(i) for i in r[5]], "details": r[6], "created_at": _iso(r[7])}


class ReferenceStore(SqlStore):
    # -- the ledger -----------------------------------------------------------------------------

    def record_articles(self, rows: Sequence[ArticleRow]) -> list[str | None]:
        """Insert ledger rows; per input row, its new id, or None if it was a duplicate."""
        if not rows:
            return []
        first: dict[tuple[str, str], int] = {}
        for index, row in enumerate(rows):
            first.setdefault((row.workspace_id, row.normalised_url), index)
        unique = [rows[i] for i in sorted(first.values())]
        inserted = self._write_all(
            "INSERT INTO knowledge.feed_articles (workspace_id, feed_source, external_url, normalised_url,"
            " title, summary, published_at, passed)"
            " SELECT w, fs, eu, nu, t, s, CAST(p AS timestamptz), true FROM unnest(CAST(:w AS text[]),"
            " CAST(:fs AS text[]), CAST(:eu AS text[]), CAST(:nu AS text[]), CAST(:t AS text[]),"
            " CAST(:s AS text[]), CAST(:p AS text[])) AS x(w, fs, eu, nu, t, s, p)"
            " ON CONFLICT (workspace_id, normalised_url) DO NOTHING"
            " RETURNING id, workspace_id, normalised_url",
            {"w": [r.workspace_id for r in unique], "fs": [r.feed_source for r in unique],
             "eu": [r.external_url for r in unique], "nu": [r.normalised_url for r in unique],
             "t": [r.title for r in unique], "s": [r.summary for r in unique],
             "p": [_iso(r.published_at) for r in unique]},
        )
        new_ids = {(str(r[1]), str(r[2])): str(r[0]) for r in inserted}
        out: list[str | None] = []
        for index, row in enumerate(rows):
            key = (row.workspace_id, row.normalised_url)
            out.append(new_ids.get(key) if first[key] == index else None)
        return out

    def pending(self, article_ids: Sequence[str] | None = None, full_reprocess: bool = False,
                ) -> list[LandingItem]:
        """URLs to land: those with a passed row not yet backlinked (all passed URLs on a full reprocess).

        ``article_ids`` narrows to the URLs of those rows. Each item gathers every passed row of its URL,
        whichever workspace sent it: one reference per URL however many workspaces share it.
        """
        rows = self._all(
            "WITH urls AS (SELECT DISTINCT normalised_url FROM knowledge.feed_articles"
            "   WHERE passed AND (:full OR reference_item_id IS NULL)"
            "   AND (CAST(:ids AS uuid[]) IS NULL OR id = ANY(CAST(:ids AS uuid[]))))"
            " SELECT f.normalised_url, array_agg(f.id::text ORDER BY f.ingested_at, f.id),"
            "   array_agg(DISTINCT f.workspace_id),"
            "   (array_agg(f.title ORDER BY f.ingested_at DESC, f.id))[1],"
            "   (array_agg(f.summary ORDER BY f.ingested_at DESC, f.id)"
            "     FILTER (WHERE f.summary IS NOT NULL))[1],"
            "   min(f.published_at), bool_or(f.feed_source IS NOT NULL), max(f.ingested_at),"
            "   (array_agg(f.external_url ORDER BY f.external_url = f.normalised_url DESC,"
            "     f.ingested_at, f.id))[1]"
            " FROM knowledge.feed_articles f JOIN urls USING (normalised_url) WHERE f.passed"
            " GROUP BY f.normalised_url"
            " HAVING :full OR NOT EXISTS (SELECT 1 FROM knowledge.ingestion_quality_log q"
            "   WHERE q.source_url = f.normalised_url AND q.flag_type = ANY(CAST(:perm AS text[]))"
            "   AND q.feed_article_ids @> array_agg(f.id) AND q.feed_article_ids <@ array_agg(f.id))"
            " ORDER BY min(f.ingested_at), f.normalised_url",
            {"full": full_reprocess, "ids": list(article_ids) if article_ids is not None else None,
             "perm": list(PERMANENT_FLAGS)},
        )
        return [
            LandingItem(url=r[0], fetch_url=_fetchable_or(r[8], r[0]), ledger_ids=tuple(r[1]),
                        workspace_ids=tuple(sorted(r[2])), title=r[3], summary=r[4], published_at=r[5],
                        ingestion_source="rss_feed" if r[6] else "url_import", epoch=r[7])
            for r in rows
        ]

    def articles_of(self, reference_id: str) -> list[dict[str, Any]]:
        """The ledger rows backlinked to a reference item (workspace provenance lives here)."""
        rows = self._all(
            "SELECT id, workspace_id, feed_source, external_url, published_at, ingested_at"
            " FROM knowledge.feed_articles WHERE reference_item_id = :r ORDER BY ingested_at, id",
            {"r": reference_id},
        )
        return [{"id": str(r[0]), "workspace_id": r[1], "feed_source": r[2], "external_url": r[3],
                 "published_at": _iso(r[4]), "ingested_at": _iso(r[5])} for r in rows]

    # -- landing --------------------------------------------------------------------------------

    def upsert_document(self, url: str, title: str, kind: str) -> str:
        """The reference's source document (id = uuid5 "sd:" + url) under the ``_references`` site."""
        row = self._write_first(
            "INSERT INTO knowledge.documents (id, site_domain, kind, path, origin, source_url,"
            " canonical_url, url_hash, title, status)"
            " VALUES (:id, :s, CAST(:k AS knowledge.document_kind), :p, 'scrape', :u, :u, :h, :t,"
            " 'discovered')"
            " ON CONFLICT (site_domain, canonical_url) WHERE canonical_url IS NOT NULL"
            " DO UPDATE SET title = EXCLUDED.title, kind = EXCLUDED.kind, updated_at = now() RETURNING id",
            {"id": source_document_id(url), "s": REFERENCES_SITE, "k": kind,
             "p": "/" + host_of(url) + path_of(url), "u": url, "h": url_hash(url), "t": title},
        )
        return str(row[0])

    def land(self, item: ReferenceRow, ledger_ids: Sequence[str]) -> bool:
        """Upsert the reference item and backlink its ledger rows, in one transaction.

        True if the item was written (new, or its content or ledger facts changed); False if identical.
        """
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.text(
                    "INSERT INTO knowledge.reference_items (id, title, body, summary, source_url, published_at,"
                    " source_document_id, source_snapshot_id, ingestion_source, extraction_method, mime_type,"
                    " content_epoch, layer)"
                    " VALUES (:id, :t, :b, :s, :u, :p, :d, :sn, :src, :em, :mt, :ep, 'research')"
                    " ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title, body = EXCLUDED.body,"
                    " summary = EXCLUDED.summary, published_at = EXCLUDED.published_at,"
                    " source_snapshot_id = EXCLUDED.source_snapshot_id, extraction_method = EXCLUDED.extraction_method,"
                    " mime_type = EXCLUDED.mime_type, ingestion_source = EXCLUDED.ingestion_source,"
                    " content_epoch = EXCLUDED.content_epoch, updated_at = now()"
                    " WHERE (knowledge.reference_items.title, knowledge.reference_items.body,"
                    "   knowledge.reference_items.summary, knowledge.reference_items.published_at,"
                    "   knowledge.reference_items.source_snapshot_id, knowledge.reference_items.content_epoch)"
                    "   IS DISTINCT FROM (EXCLUDED.title, EXCLUDED.body, EXCLUDED.summary, EXCLUDED.published_at,"
                    "   EXCLUDED.source_snapshot_id, EXCLUDED.content_epoch)"
                    " RETURNING id"
                ),
                {"id": item.id, "t": item.title, "b": item.body, "s": item.summary, "u": item.url,
                 "p": item.published_at, "d": item.source_document_id, "sn": item.source_snapshot_id,
                 "src": item.ingestion_source, "em": item.extraction_method, "mt": item.mime_type,
                 "ep": item.epoch},
            ).first()
            conn.execute(
                sa.text(
                    "UPDATE knowledge.feed_articles SET reference_item_id = :r"
                    " WHERE id = ANY(CAST(:ids AS uuid[])) AND passed"
                    " AND reference_item_id IS DISTINCT FROM CAST(:r AS uuid)"
                ),
                {"r": item.id, "ids": list(ledger_ids)},
            )
        return row is not None

    def log_quality(self, flag: str, url: str, reason: str, ledger_ids: Sequence[str],
                    details: dict[str, Any] | None = None, severity: str = "error") -> bool:
        """Record a finding once per (flag, URL, reason, ledger rows); True if this call wrote it."""
        ids = sorted(ledger_ids)
        key = hashlib.sha1("\x1f".join([flag, url, reason, *ids]).encode("utf-8")).hexdigest()
        row = self._write_first(
            "INSERT INTO knowledge.ingestion_quality_log (flag_type, severity, source_url, reason,"
            " feed_article_ids, details, dedup_key)"
            " VALUES (:f, :sev, :u, :why, CAST(:ids AS uuid[]), CAST(:d AS jsonb), :k)"
            " ON CONFLICT (dedup_key) DO NOTHING RETURNING id",
            {"f": flag, "sev": severity, "u": url, "why": reason, "ids": ids,
             "d": json.dumps(details or {}, default=str, sort_keys=True), "k": key},
        )
        return row is not None

    def quality_log(self, url: str | None = None) -> list[dict[str, Any]]:
        where = "WHERE source_url = :u" if url is not None else ""
        rows = self._all(f"SELECT {QUALITY_COLUMNS} FROM knowledge.ingestion_quality_log {where}"
                         " ORDER BY created_at, id", {"u": url})
        return [quality_row(r) for r in rows]

    # -- retrieval (seed WP-B: two steps) ----------------------------------------------------------

    def search(self, query: str, limit: int = 20, workspace_id: str | None = None) -> list[dict[str, Any]]:
        """Step 1: ranked previews with each score separately and the provenance head.

        ``fulltext_score`` is ts_rank_cd normalised to [0, 1) (rank / (rank + 1)) over title (A),
        summary (B) and body (C); ``embedding_score`` is null until reference items carry embeddings.
        With ``workspace_id``, only the items that workspace's feed brought (:data:`OF_WORKSPACE`).
        """
        rows = self._all(
            "WITH q AS (SELECT websearch_to_tsquery('english', :q) AS tsq)"
            " SELECT r.id, r.title, left(r.summary, :n),"
            "   ts_headline('english', left(r.body, 20000), q.tsq,"
            "     'MaxFragments=2, MinWords=8, MaxWords=30, StartSel=**, StopSel=**'),"
            "   round(ts_rank_cd(r.search_vector, q.tsq, 32)::numeric, 4),"
            "   r.source_url, r.published_at, r.source_document_id, r.source_snapshot_id,"
            "   r.ingestion_source, r.extraction_method, r.layer"
            " FROM knowledge.reference_items r, q WHERE r.search_vector @@ q.tsq AND" + OF_WORKSPACE +
            " ORDER BY ts_rank_cd(r.search_vector, q.tsq, 32) DESC, r.published_at DESC NULLS LAST, r.id"
            " LIMIT :lim",
            {"q": query, "n": PREVIEW_CHARS, "lim": limit, "w": workspace_id},
        )
        return [
            {"reference_id": str(r[0]), "title": r[1], "summary_preview": r[2], "body_preview": r[3],
             "fulltext_score": float(r[4]), "embedding_score": None, "source_url": r[5],
             "published_at": _iso(r[6]), "source_document_id": str(r[7]),
             "source_snapshot_id": str(r[8]) if r[8] else None, "ingestion_source": r[9],
             "extraction_method": r[10], "layer": r[11]}
            for r in rows
        ]

    def previews(self, reference_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The search's preview rows for items found by meaning alone (no words matched: score 0)."""
        rows = self._all(
            "SELECT r.id, r.title, left(r.summary, :n), left(r.body, :n), r.source_url, r.published_at,"
            " r.source_document_id, r.source_snapshot_id, r.ingestion_source, r.extraction_method, r.layer"
            " FROM knowledge.reference_items r WHERE r.id = ANY(CAST(:i AS uuid[]))",
            {"n": PREVIEW_CHARS, "i": list(reference_ids)},
        )
        return [
            {"reference_id": str(r[0]), "title": r[1], "summary_preview": r[2], "body_preview": r[3],
             "fulltext_score": 0.0, "embedding_score": None, "source_url": r[4], "published_at": _iso(r[5]),
             "source_document_id": str(r[6]), "source_snapshot_id": str(r[7]) if r[7] else None,
             "ingestion_source": r[8], "extraction_method": r[9], "layer": r[10]}
            for r in rows
        ]

    def get(self, reference_id: str) -> dict[str, Any] | None:
        """Step 2: the whole item, verbatim, with its ledger backlinks."""
        row = self._first(
            "SELECT id, title, body, summary, source_url, published_at, primary_domain, primary_subtopic,"
            " layer, source_document_id, source_snapshot_id, ingestion_source, extraction_method,"
            " mime_type, created_at, updated_at FROM knowledge.reference_items WHERE id = :r",
            {"r": reference_id},
        )
        if row is None:
            return None
        keys = ("reference_id", "title", "body", "summary", "source_url", "published_at", "primary_domain",
                "primary_subtopic", "layer", "source_document_id", "source_snapshot_id", "ingestion_source",
                "extraction_method", "mime_type", "created_at", "updated_at")
        item = dict(zip(keys, row, strict=True))
        for key in ("reference_id", "source_document_id", "source_snapshot_id"):
            item[key] = str(item[key]) if item[key] is not None else None
        for key in ("published_at", "created_at", "updated_at"):
            item[key] = _iso(item[key])
        item["articles"] = self.articles_of(item["reference_id"])
        return item

    def counts(self) -> dict[str, int]:
        """Row counts of the reference layer (for tests and the operator)."""
        row = self._first(
            "SELECT (SELECT count(*) FROM knowledge.feed_articles),"
            " (SELECT count(*) FROM knowledge.reference_items),"
            " (SELECT count(*) FROM knowledge.ingestion_quality_log),"
            " (SELECT count(*) FROM knowledge.documents WHERE site_domain = :s),"
            " (SELECT count(*) FROM knowledge.document_snapshots s JOIN knowledge.documents d"
            "   ON d.id = s.document_id WHERE d.site_domain = :s)",
            {"s": REFERENCES_SITE},
        )
        return dict(zip(("feed_articles", "reference_items", "quality_log", "documents", "snapshots"),
                        (int(v) for v in row), strict=True))
