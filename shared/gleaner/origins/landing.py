"""A text that did not come from a crawl (an upload, a feedback) entering the copy as a page does.

:func:`land` runs the same two steps a scraped page goes through, in the same order, over the
same stores: the snapshot step (content.md and the original under
``document-snapshots/{document}/{sha1}/``, then the version row and its change event in one
transaction: gleaner.store.documents.snapshots) and the ingest stage itself (canonical text and spans,
routing, the search index, duplicates and contradictions: gleaner.stages.ingest). So a landed
document has versions, spans, chunks, search, events, erasure and retention exactly like a page;
the same content again writes nothing (its SHA1 is the current one); new content at the same
identity is the next version.

Checks come first and write nothing: the tenant's erased-content blocklist (the URL, the text,
the original bytes) refuses with :class:`ErasedContent`.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field
from typing import Any

import blake3

from gleaner import __version__
from gleaner.app import Deps
from gleaner.errors import BlobConflict, InvalidInput
from gleaner.messages import SnapshotsWritten
from gleaner.origins.store import DocumentIdentity, ErasedDocument, OriginStore
from gleaner.provenance.canonical import canonicalise
from gleaner.stages import dispatch
from gleaner.store.backends.blobs import snapshot_content_key, snapshot_original_key
from gleaner.store.ledger.records import SnapshotInput


class ErasedContent(InvalidInput):
    """The content (or the document) was erased in this tenant: it is not kept again."""


@dataclass(frozen=True, slots=True)
class Original:
    data: bytes
    extension: str
    mime_type: str


@dataclass(frozen=True, slots=True)
class Landed:
    document_id: str
    version: int | None
    outcome: str  # new | changed | unchanged
    snapshot_id: str | None
    conflicts: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"document_id": self.document_id, "version": self.version, "outcome": self.outcome,
                "conflicts": self.conflicts}


def land(deps: Deps, ident: DocumentIdentity, markdown: str, *, extractor: str,
         original: Original | None = None, metadata: dict[str, Any] | None = None) -> Landed:
    """Keep ``markdown`` as the document at ``ident`` (see the module docstring). Acts in the ident's
    tenant: the caller has checked the caller may write there."""
    site = ident.site_domain
    content = markdown.encode("utf-8")
    text = canonicalise(content, markdown)
    erased = deps.blocklist.refused(site, {"it": tuple(
        x for x in (ident.canonical_url.encode(), content, text.text, original.data if original else None) if x)})
    if erased:
        raise ErasedContent("this content was erased from the site and is not kept again")
    store = OriginStore(deps.engine)
    try:
        document_id = store.ensure_document(ident)
    except ErasedDocument:
        raise ErasedContent(f"{ident.canonical_url} was erased and is not kept again") from None
    content_hash = hashlib.sha1(content).hexdigest()
    content_key = snapshot_content_key(site, document_id, content_hash)
    with contextlib.suppress(BlobConflict):  # the same content, kept before: bodies are never rewritten
        deps.blobs.put(content_key, content)
    original_key = None
    if original is not None:
        original_key = snapshot_original_key(site, document_id, content_hash, original.extension)
        with contextlib.suppress(BlobConflict):  # the first original of a text stands (as for a PDF page)
            deps.blobs.put(original_key, original.data, original.mime_type)
    source = original.data if original is not None else content
    (result,) = deps.metadata.apply_snapshots(None, [SnapshotInput(
        document_id=document_id, content_hash=content_hash, raw_hash=content_hash, content_key=content_key,
        raw_key=None, fetch_status=200, fetch_time_ms=0, byte_size=len(source), extractor=extractor,
        source_blake3=blake3.blake3(source).hexdigest(), original_key=original_key,
        mime_type=original.mime_type if original else None)],
        {"gleaner": __version__, "origin": ident.origin, **(metadata or {})})
    if result.outcome in ("new", "changed") and result.snapshot_id:
        deps.canonical_handover.put(content_hash, text)  # ingest takes it over instead of reading it back
        dispatch(SnapshotsWritten(run_id=None, site_domain=site, snapshot_ids=(result.snapshot_id,)), deps)
    # The version's change event goes out with the ingest stage's flush (the stage functions send; the
    # back office's function has no queue of its own).
    version, snapshot_id = store.document_version(document_id)
    from gleaner.origins.contradictions import conflicts_of_snapshot

    opened = conflicts_of_snapshot(deps, site, result.snapshot_id) \
        if result.outcome in ("new", "changed") and result.snapshot_id else []
    return Landed(document_id, version, result.outcome, snapshot_id, opened)
