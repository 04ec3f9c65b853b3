"""Ingest's provenance steps: refuse erased text, then label duplicates among the site's documents.

Candidates come from the store by text hash and SimHash band (no scan of the
site); the detector decides; the store records each finding once per
(a, b, detector_version). Conflicts opened here are logged as one structured
``conflicts-opened`` line per site, and each conflict records one ``conflict.opened``
change event with it (gleaner.changes), which the outbox publishes and delivers.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Sequence

from gleaner.app import Deps
from gleaner.changes import outbox
from gleaner.provenance.canonical import CanonicalText
from gleaner.provenance.conflicts import ConflictDetector, DuplicateDetector, Finding, TextFingerprint

log = logging.getLogger(__name__)


def not_erased(deps: Deps, site: str, items: list[tuple[str, CanonicalText]]) -> list[tuple[str, CanonicalText]]:
    """The (snapshot, text) pairs whose text is not erased content of the tenant (seed 004's blocklist)."""
    erased = deps.blocklist.refused(site, {snapshot_id: (text.text,) for snapshot_id, text in items})
    if erased:
        log.warning("refused erased text for snapshots %s", sorted(erased))
    return [(snapshot_id, text) for snapshot_id, text in items if snapshot_id not in erased]


def label_duplicates(deps: Deps, snapshot_ids: Sequence[str],
                     detectors: Sequence[ConflictDetector] | None = None) -> list[str]:
    """Run the detectors (default: duplicates) on the documents whose current version is one of these
    snapshots; the ids of the conflicts opened."""
    detectors = detectors if detectors is not None else (DuplicateDetector(),)
    store = deps.provenance
    by_site: dict[str, list[TextFingerprint]] = defaultdict(list)
    for site, fingerprint in store.fingerprints(snapshot_ids):
        by_site[site].append(fingerprint)
    opened: list[str] = []
    for site, subjects in by_site.items():
        candidates = store.candidates(site, subjects)
        findings: list[Finding] = []
        for detector in detectors:
            for subject in subjects:
                findings += detector.detect(subject, candidates.get(subject.document_id, []))
        new = store.record_conflicts(site, findings)
        if new:
            log.info(json.dumps({"event": "conflicts-opened", "site_domain": site, "conflict_ids": new}))
        opened += new
    if opened:
        outbox.flush_after_commit(deps)  # their conflict.opened events
    return opened
