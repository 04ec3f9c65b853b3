"""The shapes of the answers a program most often reads, as TypedDicts (plain dicts at run time).

They name the keys the server sends (a test compares them with real answers), so an editor completes
them and mypy checks their use; every other answer is a ``dict[str, Any]``, as the OpenAPI document
describes it.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class Span(TypedDict):
    start: int
    end: int
    kind: str


class ExportRecord(TypedDict):
    """One line of ``GET /v1/sites/{site}/export`` (and of ``gleaner export --format jsonl``)."""

    url: str
    title: str | None
    site_domain: str
    document_id: str
    version: int
    content_hash: str
    text_hash: str | None
    fetched_at: str
    markdown: str
    spans: NotRequired[list[Span]]


class SnapshotCounts(TypedDict):
    new: int
    changed: int
    unchanged: int


class RunSummary(TypedDict):
    """A run's counters (``GET /v1/runs``, ``GET /v1/runs/{run}``; the latter adds ``outcomes``)."""

    run_id: str
    site_domain: str
    status: str
    discovered: int
    included: int
    excluded: int
    fetched: int
    not_modified: int
    failed: int
    refused: int
    limited: int
    beyond_limit: int
    limit: int | None
    replay_of: str | None  # a replay's source run: its "fetched" pages were read from the store
    warnings: list[str]  # e.g. a run that excluded most of what it discovered (docs/operating.md)
    snapshots: SnapshotCounts
    target_url: str | None
    started_at: str | None
    finished_at: str | None
    error: str | None
    outcomes: NotRequired[dict[str, int]]
    replay: NotRequired[dict[str, Any] | None]  # GET /v1/runs/{run}: a replay's source run and left-out pages
    # GET /v1/runs/{run}: per model, the section samples it read, from cache, left to the rules, tokens, cost
    language_model: NotRequired[dict[str, Any] | None]


class ChangeEvent(TypedDict):
    """A change event (DESIGN.md "Change events"): a document event has the document's keys, a run event
    (``run.finished``, ``run.partial``, ``run.failed``) ``status`` and ``summary`` instead."""

    event_id: str
    type: str
    site_domain: str
    run_id: str | None
    occurred_at: str
    document_id: NotRequired[str]
    url: NotRequired[str]
    version: NotRequired[int]
    snapshot_id: NotRequired[str]
    content_hash: NotRequired[str]
    previous_version: NotRequired[int | None]
    status: NotRequired[str]
    summary: NotRequired[dict[str, Any]]


class SearchHit(TypedDict):
    """A ranked, citable chunk: ``text_hash`` [``start``, ``end``) is what ``text()`` returns verbatim.

    A composite document's chunk has ``composite_id``, ``url`` ``gleaner://composites/{id}`` and no
    ``document_id`` (docs/retrieval.md)."""

    url: str
    title: str | None
    site_domain: str
    document_id: str | None
    composite_id: NotRequired[str]
    version: int
    text_hash: str
    start: int
    end: int
    score: float
    page_rank: int  # 1 for the best page: each page answers once, with its best passage
    embedding_score: float | None
    fulltext_score: float | None
    preview: str


class TextSlice(TypedDict):
    """``GET /v1/texts/{text_hash}``: bytes [start, end) of a stored canonical text, as UTF-8 text."""

    text_hash: str
    start: int
    end: int
    text: str
    length: int
