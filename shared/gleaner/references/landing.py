"""The ingest stage's second trigger: land gate-passed feed articles as reference items (seed 000's ingest_url).

For each pending normalised URL (one however many workspaces' ledger rows name it):

1. the address policy: a URL that is not public (and not in GLEANER_ALLOW_NETWORKS) writes zero rows,
   one ``ingestion_quality_log`` row (ssrf_rejected, the reason, the ledger ids) and a structured log line;
2. fetch through the one fetcher (HTML or PDF). A transient failure lands nothing for that URL and
   leaves its rows pending, so the next walk retries it; a permanent refusal (robots, 401/403, size,
   content type, 404/410) is logged once as ``fetch_refused`` and retried only when new ledger rows
   name the URL or a full reprocess is asked for; the URL's siblings land either way;
3. extract: PDFs (by Content-Type, or a ``.pdf`` path with PDF bytes) with pypdf, HTML with the crawl's
   extractor; ``extraction_method`` records which;
   Content erased from the reference site (its URL, body or canonical text blocklisted) is refused
   here: nothing is written, and the quality log says ``erased``;
4. write: the snapshot body under the ADR's blob layout, the ``_references`` document and its
   ``document_snapshots`` version (the same :meth:`MetadataStore.apply_snapshots` the crawl uses), then
   the reference item (id = uuid5 "ri:" + URL, published_at from the ledger) and every ledger row's
   backlink in one transaction; nothing is written before the fetch and extraction succeeded;
5. publish SnapshotsWritten, so the canonical text and span ledger of the new snapshots are made.

Body first, metadata second, publish last. Running twice changes nothing: the rows are backlinked, and a
full reprocess finds the same content hash and leaves the snapshot and item as they are.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from gleaner import __version__
from gleaner.changes import outbox
from gleaner.errors import BlobConflict, InvalidInput, RetryableError
from gleaner.extract.html import extract_html
from gleaner.extract.pdf import extract_pdf, is_pdf
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest, FetchResult
from gleaner.messages import ArticlesAccepted, SnapshotsWritten
from gleaner.provenance.canonical import bytes_hash, canonicalise
from gleaner.references.identity import REFERENCES_SITE, reference_item_id
from gleaner.references.url_policy import refusal_reason
from gleaner.store.backends.blobs import snapshot_content_key, snapshot_raw_key
from gleaner.store.backends.dberrors import DatabaseRefused, is_permanent
from gleaner.store.feeds.references import LandingItem, ReferenceRow
from gleaner.store.ledger.records import SnapshotInput

if TYPE_CHECKING:
    from gleaner.app import Deps

log = logging.getLogger(__name__)

GONE = (404, 410)


@dataclass
class LandingReport:
    landed: list[str] = field(default_factory=list)  # reference ids written or updated
    unchanged: list[str] = field(default_factory=list)
    ssrf_rejected: list[str] = field(default_factory=list)  # URLs
    refused: list[str] = field(default_factory=list)  # URLs refused for good (until new rows or a reprocess)
    retry: list[str] = field(default_factory=list)  # URLs left pending for the next walk

    def to_dict(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.__dict__.items()}


@dataclass(frozen=True, slots=True)
class _Body:
    content_md: str
    raw_md: str
    title: str | None
    method: str
    mime_type: str


def _event(level: int, event: str, **fields: object) -> None:
    """One structured log line: a JSON object that log routers (Cloud Logging) index by field."""
    log.log(level, json.dumps({"event": event, **fields}, default=str, sort_keys=True))


def handle(message: ArticlesAccepted, deps: Deps) -> LandingReport:
    refs = deps.references
    ids = None if message.walk or message.full_reprocess else message.article_ids
    items = refs.pending(ids, full_reprocess=message.full_reprocess)
    report = LandingReport()
    fetchable: dict[str, LandingItem] = {}
    for item in items:
        reason = refusal_reason(item.fetch_url, deps.settings.allow_networks)
        if reason is None:
            fetchable[item.url] = item
            continue
        report.ssrf_rejected.append(item.url)
        refs.log_quality("ssrf_rejected", item.url, reason, item.ledger_ids,
                         {"source_url": item.url, "feed_article_ids": list(item.ledger_ids)})
        _event(logging.WARNING, "reference.ssrf_rejected", url=item.url, reason=reason,
               feed_article_ids=list(item.ledger_ids))
    snapshots: list[str] = []
    try:
        if fetchable:
            _fetch_and_land(deps, fetchable, report, snapshots)
    finally:
        # Even when a store error ends the walk early: what landed is no longer pending, so this is the
        # only chance to hand its snapshots to canonical-text ingest.
        if snapshots:
            deps.bus.publish(SnapshotsWritten(run_id=None, site_domain=REFERENCES_SITE,
                                              snapshot_ids=tuple(snapshots)), ordering_key=REFERENCES_SITE)
            outbox.flush_after_commit(deps)  # the landed versions' change events
    _event(logging.INFO, "reference.walk", walk=message.walk, full_reprocess=message.full_reprocess,
           **report.to_dict())
    return report


def _fetch_and_land(deps: Deps, fetchable: dict[str, LandingItem], report: LandingReport,
                    snapshots: list[str]) -> None:
    requests = [FetchRequest(item.fetch_url, key=url, accept=_accept(url)) for url, item in fetchable.items()]
    with deps.new_fetcher() as fetcher:
        for result in fetcher.fetch_many(requests):
            item = fetchable[str(result.key)]
            try:
                snapshot_id = _land_one(deps, item, result, report)
            except Exception as exc:  # containment: one poisonous page must not stop its siblings
                if _store_unwell(exc):
                    raise  # redeliver: what landed stays landed, the rest stays pending
                report.retry.append(item.url)
                log.exception("landing %s failed", item.url)
                _event(logging.ERROR, "reference.landing_failed", url=item.url, error=repr(exc)[:500],
                       feed_article_ids=list(item.ledger_ids))
                continue
            if snapshot_id:
                snapshots.append(snapshot_id)


def _store_unwell(exc: Exception) -> bool:
    """Transient trouble, or a database refusal that is not this page's input's fault (a schema
    mismatch, a bug): its siblings would meet it too, so the walk stops rather than contain it."""
    return isinstance(exc, RetryableError) or (isinstance(exc, DatabaseRefused) and not is_permanent(exc))


def _accept(url: str) -> tuple[ContentKind, ...]:
    # A .pdf is often served as application/octet-stream; accept anything there and check the bytes.
    if urlsplit(url).path.lower().endswith(".pdf"):
        return (ContentKind.PDF, ContentKind.HTML, ContentKind.ANY)
    return (ContentKind.HTML, ContentKind.PDF)


def _land_one(deps: Deps, item: LandingItem, result: FetchResult, report: LandingReport) -> str | None:
    """Land one fetched URL; the new snapshot id if a new version was written."""
    refs = deps.references
    if not result.ok and _address_refused(result):
        # The pre-check passed but the fetcher refused an address: DNS changed its answer, or a redirect
        # pointed inside. Same finding, same record.
        report.ssrf_rejected.append(item.url)
        refs.log_quality("ssrf_rejected", item.url, result.reason, item.ledger_ids,
                         {"source_url": item.url, "feed_article_ids": list(item.ledger_ids),
                          "final_url": result.final_url})
        _event(logging.WARNING, "reference.ssrf_rejected", url=item.url, reason=result.reason,
               feed_article_ids=list(item.ledger_ids))
        return None
    if not result.ok:
        # 404/410 is reported as "unavailable" like a 503, but a missing page does not come back on its own.
        if result.outcome.retryable and result.status not in GONE:
            report.retry.append(item.url)
            _event(logging.WARNING, "reference.fetch_retry", url=item.url, outcome=str(result.outcome),
                   reason=result.reason, feed_article_ids=list(item.ledger_ids))
        else:
            report.refused.append(item.url)
            reason = f"{result.outcome}: {result.reason}".strip()
            refs.log_quality("fetch_refused", item.url, reason, item.ledger_ids,
                             {"outcome": str(result.outcome), "status": result.status})
            _event(logging.WARNING, "reference.fetch_refused", url=item.url, reason=reason,
                   feed_article_ids=list(item.ledger_ids))
        return None
    try:
        body = _extract(result, item.url)
    except InvalidInput as exc:
        report.refused.append(item.url)
        refs.log_quality("extraction_empty", item.url, str(exc), item.ledger_ids, {"status": result.status})
        _event(logging.WARNING, "reference.extraction_failed", url=item.url, reason=str(exc))
        return None
    content = body.content_md.encode("utf-8")
    if deps.blocklist.refused(REFERENCES_SITE, {item.url: (item.url.encode("utf-8"), content,
                                                           canonicalise(content, body.content_md).text)}):
        report.refused.append(item.url)
        refs.log_quality("fetch_refused", item.url, "erased", item.ledger_ids, {"status": result.status})
        _event(logging.WARNING, "reference.erased_refused", url=item.url, feed_article_ids=list(item.ledger_ids))
        return None
    title = item.title or body.title or item.url
    kind = "file" if body.mime_type == "application/pdf" else "page"
    document_id = refs.upsert_document(item.url, title, kind)
    raw = body.raw_md.encode("utf-8")
    content_hash = hashlib.sha1(content).hexdigest()
    content_key = snapshot_content_key(REFERENCES_SITE, document_id, content_hash)
    raw_key = snapshot_raw_key(REFERENCES_SITE, document_id, content_hash)
    deps.blobs.put(content_key, content)  # create-only: a re-landing of the same content is a no-op
    try:
        deps.blobs.put(raw_key, raw)
    except BlobConflict:
        raw = deps.blobs.get(raw_key)  # same content, other page chrome: the first raw.md of it stands
    (snap,) = deps.metadata.apply_snapshots(None, [SnapshotInput(
        document_id=document_id, content_hash=content_hash, raw_hash=hashlib.sha1(raw).hexdigest(),
        content_key=content_key, raw_key=raw_key, fetch_status=result.status or 200,
        fetch_time_ms=result.elapsed_ms, byte_size=len(result.body or b""), extractor=body.method,
        source_blake3=bytes_hash(result.body or b""),
    )], {"gleaner": __version__, "mime_type": body.mime_type, "source": "reference"})
    reference_id = reference_item_id(item.url)
    changed = refs.land(ReferenceRow(
        id=reference_id, url=item.url, title=title, body=body.content_md, summary=item.summary,
        published_at=item.published_at, source_document_id=document_id, source_snapshot_id=snap.snapshot_id,
        ingestion_source=item.ingestion_source, extraction_method=body.method, mime_type=body.mime_type,
        epoch=item.epoch,
    ), item.ledger_ids)
    (report.landed if changed else report.unchanged).append(reference_id)
    _event(logging.INFO, "reference.landed", url=item.url, reference_id=reference_id, document_id=document_id,
           snapshot=snap.outcome, extraction_method=body.method, feed_article_ids=list(item.ledger_ids))
    return snap.snapshot_id if snap.outcome in ("new", "changed") else None


def _address_refused(result: FetchResult) -> bool:
    """The fetcher's address-policy refusal (reported as "unavailable", and marked as such)."""
    return result.outcome is FetchOutcome.UNAVAILABLE and result.non_public_address


def _extract(result: FetchResult, url: str) -> _Body:
    data = result.body or b""
    content_type = (result.content_type or "").lower()
    if content_type == "application/pdf" or (content_type in ("", "application/octet-stream",
                                                              "binary/octet-stream") and is_pdf(data)):
        pdf = extract_pdf(data)
        if not pdf.markdown.strip():
            raise InvalidInput("the PDF has no text layer")
        return _Body(pdf.markdown, pdf.markdown, pdf.title, pdf.extraction_method, "application/pdf")
    if content_type not in ("text/html", "application/xhtml+xml"):
        raise InvalidInput(f"content type {content_type or 'missing'!r} is neither HTML nor PDF")
    extracted = extract_html(result.text(), result.final_url or url)
    content = extracted.content_md or extracted.raw_md
    if not content.strip():
        raise InvalidInput("the page has no extractable text")
    return _Body(content, extracted.raw_md or content, extracted.title, extracted.extractor, "text/html")
