"""Stage 4, snapshot: version what changed, touch what did not.

For each fetched page: if SHA1(content.md) equals the current snapshot's hash,
only last_seen_at moves. Otherwise content.md and raw.md are written to
``document-snapshots/{document_id}/{sha1}/`` (create-only; the key includes the
hash, so a redelivery writes the same object), then one transaction inserts the
document_snapshots row (version = previous + 1) and advances
documents.current_snapshot_id; then SnapshotsWritten is published. A document
(a PDF) also keeps its original bytes there (``original.pdf``, ``original_ref``). Body first,
metadata second, publish last: the order that survives a crash at any point.
Each new current version's change event is recorded in that transaction and
published from the outbox after it (gleaner.changes).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from gleaner import __version__
from gleaner.app import Deps
from gleaner.changes import outbox
from gleaner.changes.volatile import IgnorePattern, fingerprint, masked_hash
from gleaner.errors import BlobConflict
from gleaner.messages import FetchedPage, PagesFetched, SnapshotsWritten
from gleaner.stages.upkeep import finish_run
from gleaner.store.backends.blobs import snapshot_content_key, snapshot_original_key, snapshot_raw_key
from gleaner.store.ledger.records import SnapshotInput, SnapshotResult
from gleaner.urls import glob_matches

log = logging.getLogger(__name__)


def handle(message: PagesFetched, deps: Deps) -> list[SnapshotResult]:
    meta = deps.metadata
    blobs = deps.blobs
    site = message.site_domain
    inputs: list[SnapshotInput] = []
    # A page erased after scrape fetched it (its run artefacts are gone with it) is never versioned. The
    # run's heartbeat goes in the same transaction.
    erased = deps.provenance.settle_erased(message.run_id, [page.document_id for page in message.pages],
                                           touch=True)
    ignoring = _ignore_decisions(deps, site, [p for p in message.pages if p.document_id not in erased])
    for page in message.pages:
        if page.document_id in erased:
            continue
        same_as, ignored = ignoring.get(page.document_id, (None, None))
        content_key = raw_key = None
        if page.content_key is not None:
            content_key = snapshot_content_key(site, page.document_id, page.content_hash)
            blobs.copy(page.content_key, content_key)
            if page.raw_key is not None:
                raw_key = snapshot_raw_key(site, page.document_id, page.content_hash)
                # The content may have gone back to an earlier version whose page around it differed:
                # that version's raw.md stands (bodies are keyed by content hash, never rewritten).
                with contextlib.suppress(BlobConflict):
                    blobs.copy(page.raw_key, raw_key)
        original_key = _keep_original(deps, site, page) if content_key is not None else None
        inputs.append(SnapshotInput(
            document_id=page.document_id, content_hash=page.content_hash, raw_hash=page.raw_hash,
            content_key=content_key or "", raw_key=raw_key, fetch_status=page.fetch_status,
            fetch_time_ms=page.fetch_time_ms, byte_size=page.byte_size, extractor=page.extractor,
            source_blake3=page.source_blake3, original_key=original_key,
            mime_type=page.mime_type if original_key else None, same_as=same_as, ignored=ignored,
            render_mode=page.render_mode))
    results = meta.apply_snapshots(message.run_id, inputs, {"gleaner": __version__})
    written = tuple(r.snapshot_id for r in results if r.outcome != "unchanged" and r.snapshot_id)
    if written:
        deps.bus.publish(SnapshotsWritten(run_id=message.run_id, site_domain=site, snapshot_ids=written),
                         ordering_key=site)
    if message.run_id is not None:
        finish_run(deps, message.run_id)  # fetched bodies go if that settled the run
    outbox.flush_after_commit(deps)  # the versions' change events, committed with them
    return results


# A document's original keeps its type's usual extension (ADR: document-snapshots/{doc}/{hash}/original.pdf).
_EXTENSIONS = {"application/pdf": "pdf"}


def _keep_original(deps: Deps, site: str, page: FetchedPage) -> str | None:
    """Copy a document's original bytes beside its content.md; the snapshot key, or None for a page."""
    if page.original_key is None or page.mime_type is None:
        return None
    key = snapshot_original_key(site, page.document_id, page.content_hash, _EXTENSIONS.get(page.mime_type, "bin"))
    # The same text may come from other bytes (a re-saved PDF): the first original of that text stands.
    with contextlib.suppress(BlobConflict):
        deps.blobs.copy(page.original_key, key)
    return key


def _ignore_decisions(deps: Deps, site: str, pages: list[FetchedPage]
                      ) -> dict[str, tuple[str | None, dict[str, Any] | None]]:
    """document id -> (the current content hash it equals with ignored lines left out, or None; the
    ``ignored`` record a new version keeps), for the pages an ignore_text rule covers."""
    rules = deps.metadata.ignore_rules(site) if pages else []
    if not rules:
        return {}
    fetched = [p for p in pages if p.content_key is not None]
    current = deps.metadata.current_for_ignore([p.document_id for p in fetched])
    out: dict[str, tuple[str | None, dict[str, Any] | None]] = {}
    for page in fetched:
        path, current_hash, current_ref, recorded = current.get(page.document_id, ("", None, None, None))
        patterns = [IgnorePattern(r.id, r.pattern or "") for r in rules if glob_matches(path, r.glob)]
        if not patterns:
            continue
        assert page.content_key is not None
        mine = masked_hash(deps.blobs.get(page.content_key), patterns)
        ignored = {"rules": [{"id": p.rule_id, "pattern": p.pattern} for p in patterns],
                   "fingerprint": fingerprint(patterns), "masked_hash": mine}
        same_as = None
        if current_hash is not None and current_hash != page.content_hash:
            if recorded and recorded.get("fingerprint") == ignored["fingerprint"]:
                theirs = recorded.get("masked_hash")
            else:  # the current version predates these rules: compare under them now
                theirs = masked_hash(deps.blobs.get(current_ref), patterns) if current_ref else None
            same_as = current_hash if theirs == mine else None
        out[page.document_id] = (same_as, ignored)
    return out
