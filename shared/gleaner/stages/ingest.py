"""Stage 5, ingest: canonical text by BLAKE3 and its span ledger, for each new snapshot.

Canonical text (NFC, LF) is stored once per hash; a snapshot whose text is
already known only gains its link row. A snapshot already ingested is skipped,
so a redelivered message writes nothing.
"""

from __future__ import annotations

from gleaner.app import Deps
from gleaner.messages import SnapshotsWritten
from gleaner.provenance.canonical import bytes_hash, canonical_text, spans_of, text_hash


def handle(message: SnapshotsWritten, deps: Deps) -> int:
    """Returns how many new canonical texts were stored."""
    items = []
    for snapshot_id, _site, ref in deps.metadata.snapshots_for_ingest(message.snapshot_ids):
        raw = deps.blobs.get(ref)
        text = canonical_text(raw.decode("utf-8", errors="replace"))
        spans = [(s.start, s.end, s.kind) for s in spans_of(text)]
        items.append((snapshot_id, bytes_hash(raw), text_hash(text), text, spans))
    return deps.metadata.store_canonical(items)
