"""Routings and composites (the ADR's gates 2 and 3): where each document goes, and what folds several into one.

- Ingest routes every active, unblocked document it ingests to ``rag`` by default
  (``deps.metadata.route_ingested``, idempotent). A blocked document is never ingested
  (``deps.metadata.ingest_candidates``) and never routed.
- ``create_composite`` folds documents into a composite with its own snapshot (owner
  ``composite_document_id``), pinning each source's current snapshot in ``composite_document_sources``;
  the composite is routed to ``rag`` and its sources lose their own ``rag`` routing (subsumption).
  The composite's body is the sources' content.md under a heading each: a deterministic stand-in for
  the Knowledge Agent's distillation, which would write the same rows with a generated body.
- When a pinned source gets a new version, its composites go ``stale`` (``route_ingested``).

The statements are :mod:`gleaner.store.documents.routing`, reached through ``deps.metadata``.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gleaner.errors import InvalidInput
from gleaner.messages import SnapshotsWritten
from gleaner.operator.sites import site_key
from gleaner.operator.values import Plain
from gleaner.store.backends.blobs import snapshot_content_key
from gleaner.urls import canonicalize

if TYPE_CHECKING:
    from gleaner.app import Deps

GENERATOR = "gleaner.concatenate/1"
_ORIGIN_SCHEMES = ("upload://", "feedback://")


class Destination(StrEnum):
    RAG = "rag"
    SKILL = "skill"
    CONFIG = "config"


@dataclass(frozen=True, slots=True)
class Composite(Plain):
    id: str
    site_domain: str
    title: str
    status: str
    snapshot_id: str | None
    sources: tuple[dict[str, Any], ...]
    kind: str | None = None
    validated_by: str | None = None  # the credential that validated it (operator/composites.py)
    validated_at: str | None = None
    updated_at: str | None = None


@dataclass(frozen=True, slots=True)
class CompositeSource:
    """A document a composite may fold in, with its current version (None before its first)."""

    url: str
    document_id: str
    status: str
    title: str | None
    snapshot_id: str | None
    version: int | None
    content_ref: str | None


def create_composite(deps: Deps, site: str, title: str, urls: Sequence[str], *, kind: str | None = None,
                     actor: str = "gleaner") -> Composite:
    """Fold the documents at ``urls`` (each with a current version, none blocked) into a new composite."""
    site = site_key(site)
    title = title.strip()
    if not title:
        raise InvalidInput("a composite needs a title")
    # An upload's or a feedback's key (gleaner.origins.identity, a floor above) is no http URL: taken as it is.
    wanted = list(dict.fromkeys(u if u.startswith(_ORIGIN_SCHEMES) else canonicalize(u) for u in urls))
    if not wanted:
        raise InvalidInput("a composite needs at least one --from URL")
    found = deps.metadata.composite_candidates(site, wanted)
    for url in wanted:
        source = found.get(url)
        if source is None:
            raise InvalidInput(f"no document {url} in site {site}")
        if source.snapshot_id is None or source.content_ref is None:
            raise InvalidInput(f"{url} has no version yet: crawl it first")
        if source.status == "blocked":
            raise InvalidInput(f"{url} is blocked (gate 2): a blocked page is never ingested, alone or combined")
    composite_id = str(uuid.uuid4())
    parts = [f"# {title}\n"]
    sources = []
    for url in wanted:
        source = found[url]
        body = deps.blobs.get(str(source.content_ref)).decode("utf-8")
        parts.append(f"\n## {source.title or url}\n\nSource: {url} (version {source.version})\n\n{body.strip()}\n")
        sources.append({"document_id": source.document_id, "url": url, "snapshot_id": source.snapshot_id,
                        "version": source.version})
    content = "".join(parts).encode("utf-8")
    content_hash = hashlib.sha1(content).hexdigest()
    key = snapshot_content_key(site, composite_id, content_hash)
    deps.blobs.put(key, content)  # a fresh composite id: nothing can be there yet
    snapshot_id = deps.metadata.save_composite(composite_id, site, title, kind, content_hash, key, sources, actor)
    deps.bus.publish(SnapshotsWritten(run_id=None, site_domain=site, snapshot_ids=(snapshot_id,)), ordering_key=site)
    return Composite(composite_id, site, title, "generated", snapshot_id, tuple(sources), kind)


def list_composites(deps: Deps, site: str) -> list[Composite]:
    return deps.metadata.composites(site_key(site))
