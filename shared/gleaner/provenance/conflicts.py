"""Conflict detection between documents: the detector interface and the duplicate detector.

A detector looks at one document's new text beside candidate texts (found by the
store, e.g. by SimHash band) and reports findings; the store records each one in
``document_conflicts``, idempotent on (a, b, detector_version) with a and b in a
fixed order, so running a detector again adds nothing. An embedding or LLM judge
that finds ``factual_contradiction`` implements the same :class:`ConflictDetector`.

The duplicate detector labels each document against the earliest other document
of the site with the same text (an exact repeat, preferred) or, failing that, a
SimHash within Hamming distance 3 (a near-duplicate): one conflict per copy,
naming the original, whichever order the copies arrive in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol
from urllib.parse import urlsplit

from gleaner.provenance.simhash import NEAR_DISTANCE, hamming


class ConflictType(StrEnum):
    FACTUAL_CONTRADICTION = "factual_contradiction"
    STALE_INFO = "stale_info"
    DUPLICATE = "duplicate"
    POLICY_MISMATCH = "policy_mismatch"


class ConflictStatus(StrEnum):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"
    FALSE_POSITIVE = "false_positive"


class DetectedBy(StrEnum):
    EMBEDDING_DIFF = "embedding_diff"
    LLM_JUDGE = "llm_judge"
    MANUAL = "manual"
    CONTENT_HASH = "content_hash"
    SIMHASH = "simhash"
    RULES = "rules"  # gleaner.origins.judge's deterministic judge


class Severity(StrEnum):
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class TextFingerprint:
    """One document's current text as detectors see it (no body: detectors that need one read it)."""

    document_id: str
    url: str
    text_hash: str
    simhash: int | None
    first_seen: datetime  # when the document was created: "earliest" means this, then the id


@dataclass(frozen=True, slots=True)
class Finding:
    conflict_type: ConflictType
    subject: TextFingerprint
    other: TextFingerprint
    detected_by: DetectedBy
    detector_version: str
    severity: Severity = Severity.INFO
    details: dict[str, object] = field(default_factory=dict)

    def ordered(self) -> tuple[TextFingerprint, TextFingerprint]:
        """(a, b): the pair in a fixed order (by document id), so (x, y) and (y, x) are one conflict."""
        return (self.subject, self.other) if self.subject.document_id < self.other.document_id \
            else (self.other, self.subject)


class ConflictDetector(Protocol):
    version: str

    def detect(self, subject: TextFingerprint, candidates: Sequence[TextFingerprint]) -> list[Finding]:
        """Findings about subject among candidates (other documents of its site)."""
        ...


class DuplicateDetector:
    """Exact repeats (same text hash) and near-duplicates (SimHash within Hamming distance 3)."""

    version = "duplicates/1"

    def detect(self, subject: TextFingerprint, candidates: Sequence[TextFingerprint]) -> list[Finding]:
        others = sorted((c for c in candidates if c.document_id != subject.document_id),
                        key=lambda c: (c.first_seen, c.document_id))
        exact = [c for c in others if c.text_hash == subject.text_hash]
        if exact:
            return [self._finding(subject, exact[0], DetectedBy.CONTENT_HASH, 0)]
        if not subject.simhash:
            return []  # a text with no words: nothing to compare
        for other in others:
            if other.simhash:
                distance = hamming(subject.simhash, other.simhash)
                if distance <= NEAR_DISTANCE:
                    return [self._finding(subject, other, DetectedBy.SIMHASH, distance)]
        return []

    def _finding(self, subject: TextFingerprint, other: TextFingerprint, by: DetectedBy, distance: int) -> Finding:
        return Finding(ConflictType.DUPLICATE, subject, other, by, self.version, details={
            "kind": "exact" if by is DetectedBy.CONTENT_HASH else "near", "distance": distance,
            "cross_host": urlsplit(subject.url).hostname != urlsplit(other.url).hostname,
        })
