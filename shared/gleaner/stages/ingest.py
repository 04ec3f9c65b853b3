"""Stage 5, ingest: canonical text by BLAKE3 and its span ledger, for each new snapshot.

Canonical text (NFC, LF) is stored once per hash; a snapshot whose text is
already known only gains its link row. A snapshot already ingested is skipped,
so a redelivered message writes nothing. When scrape ran in this process, the
extraction processes' canonical text for the snapshot's content hash is taken
over as it is; otherwise it is computed from the snapshot's content.md.
Snapshots of blocked documents are skipped (gate 2) and erased text is refused (the last
dedup path before storage); ingested documents get their default routing, composites whose
pinned source changed go stale (operator/routing.py), and each document whose current version
was ingested is checked for duplicates (stages/conflicts.py). Current versions with an enabled
``rag`` routing enter the search index (gleaner.retrieval.index), embedded there with a cheap model;
then the site's aggregate pages (a print-all edition) are flagged and leave it (store/documents/aggregates.py),
and the new texts are checked for contradictions with the tenant's other texts (gleaner.origins.contradictions).
"""

from __future__ import annotations

from gleaner.app import Deps
from gleaner.changes import outbox
from gleaner.messages import SnapshotsWritten
from gleaner.provenance.canonical import canonicalise
from gleaner.stages.conflicts import label_duplicates, not_erased
from gleaner.store.documents.aggregates import mark_aggregates


def handle(message: SnapshotsWritten, deps: Deps) -> int:
    """Returns how many new canonical texts were stored."""
    meta = deps.metadata
    items = []
    for snapshot_id, ref, content_hash in meta.ingest_candidates(message.snapshot_ids):
        text = deps.canonical_handover.take(content_hash)
        items.append((snapshot_id, text if text is not None else canonicalise(deps.blobs.get(ref))))
    items = not_erased(deps, message.site_domain, items)
    stored = deps.texts.store(items)
    meta.route_ingested(message.snapshot_ids)
    deps.search_index.index_snapshots(items)
    label_duplicates(deps, [snapshot_id for snapshot_id, _text in items])
    if items:
        mark_aggregates(deps.engine, message.site_domain, message.run_id, deps.search_index.index_snapshots)
    from gleaner.origins.contradictions import find_contradictions  # it imports the stages (landing)

    find_contradictions(deps, [snapshot_id for snapshot_id, _text in items])
    # Their conflict.opened events, and the change events of versions an upload or feedback landed.
    outbox.flush_after_commit(deps)
    return stored
