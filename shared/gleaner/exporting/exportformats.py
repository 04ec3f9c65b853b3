"""A site's current documents as records that data pipelines load as they are: JSON Lines and Parquet.

``gleaner export SITE DIR --format jsonl`` writes ``DIR/documents.jsonl``, ``--format parquet``
``DIR/documents.parquet``; ``GET /v1/sites/{site}/export?format=jsonl`` streams the same lines. One
record per current document::

    {"url", "title", "site_domain", "document_id", "version", "content_hash", "text_hash",
     "fetched_at", "markdown"[, "spans": [{"start", "end", "kind"}, ...]]}

``text_hash`` names the version's canonical text (null before it is ingested) and ``spans`` its span
ledger (on request): byte offsets into that text, so a pipeline can cite what it loads through
``gleaner slice`` or ``/v1/texts/{text_hash}``. Documents are listed ``LISTING_PAGE`` at a time (each
page its own short read, so a slow HTTP reader holds no database connection) and records are built
one at a time from the blob store, so an export never holds the whole site in memory; Parquet is
written in row groups of ``PARQUET_ROWS`` records. A page that changes while a long export runs is
exported as it is when its listing page is read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

from gleaner.app import Deps
from gleaner.errors import ConfigError, InvalidInput

PARQUET_ROWS = 500  # a row group: bounded memory, still few enough groups for readers to scan quickly
LISTING_PAGE = 200  # documents listed per read: a few hundred small rows, far fewer reads than documents


class ExportFormat(StrEnum):
    MD = "md"
    JSONL = "jsonl"
    PARQUET = "parquet"


class BodyMissing(InvalidInput):
    """A current version's body is not in the blob store (the export stops rather than skip a page)."""


def current_items(deps: Deps, site: str, page: int = LISTING_PAGE) -> Iterator[dict[str, Any]]:
    """The site's current versions in URL order, read ``page`` at a time."""
    after: str | None = None
    while True:
        items = deps.metadata.current_versions_after(site, after, page)
        yield from items
        if len(items) < page:
            return
        after = items[-1]["url"]


def records(deps: Deps, site: str, *, raw: bool = False, spans: bool = False,
            page: int = LISTING_PAGE) -> Iterator[dict[str, Any]]:
    """One record per current document of ``site``, in URL order (run inside the caller's tenant scope)."""
    for item in current_items(deps, site, page):
        ref = (item["raw_ref"] if raw else None) or item["content_ref"]
        try:
            body = deps.blobs.get(ref)
        except KeyError:
            raise BodyMissing(f"the body of {item['url']} v{item['version']} is missing from the blob store"
                              f" ({ref})") from None
        record: dict[str, Any] = {
            "url": item["url"], "title": item["title"], "site_domain": site, "document_id": item["document_id"],
            "version": item["version"], "content_hash": item["content_hash"], "text_hash": item["text_hash"],
            "fetched_at": item["fetched_at"], "markdown": body.decode("utf-8", errors="replace"),
        }
        if spans:
            ledger = deps.metadata.spans_of_text(item["text_hash"]) if item["text_hash"] else []
            record["spans"] = [{"start": s, "end": e, "kind": k} for s, e, k in ledger]
        yield record


def jsonl_lines(deps: Deps, site: str, *, raw: bool = False, spans: bool = False,
                page: int = LISTING_PAGE) -> Iterator[bytes]:
    """The export as JSON Lines, one encoded line per document (what the HTTP route streams)."""
    for record in records(deps, site, raw=raw, spans=spans, page=page):
        yield json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"


def write_jsonl(deps: Deps, site: str, directory: Path, *, raw: bool = False, spans: bool = False) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    count = 0
    with (directory / "documents.jsonl").open("wb") as out:
        for line in jsonl_lines(deps, site, raw=raw, spans=spans):
            out.write(line)
            count += 1
    return count


def write_parquet(deps: Deps, site: str, directory: Path, *, raw: bool = False, spans: bool = False) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("Parquet export needs pyarrow: pip install 'gleaner[parquet]'") from None
    fields = [pa.field("url", pa.string()), pa.field("title", pa.string()), pa.field("site_domain", pa.string()),
              pa.field("document_id", pa.string()), pa.field("version", pa.int32()),
              pa.field("content_hash", pa.string()), pa.field("text_hash", pa.string()),
              pa.field("fetched_at", pa.string()), pa.field("markdown", pa.string())]
    if spans:
        span = pa.struct([("start", pa.int64()), ("end", pa.int64()), ("kind", pa.string())])
        fields.append(pa.field("spans", pa.list_(span)))
    schema = pa.schema(fields)
    directory.mkdir(parents=True, exist_ok=True)
    count = 0
    batch: list[dict[str, Any]] = []
    with pq.ParquetWriter(str(directory / "documents.parquet"), schema) as writer:
        for record in records(deps, site, raw=raw, spans=spans):
            batch.append(record)
            count += 1
            if len(batch) >= PARQUET_ROWS:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []
        # An empty site still gets a readable file with the schema.
        writer.write_table(pa.Table.from_pylist(batch, schema=schema))
    return count
