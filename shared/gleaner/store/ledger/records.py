"""The metadata repository's values: a run's ledger row, a decision, a fetch, a snapshot in and out.

Small frozen dataclasses of primitives that the stages build and read; the store
modules (runs, fetches, snapshots, decisions, notmodified) write and return them.
They import no database driver, so a stage or a test can build them freely.
:func:`record_from_row` turns a result row into any such record.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import date
from typing import Any, TypeVar

R = TypeVar("R")

# How the decisions statement words a skip it materialised from an exclude decision (for people:
# documents.skip_by_decider is what tells it from a person's skip).
DECIDER_SKIP_PREFIX = "rule: "


def record_from_row(cls: type[R], row: Sequence[Any]) -> R:
    """A record (a dataclass) from a row whose columns are its fields in order.

    Records carry primitives: a UUID becomes its string, a time its ISO 8601 text, an array a tuple;
    NULL stays None. Anything else goes in as the driver returned it.
    """
    names = _field_names(cls)
    if len(names) != len(row):
        raise ValueError(f"{cls.__name__} has {len(names)} fields, the row {len(row)} columns")
    return cls(**{name: _primitive(value) for name, value in zip(names, row, strict=True)})


# Each record type's field names in order: ``dataclasses.fields`` rebuilds them at every call (once a row).
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _primitive(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, date):  # datetime too
        return value.isoformat()
    if isinstance(value, list):
        return tuple(value)
    return value


class _PageIdentity:
    """What a run's page is called and whether a person skipped it: shared by :class:`RunPage` and the
    slimmer :class:`SamplePage` (``__slots__`` empty, so neither grows a ``__dict__``)."""

    __slots__ = ()
    canonical_url: str
    source_url: str | None
    scrape_policy: str
    skip_by_decider: bool

    @property
    def skipped_by_operator(self) -> bool:
        """``scrape_policy=skip`` set by a person (a rule, a review, an erasure), not carried over from a
        decider's exclude, which the next run decides again."""
        return self.scrape_policy == "skip" and not self.skip_by_decider

    @property
    def fetch_url(self) -> str:
        """The URL as the site spells it (trailing slash and all); the canonical URL is only identity."""
        return self.source_url or self.canonical_url


@dataclass(frozen=True, slots=True)
class SamplePage(_PageIdentity):
    """A run's page as sample decides on it: the few fields every page needs (a large run holds one per URL
    at once); the sampled pages are read whole as :class:`RunPage`."""

    document_id: str
    canonical_url: str
    path: str
    source_url: str | None
    scrape_policy: str
    skip_by_decider: bool
    skip_reason: str | None
    operator_decision: str | None


@dataclass(frozen=True, slots=True)
class RunPage(_PageIdentity):
    document_id: str
    canonical_url: str
    url_hash: str
    path: str
    depth: int
    discovered_via: str
    scrape_policy: str
    skip_reason: str | None
    decision: str
    etag: str | None
    last_modified: str | None
    current_hash: str | None
    fetch_outcome: str | None
    source_url: str | None = None
    snapshot_outcome: str | None = None
    fetched_content_hash: str | None = None
    fetched_raw_hash: str | None = None
    extractor: str | None = None
    fetch_status: int | None = None
    fetch_time_ms: int | None = None
    byte_size: int | None = None
    operator_decision: str | None = None  # `gleaner review decide`: include | exclude
    prefetched: dict[str, Any] | None = None  # what map or sample already got for it this run (fetchonce.py)
    skip_by_decider: bool = False  # the skip is a decider's exclude, re-decided each run (store/ledger/decisions.py)


@dataclass(frozen=True, slots=True)
class Decision:
    document_id: str
    decision: str  # a decide.port.Verdict: include | exclude | needs_review
    source: str  # system | operator | rule | llm
    reason: str
    confidence: float
    metadata: dict[str, Any]
    sample_uri: str | None = None
    sample_error: str | None = None


@dataclass(frozen=True, slots=True)
class FetchRecord:
    document_id: str
    outcome: str
    reason: str
    status: int | None
    time_ms: int
    byte_size: int | None
    etag: str | None
    last_modified: str | None
    title: str | None = None
    content_hash: str | None = None
    raw_hash: str | None = None
    extractor: str | None = None
    # The known document this page permanently redirects to (its canonical URL): it is superseded,
    # and what the redirect served is that document's content, not a version of this one.
    superseded_by: str | None = None
    refused: bool = False  # unavailable because Gleaner's policy refused to ask (FetchResult.refused_by_policy)


@dataclass(frozen=True, slots=True)
class SnapshotInput:
    document_id: str
    content_hash: str
    raw_hash: str
    content_key: str
    raw_key: str | None
    fetch_status: int
    fetch_time_ms: int
    byte_size: int
    extractor: str
    source_blake3: str | None = None  # BLAKE3 of the bytes as fetched
    original_key: str | None = None  # a document's original bytes (original.pdf), beside content.md
    mime_type: str | None = None
    # Ignore rules (changes/volatile.py): the current version's content hash this page equals once the
    # ignored lines are left out (then nothing is written), and what a new version records about them.
    same_as: str | None = None
    ignored: dict[str, Any] | None = None
    render_mode: str = "plain_fetch"  # the ADR's snapshot render_mode: browser when its DOM was rendered


@dataclass(frozen=True, slots=True)
class SnapshotResult:
    document_id: str
    outcome: str  # new | changed | unchanged | duplicate (already applied for this run)
    snapshot_id: str | None
