"""The blob store port, the object layout of the ADR, and the backend chooser.

Keys (seed 003; ``page_id = url_hash = SHA1(canonical_url)``,
``content_hash = SHA1(content.md bytes)``)::

    domains/{site}/runs/{run_id}/map/links.json
    domains/{site}/runs/{run_id}/samples/{page_id}.md
    domains/{site}/runs/{run_id}/raw/{page_id}.md          raw.md of this run's fetch
    domains/{site}/runs/{run_id}/content/{page_id}.md      content.md of this run's fetch (hand-off to snapshot)
    domains/{site}/document-snapshots/{document_id}/{content_hash}/content.md
    domains/{site}/document-snapshots/{document_id}/{content_hash}/raw.md

Writes are create-only: writing the same bytes again is a no-op (idempotent
redelivery), writing other bytes to an existing key raises BlobConflict. Only
erasure and retention delete; a deleted key may be created again.
"""

from __future__ import annotations

from typing import Protocol

from gleaner.settings.config import Settings


class BlobStore(Protocol):
    def put(self, key: str, data: bytes, content_type: str = "text/markdown; charset=utf-8") -> bool:
        """Create the object; True if written, False if it already held these bytes."""
        ...

    def get(self, key: str) -> bytes:
        """The object's bytes; KeyError if absent."""
        ...

    def exists(self, key: str) -> bool: ...

    def copy(self, source: str, target: str) -> bool:
        """Create target with source's bytes (create-only, like put); True if written."""
        ...

    def delete(self, key: str) -> bool:
        """Remove the object (erasure, retention); True if it existed. The only way a body ever goes."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Keys under prefix, sorted."""
        ...

    def uri(self, key: str) -> str:
        """The object's address as stored in the database (file://… or gs://…)."""
        ...


def run_prefix(site: str, run_id: str) -> str:
    return f"domains/{site}/runs/{run_id}"


def map_key(site: str, run_id: str) -> str:
    return f"{run_prefix(site, run_id)}/map/links.json"


def sample_key(site: str, run_id: str, page_id: str) -> str:
    return f"{run_prefix(site, run_id)}/samples/{page_id}.md"


def run_raw_key(site: str, run_id: str, page_id: str) -> str:
    return f"{run_prefix(site, run_id)}/raw/{page_id}.md"


def run_content_key(site: str, run_id: str, page_id: str) -> str:
    return f"{run_prefix(site, run_id)}/content/{page_id}.md"


def run_body_key(site: str, run_id: str, page_id: str) -> str:
    """A response body map's walk or sample's sample fetched, kept so scrape does not ask the site again."""
    return f"{run_prefix(site, run_id)}/bodies/{page_id}"


def run_answer_key(site: str, run_id: str, page_id: str) -> str:
    """What the site answered map's walk for a page (store/ledger/fetchonce.Prefetched as JSON), beside its body: a
    walk redone after a crash (a resume re-maps) replays it instead of asking the site again."""
    return f"{run_prefix(site, run_id)}/answers/{page_id}.json"


def run_kept_answer_key(site: str, run_id: str, stage: str, page_id: str) -> str:
    """What the site answered sample or a scrape batch (``stage``: ``sample``, ``scrape-{batch_no}``), kept
    beside the body (and discarded with it) the moment it came, before anything else is done with it: a
    delivery redone after a crash (a resume) replays it instead of asking the site again."""
    return f"{run_prefix(site, run_id)}/bodies/answers-{stage}/{page_id}.json"


def kept_answer_keys(blobs: BlobStore, site: str, run_id: str, page_id: str) -> list[str]:
    """Every answer sample or a scrape batch of the run kept for the page (erasure deletes them with its body)."""
    return [key for key in blobs.list(f"{run_prefix(site, run_id)}/bodies/answers-")
            if key.endswith(f"/{page_id}.json")]


def run_rendered_key(site: str, run_id: str, page_id: str) -> str:
    """A page's rendered DOM, kept beside its fetched body (and discarded with it) so scrape does not render
    a page map's walk or sample's sample already rendered."""
    return f"{run_prefix(site, run_id)}/bodies/{page_id}.rendered.html"


def is_run_artefact(key: str) -> bool:
    """Run-scoped artefacts (domains/{site}/runs/…) may expire; snapshots never do."""
    parts = key.split("/")
    return len(parts) > 3 and parts[0] == "domains" and parts[2] == "runs"


def snapshot_prefix(site: str, document_id: str, content_hash: str) -> str:
    return f"domains/{site}/document-snapshots/{document_id}/{content_hash}"


def snapshot_content_key(site: str, document_id: str, content_hash: str) -> str:
    return f"{snapshot_prefix(site, document_id, content_hash)}/content.md"


def snapshot_raw_key(site: str, document_id: str, content_hash: str) -> str:
    return f"{snapshot_prefix(site, document_id, content_hash)}/raw.md"


def snapshot_original_key(site: str, document_id: str, content_hash: str, extension: str) -> str:
    """A document's original bytes (``original.pdf``) beside the content.md extracted from them."""
    return f"{snapshot_prefix(site, document_id, content_hash)}/original.{extension}"


def open_blob_store(settings: Settings) -> BlobStore:
    """Choose the backend from GLEANER_BLOB_URL: file://DIR, gs://BUCKET[/prefix], or the default dir."""
    from gleaner.errors import ConfigError

    url = settings.blob_url
    if not url:
        from gleaner.store.backends.localblobs import LocalBlobStore

        return LocalBlobStore(settings.data_dir / "blobs")
    if url.startswith("file://"):
        from pathlib import Path

        from gleaner.store.backends.localblobs import LocalBlobStore

        return LocalBlobStore(Path(url[len("file://"):]))
    if url.startswith("gs://"):
        from gleaner.store.backends.gcsblobs import GcsBlobStore

        return GcsBlobStore.from_url(url, settings)
    raise ConfigError(f"GLEANER_BLOB_URL must start with file:// or gs://, got {url!r}")
