"""The provenance repository: citations, conflicts, erasure and retention over one engine.

``ProvenanceStore`` is what ``deps.provenance`` holds, composed like ``MetadataStore``
of one class per concern: ``citations.py`` (cite, verify, drift, slices),
``conflicts.py`` (document_conflicts), ``erasure.py`` (erasure and the blocklist),
``retention.py`` (pruning old versions).
"""

from __future__ import annotations

from gleaner.store.documents.citations import CitationStore
from gleaner.store.documents.conflicts import ConflictStore
from gleaner.store.documents.erasure import ErasureStore
from gleaner.store.documents.retention import RetentionStore


class ProvenanceStore(CitationStore, ConflictStore, ErasureStore, RetentionStore):
    """Every provenance method over one engine."""
