"""Erasure (seed 004): every body of a document removed, the erasure recorded, its content blocklisted.

Order, so that a crash at any point is finished by running the erasure again:

1. one transaction records the erasure (who, when, why, the keyed digests), adds
   the digests to the tenant's blocklist and marks the document deleted and
   skipped: from then on nothing brings the content back, even mid-erasure;
2. the blobs go (every snapshot's content.md and raw.md, the run artefacts and
   samples of every run that fetched the page);
3. one transaction removes the rows that held content: the versions and their
   links to canonical text, the canonical text and its spans unless another
   document's version still uses the same text, the reference item made of the
   page, and it clears the quotes of citations of the page (they become
   unverifiable, never verified).

A text shared with another document is kept for that document (its owner did
not ask for erasure) and reported; its digests are blocklisted all the same.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gleaner.changes.events import EventType
from gleaner.provenance.digests import DIGEST_SCHEME, DigestKind, erasure_digest, tenant_key
from gleaner.retrieval.index import remove_documents
from gleaner.store.blobs import BlobStore, run_content_key, run_raw_key, sample_key
from gleaner.store.events import record_status_change
from gleaner.store.sqlstore import SqlStore, json_value

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


@dataclass
class ErasureReport:
    erasure_id: str
    site_domain: str
    document_id: str
    url: str
    blobs_deleted: int = 0
    versions_removed: int = 0
    texts_removed: int = 0
    texts_shared: list[str] = field(default_factory=list)  # text hashes kept for other documents
    citations_cleared: int = 0
    digests: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class ErasureStore(SqlStore):
    def has_erasures(self, site: str) -> bool:
        return bool(self._scalar("SELECT EXISTS (SELECT 1 FROM knowledge.erased_digests WHERE site_domain = :s)",
                                 {"s": site}))

    def blocked_digests(self, site: str, digests: Sequence[str]) -> set[str]:
        if not digests:
            return set()
        rows = self._all(
            "SELECT digest FROM knowledge.erased_digests WHERE site_domain = :s AND digest = ANY(CAST(:d AS text[]))",
            {"s": site, "d": list(digests)},
        )
        return {r[0] for r in rows}

    def settle_erased(self, run_id: str | None, document_ids: Sequence[str]) -> set[str]:
        """Of these documents, the ones erased since they were fetched; their ledger rows in the run are
        settled as refused-erased (the run can finish), and nothing of them may be versioned."""
        if not document_ids:
            return set()
        with self._tx() as conn:
            erased = conn.execute(
                sa.text("SELECT id FROM knowledge.documents WHERE id = ANY(CAST(:d AS uuid[])) AND is_deleted"),
                {"d": list(document_ids)},
            ).scalars().all()
            if erased and run_id is not None:
                conn.execute(
                    sa.text("UPDATE knowledge.crawl_page_decisions SET fetch_outcome = 'refused-erased',"
                            " fetch_reason = 'content was erased' WHERE run_id = :r"
                            " AND document_id = ANY(CAST(:d AS uuid[])) AND snapshot_outcome IS NULL"),
                    {"r": run_id, "d": [str(e) for e in erased]},
                )
        return {str(e) for e in erased}

    def erasure_plan(self, document_id: str) -> dict[str, Any]:
        """What the document still holds: versions and their blob keys, texts, runs that fetched it."""
        with self.engine.connect() as conn:
            doc = conn.execute(
                sa.text("SELECT site_domain, canonical_url, url_hash FROM knowledge.documents WHERE id = :d"),
                {"d": document_id},
            ).one()
            snapshots = conn.execute(
                sa.text("SELECT id, processed_markdown_ref, raw_markdown_ref FROM knowledge.document_snapshots"
                        " WHERE document_id = :d ORDER BY version"),
                {"d": document_id},
            ).all()
            texts = conn.execute(
                sa.text("SELECT DISTINCT c.text_hash, convert_to(c.body, 'UTF8')"
                        " FROM knowledge.snapshot_texts t JOIN knowledge.document_snapshots s ON s.id = t.snapshot_id"
                        " JOIN knowledge.canonical_texts c ON c.text_hash = t.text_hash WHERE s.document_id = :d"),
                {"d": document_id},
            ).all()
            runs = conn.execute(
                sa.text("SELECT run_id FROM knowledge.crawl_page_decisions WHERE document_id = :d"),
                {"d": document_id},
            ).scalars().all()
        return {"site": doc[0], "url": doc[1] or "", "url_hash": doc[2],
                "snapshots": [(str(s[0]), s[1], s[2]) for s in snapshots],
                "texts": [(str(t[0]), bytes(t[1])) for t in texts], "runs": [str(r) for r in runs]}

    def record_erasure(self, site: str, document_id: str, url_digest: str, reason: str | None, by: str,
                       digests: Sequence[tuple[str, DigestKind]]) -> str:
        """Step 1: the erasure row, the blocklist, the document deleted and skipped; the erasure id."""
        with self._tx() as conn:
            erasure_id = conn.execute(
                sa.text("INSERT INTO knowledge.erasures (site_domain, document_id, url_digest, reason, requested_by,"
                        " digest_scheme, digests, removed) VALUES (:s, :d, :u, :why, :by, :scheme,"
                        " CAST(:dg AS jsonb), '{}'::jsonb) RETURNING id"),
                {"s": site, "d": document_id, "u": url_digest, "why": reason, "by": by, "scheme": DIGEST_SCHEME,
                 "dg": json_value([{"digest": d, "kind": str(k)} for d, k in digests])},
            ).scalar_one()
            conn.execute(
                sa.text("INSERT INTO knowledge.erased_digests (site_domain, digest, kind, erasure_id)"
                        " SELECT :s, d, k, :e FROM unnest(CAST(:d AS text[]), CAST(:k AS text[])) AS t(d, k)"
                        " ON CONFLICT DO NOTHING"),
                {"s": site, "e": erasure_id, "d": [d for d, _ in digests], "k": [str(k) for _, k in digests]},
            )
            # Subscribers learn the page is gone (document.removed), once per erasure, with the erasure.
            record_status_change(conn, document_id=document_id, type=EventType.REMOVED,
                                 cause=f"erasure:{erasure_id}")
            remove_documents(conn, [document_id])  # out of search in the erasure's first transaction
            conn.execute(
                sa.text("UPDATE knowledge.documents SET is_deleted = true, scrape_policy = 'skip',"
                        " skip_reason = 'erased', skip_by_decider = false, title = NULL, http_etag = NULL,"
                        " http_last_modified = NULL,"
                        " updated_at = now() WHERE id = :d"),
                {"d": document_id},
            )
        return str(erasure_id)

    def drop_erased_rows(self, erasure_id: str, document_id: str, report: ErasureReport) -> None:
        """Step 3: the rows that held the document's content."""
        with self._tx() as conn:
            report.citations_cleared = conn.execute(
                sa.text("UPDATE knowledge.citations SET quote = NULL, text_hash = NULL, snapshot_id = NULL,"
                        " erased_at = now() WHERE document_id = :d AND erased_at IS NULL"),
                {"d": document_id},
            ).rowcount
            conn.execute(
                sa.text("UPDATE knowledge.feed_articles SET reference_item_id = NULL WHERE reference_item_id IN"
                        " (SELECT id FROM knowledge.reference_items WHERE source_document_id = :d)"),
                {"d": document_id},
            )
            conn.execute(sa.text("DELETE FROM knowledge.reference_items WHERE source_document_id = :d"),
                         {"d": document_id})
            conn.execute(
                sa.text("UPDATE knowledge.crawl_page_decisions SET fetched_content_hash = NULL,"
                        " fetched_raw_hash = NULL, sample_uri = NULL WHERE document_id = :d"),
                {"d": document_id},
            )
            conn.execute(sa.text("UPDATE knowledge.documents SET current_snapshot_id = NULL WHERE id = :d"),
                         {"d": document_id})
            conn.execute(
                sa.text("DELETE FROM knowledge.document_conflicts WHERE entity_a_id = :d OR entity_b_id = :d"),
                {"d": document_id},
            )
            ids = conn.execute(sa.text("SELECT id FROM knowledge.document_snapshots WHERE document_id = :d"),
                               {"d": document_id}).scalars().all()
            removed, kept = drop_snapshots(conn, [str(i) for i in ids])
            report.versions_removed = len(ids)
            report.texts_removed = len(removed)
            report.texts_shared = kept
            conn.execute(
                sa.text("UPDATE knowledge.erasures SET removed = CAST(:r AS jsonb) WHERE id = :e"),
                {"e": erasure_id, "r": json_value({k: v for k, v in report.to_dict().items()
                                                   if k in ("blobs_deleted", "versions_removed", "texts_removed",
                                                            "citations_cleared", "texts_shared")})},
            )


def drop_snapshots(conn: Connection, snapshot_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """Delete versions and the canonical texts no other version uses; (texts removed, texts kept)."""
    if not snapshot_ids:
        return [], []
    ids = list(snapshot_ids)
    hashes = conn.execute(
        sa.text("SELECT DISTINCT text_hash FROM knowledge.snapshot_texts WHERE snapshot_id = ANY(CAST(:i AS uuid[]))"),
        {"i": ids},
    ).scalars().all()
    conn.execute(sa.text("UPDATE knowledge.crawl_page_decisions SET produced_snapshot_id = NULL"
                         " WHERE produced_snapshot_id = ANY(CAST(:i AS uuid[]))"), {"i": ids})
    conn.execute(sa.text("UPDATE knowledge.document_snapshots SET superseded_by = NULL"
                         " WHERE superseded_by = ANY(CAST(:i AS uuid[]))"), {"i": ids})
    if _table_exists(conn, "knowledge.composite_document_sources"):
        conn.execute(sa.text("UPDATE knowledge.composite_document_sources SET source_snapshot_id = NULL"
                             " WHERE source_snapshot_id = ANY(CAST(:i AS uuid[]))"), {"i": ids})
    conn.execute(sa.text("DELETE FROM knowledge.document_snapshots WHERE id = ANY(CAST(:i AS uuid[]))"), {"i": ids})
    removed = conn.execute(
        sa.text("DELETE FROM knowledge.canonical_texts c WHERE c.text_hash = ANY(CAST(:h AS text[]))"
                " AND NOT EXISTS (SELECT 1 FROM knowledge.snapshot_texts t WHERE t.text_hash = c.text_hash)"
                " AND NOT EXISTS (SELECT 1 FROM knowledge.citations x WHERE x.text_hash = c.text_hash)"
                " RETURNING c.text_hash"),
        {"h": list(hashes)},
    ).scalars().all()
    if removed:  # a text's spans and retrieval chunks go with it (no foreign key cascades: migration 0019)
        conn.execute(sa.text("DELETE FROM knowledge.text_spans WHERE text_hash = ANY(CAST(:h AS text[]))"),
                     {"h": list(removed)})
        conn.execute(sa.text("DELETE FROM knowledge.text_chunks WHERE text_hash = ANY(CAST(:h AS text[]))"),
                     {"h": list(removed)})
    kept = sorted(set(hashes) - set(removed))
    return sorted(removed), kept


def _table_exists(conn: Connection, name: str) -> bool:
    return conn.execute(sa.text("SELECT to_regclass(:n) IS NOT NULL"), {"n": name}).scalar_one()


class Blocklist:
    """The per-tenant blocklist of erased content, asked before anything is stored again."""

    def __init__(self, store: ErasureStore, secret: Callable[[], bytes]) -> None:
        self.store = store
        self._secret = secret

    def key(self, site: str) -> bytes:
        return tenant_key(self._secret(), site)

    def refused(self, site: str, items: Mapping[K, Sequence[bytes]]) -> set[K]:
        """The items any of whose byte strings (URL, body, text) is blocklisted for the tenant: one query."""
        # A tenant that never erased anything (nearly all) costs one indexed lookup, no hashing and no key.
        if not items or not self.store.has_erasures(site):
            return set()
        key = self.key(site)
        digests = {k: [erasure_digest(key, data) for data in values] for k, values in items.items()}
        hits = self.store.blocked_digests(site, sorted({d for values in digests.values() for d in values}))
        return {k for k, values in digests.items() if hits.intersection(values)} if hits else set()


def erase_document(store: ErasureStore, blobs: BlobStore, blocklist: Blocklist, document_id: str, reason: str | None,
                   by: str) -> ErasureReport:
    """Erase one document (module docstring); running it again finishes an erasure that was cut short."""
    plan = store.erasure_plan(document_id)
    site = plan["site"]
    key = blocklist.key(site)
    digests: list[tuple[str, DigestKind]] = [(erasure_digest(key, plan["url"].encode("utf-8")), DigestKind.URL)]
    keys: list[str] = []
    for _snapshot_id, content_ref, raw_ref in plan["snapshots"]:
        for ref in (content_ref, raw_ref):
            if not ref:
                continue
            keys.append(ref)
            # A body already deleted by an erasure cut short had its digest recorded then.
            with contextlib.suppress(KeyError):
                digests.append((erasure_digest(key, blobs.get(ref)), DigestKind.BODY))
    digests += [(erasure_digest(key, body), DigestKind.TEXT) for _hash, body in plan["texts"]]
    if plan["url_hash"]:
        for run_id in plan["runs"]:
            keys += [run_content_key(site, run_id, plan["url_hash"]), run_raw_key(site, run_id, plan["url_hash"]),
                     sample_key(site, run_id, plan["url_hash"])]
    unique = list(dict.fromkeys(digests))
    erasure_id = store.record_erasure(site, document_id, unique[0][0], reason, by, unique)
    report = ErasureReport(erasure_id, site, document_id, plan["url"], digests=len(unique))
    for blob_key in dict.fromkeys(keys):
        if blobs.delete(blob_key):
            report.blobs_deleted += 1
    store.drop_erased_rows(erasure_id, document_id, report)
    log.info("erased document %s of %s: %s", document_id, site, report.to_dict())
    return report
