"""Erasure (seed 004): every body of a document removed, the erasure recorded, its content blocklisted.

Order, so that a crash at any point is finished by running the erasure again:

1. one transaction records the erasure (who, when, why, the keyed digests), adds
   the digests to the tenant's blocklist and marks the document deleted and
   skipped: from then on nothing brings the content back, even mid-erasure;
2. the blobs go (every snapshot's content.md, raw.md and original.*, the run
   artefacts of every run that fetched the page: kept bodies, samples, raw and
   content copies), and the page's entries in those runs' map JSON name it by
   its erased form instead;
3. one transaction removes the rows that held content: the versions and their
   links to canonical text, the canonical text and its spans unless another
   document's version still uses the same text, the reference item made of the
   page, and it clears the quotes of citations of the page (they become
   unverifiable, never verified); the URL is replaced by its erased form
   (``erased:<keyed digest>``) in the document, its change events, its ledger
   rows and the links other pages' bodies held.

The erased form is what map makes of the URL when it is discovered again
(:meth:`Blocklist.erased_urls`): the document is found by it, excluded, never
fetched, and the URL is never written in clear again.

A text shared with another document is kept for that document (its owner did
not ask for erasure) and reported; its digests are blocklisted all the same.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gleaner.changes.events import EventType
from gleaner.provenance.digests import DIGEST_SCHEME, DigestKind, erasure_digest
from gleaner.retrieval.index import remove_documents
from gleaner.store.backends import generation
from gleaner.store.backends.blobs import (
    BlobStore,
    kept_answer_keys,
    map_key,
    run_answer_key,
    run_body_key,
    run_content_key,
    run_raw_key,
    sample_key,
)
from gleaner.store.backends.generation import cache_of
from gleaner.store.backends.sqlstore import SqlStore, json_value
from gleaner.store.documents.blocklist import ERASED_PREFIX, Blocklist, erased_form, is_erased_form
from gleaner.store.documents.routing import unfold_erased
from gleaner.store.documents.versiondrop import drop_snapshots
from gleaner.store.notifications.events import record_status_change
from gleaner.urls import url_hash

log = logging.getLogger(__name__)


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


def _has_erasures(conn: Connection, site: str) -> bool:
    return bool(conn.execute(sa.text("SELECT EXISTS (SELECT 1 FROM knowledge.erased_digests WHERE site_domain = :s)"),
                             {"s": site}).scalar())


class ErasureStore(SqlStore):
    def has_erasures(self, site: str) -> bool:
        """Kept per process while the cache generation stands: an erasure anywhere moves it
        (store/backends/generation.py)."""
        return cache_of(self, "_has_erasures", _has_erasures).get(site)

    def blocked_digests(self, site: str, digests: Sequence[str]) -> set[str]:
        if not digests:
            return set()
        rows = self._all(
            "SELECT digest FROM knowledge.erased_digests WHERE site_domain = :s AND digest = ANY(CAST(:d AS text[]))",
            {"s": site, "d": list(digests)},
        )
        return {r[0] for r in rows}

    def url_digests(self, site: str) -> set[str]:
        """The tenant's blocklisted URL digests (few: one per erased page)."""
        rows = self._all("SELECT digest FROM knowledge.erased_digests WHERE site_domain = :s AND kind = 'url'",
                         {"s": site})
        return {r[0] for r in rows}

    def sites_with_erased_urls(self) -> list[str]:
        return [str(r[0]) for r in self._all("SELECT DISTINCT site_domain FROM knowledge.erased_digests"
                                             " WHERE kind = 'url' ORDER BY 1")]

    def settle_erased(self, run_id: str | None, document_ids: Sequence[str], touch: bool = False) -> set[str]:
        """Of these documents, the ones erased since they were fetched; their ledger rows in the run are
        settled as refused-erased (the run can finish), and nothing of them may be versioned.

        ``touch``: also record the run's heartbeat (``touch_run``) in the same transaction, one fewer a message.
        """
        if not document_ids and not (touch and run_id is not None):
            return set()
        with self._tx() as conn:
            if touch and run_id is not None:
                conn.execute(sa.text("UPDATE knowledge.crawl_runs SET heartbeat_at = now() WHERE id = :r"),
                             {"r": run_id})
            if not document_ids:
                return set()
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
                sa.text("SELECT id, processed_markdown_ref, raw_markdown_ref, original_ref"
                        " FROM knowledge.document_snapshots"
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
            # A composite's versions hold its sources' bodies (and URLs): they go with the page.
            folded = conn.execute(
                sa.text("SELECT s.id, s.processed_markdown_ref, s.raw_markdown_ref, s.original_ref"
                        " FROM knowledge.composite_document_sources cs JOIN knowledge.document_snapshots s"
                        " ON s.composite_document_id = cs.composite_document_id WHERE cs.document_id = :d"),
                {"d": document_id},
            ).all()
        return {"site": doc[0], "url": doc[1] or "", "url_hash": doc[2],
                "snapshots": [(str(s[0]), s[1], s[2], s[3]) for s in snapshots],
                "composite_snapshots": [(str(s[0]), s[1], s[2], s[3]) for s in folded],
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
        generation.moved(self.engine)
        return str(erasure_id)

    def drop_erased_rows(self, erasure_id: str, document_id: str, report: ErasureReport, url: str,
                         url_digest: str) -> None:
        """Step 3: the rows that held the document's content; the URL replaced by its erased form."""
        with self._tx() as conn:
            _mask_url(conn, report.site_domain, document_id, url, url_digest)
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
            # A client's comments and flags may quote the page: they go with it.
            conn.execute(sa.text("DELETE FROM knowledge.document_remarks WHERE document_id = :d"), {"d": document_id})
            ids = conn.execute(sa.text("SELECT id FROM knowledge.document_snapshots WHERE document_id = :d"),
                               {"d": document_id}).scalars().all()
            removed, kept = drop_snapshots(conn, [str(i) for i in ids] + unfold_erased(conn, document_id, erasure_id))
            report.versions_removed = len(ids)
            report.texts_removed = len(removed)
            report.texts_shared = kept
            conn.execute(
                sa.text("UPDATE knowledge.erasures SET removed = CAST(:r AS jsonb) WHERE id = :e"),
                {"e": erasure_id, "r": json_value({k: v for k, v in report.to_dict().items()
                                                   if k in ("blobs_deleted", "versions_removed", "texts_removed",
                                                            "citations_cleared", "texts_shared")})},
            )


def _mask_url(conn: Connection, site: str, document_id: str, url: str, url_digest: str) -> None:
    """The URL, wherever the database held it, replaced by its erased form (or dropped from link lists)."""
    masked = erased_form(url_digest)
    conn.execute(
        sa.text("UPDATE knowledge.documents SET canonical_url = :m, source_url = :m, path = :m,"
                " url_hash = :h WHERE id = :d"),
        {"m": masked, "h": url_hash(masked), "d": document_id},
    )
    conn.execute(sa.text("UPDATE knowledge.document_events SET url = :m WHERE document_id = :d"),
                 {"m": masked, "d": document_id})
    if url and not is_erased_form(url):  # the events as sent to subscribers (the signed bodies kept)
        conn.execute(
            sa.text("UPDATE knowledge.notify_deliveries SET body = replace(body, :u, :m) WHERE event_seq IN"
                    " (SELECT seq FROM knowledge.document_events WHERE document_id = :d) AND strpos(body, :u) > 0"),
            {"u": url, "m": masked, "d": document_id},
        )
        # Digests list the event too: as an item, and in the body of a digest already sealed.
        conn.execute(
            sa.text("UPDATE knowledge.notify_deliveries SET body = replace(body, :u, :m) WHERE id IN"
                    " (SELECT delivery_id FROM knowledge.notify_digest_items WHERE event_seq IN"
                    " (SELECT seq FROM knowledge.document_events WHERE document_id = :d)) AND strpos(body, :u) > 0"),
            {"u": url, "m": masked, "d": document_id},
        )
        conn.execute(
            sa.text("UPDATE knowledge.notify_digest_items SET body = replace(body, :u, :m) WHERE event_seq IN"
                    " (SELECT seq FROM knowledge.document_events WHERE document_id = :d) AND strpos(body, :u) > 0"),
            {"u": url, "m": masked, "d": document_id},
        )
    # The ledger keeps the row (the run accounted for the page) but not what the site answered about it.
    conn.execute(sa.text("UPDATE knowledge.crawl_page_decisions SET prefetched = NULL, fetch_reason = NULL"
                         " WHERE document_id = :d"), {"d": document_id})
    conn.execute(sa.text("DELETE FROM knowledge.page_links WHERE document_id = :d"), {"d": document_id})
    if not url or is_erased_form(url):
        return
    conn.execute(
        sa.text("UPDATE knowledge.page_links SET links = links - CAST(:u AS text)"
                " WHERE site_domain = :s AND links @> jsonb_build_array(CAST(:u AS text))"),
        {"u": url, "s": site},
    )
    conn.execute(sa.text("UPDATE knowledge.crawl_runs SET target_url = :m WHERE site_domain = :s AND target_url = :u"),
                 {"m": masked, "s": site, "u": url})


def _mask_map(blobs: BlobStore, key: str, url: str, masked: str) -> bool:
    """Rewrite one run's map JSON with the URL's entries naming its erased form; True if it changed."""
    try:
        data = json.loads(blobs.get(key))
    except KeyError:
        return False
    text = json.dumps(data, sort_keys=True)
    if url not in text:
        return False
    for entry in data.get("links", []):
        for name in ("url", "source_url"):
            if entry.get(name) == url:
                entry[name] = masked
    if data.get("target_url") == url:
        data["target_url"] = masked
    data["problems"] = [p for p in data.get("problems", []) if url not in json.dumps(p)]
    # Blobs are create-only: the artefact is replaced by deleting it first (erasure may delete).
    blobs.delete(key)
    blobs.put(key, json.dumps(data, sort_keys=True).encode("utf-8"), "application/json")
    return True


def erase_document(store: ErasureStore, blobs: BlobStore, blocklist: Blocklist, document_id: str, reason: str | None,
                   by: str) -> ErasureReport:
    """Erase one document (module docstring); running it again finishes an erasure that was cut short."""
    plan = store.erasure_plan(document_id)
    site = plan["site"]
    key = blocklist.key(site)
    url = plan["url"]
    # An erasure cut short after its last step is run again on the erased form: the digest is in it.
    url_digest = url[len(ERASED_PREFIX):] if is_erased_form(url) else erasure_digest(key, url.encode("utf-8"))
    digests: list[tuple[str, DigestKind]] = [(url_digest, DigestKind.URL)]
    keys: list[str] = []
    for _snapshot_id, content_ref, raw_ref, original_ref in plan["snapshots"]:
        if original_ref:  # the original's bytes (a PDF) are not blocklisted: its text and content.md are
            keys.append(original_ref)
        for ref in (content_ref, raw_ref):
            if not ref:
                continue
            keys.append(ref)
            # A body already deleted by an erasure cut short had its digest recorded then.
            with contextlib.suppress(KeyError):
                digests.append((erasure_digest(key, blobs.get(ref)), DigestKind.BODY))
    digests += [(erasure_digest(key, body), DigestKind.TEXT) for _hash, body in plan["texts"]]
    keys += [ref for _snapshot_id, *refs in plan["composite_snapshots"] for ref in refs if ref]
    if plan["url_hash"]:
        for run_id in plan["runs"]:
            page = plan["url_hash"]
            keys += [run_content_key(site, run_id, page), run_raw_key(site, run_id, page),
                     sample_key(site, run_id, page), run_body_key(site, run_id, page),
                     run_answer_key(site, run_id, page), *kept_answer_keys(blobs, site, run_id, page)]
    unique = list(dict.fromkeys(digests))
    erasure_id = store.record_erasure(site, document_id, unique[0][0], reason, by, unique)
    report = ErasureReport(erasure_id, site, document_id, plan["url"], digests=len(unique))
    for blob_key in dict.fromkeys(keys):
        if blobs.delete(blob_key):
            report.blobs_deleted += 1
    if not is_erased_form(url):
        for run_id in dict.fromkeys(plan["runs"]):
            _mask_map(blobs, map_key(site, run_id), url, erased_form(url_digest))
    store.drop_erased_rows(erasure_id, document_id, report, url, url_digest)
    log.info("erased document %s of %s: %s", document_id, site, report.to_dict())
    return report
