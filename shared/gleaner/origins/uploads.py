"""Uploads (seed 004's ``POST /v1/ingest``): a file, a URL's body or inline text, kept as a document.

Two steps, so that a caller hears about a bad file at once and a good one is worked on after:

1. :func:`accept` checks what can be checked without writing (the format, its ceiling, that its
   extractor reads it and finds text), then writes the job row and the original's staging copy
   (``domains/{site}/uploads/{job}/original.{ext}``). A refusal writes nothing.
2. :func:`run_job` lands the extracted markdown (gleaner.origins.landing: versions, canonical text,
   spans, chunks, search, events, contradictions) and settles the job with the document and its
   version, or the reason it failed; the staging copy goes either way (the kept original is the
   snapshot's ``original.{ext}``).

The same bytes at the same path again make a job whose outcome is ``unchanged`` and which writes
no version; other bytes at that path are its next version.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from gleaner.app import Deps
from gleaner.errors import InvalidInput
from gleaner.origins.formats import (
    MAX_UPLOAD_BYTES,
    MIME_TYPE,
    ORIGINAL_EXTENSION,
    ExtractedFile,
    Format,
    UnreadableFile,
    check_ceiling,
    detect_format,
    extract_file,
)
from gleaner.origins.identity import upload_path, upload_url
from gleaner.origins.landing import Original, land
from gleaner.origins.store import DocumentIdentity, OriginStore
from gleaner.tenancy import scope, validate_site_domain


@dataclass(frozen=True, slots=True)
class UploadRequest:
    site_domain: str
    data: bytes
    requested_by: str
    file_name: str | None = None
    path: str | None = None
    format_hint: str | None = None
    content_type: str | None = None
    source_url: str | None = None  # the URL the bytes came from (the ``{"url"}`` form)


@dataclass(frozen=True, slots=True)
class Accepted:
    job_id: str
    site_domain: str
    extracted: ExtractedFile  # handed to run_job in this process (another process extracts again)


def staging_key(site: str, job_id: str, fmt: Format) -> str:
    return f"domains/{site}/uploads/{job_id}/original.{ORIGINAL_EXTENSION[fmt]}"


def accept(deps: Deps, req: UploadRequest, max_upload: int = MAX_UPLOAD_BYTES) -> Accepted:
    """Check the upload and record its job (see the module docstring); InvalidInput (TooLarge,
    UnreadableFile) before anything is written."""
    site = validate_site_domain(req.site_domain)
    fmt = detect_format(req.file_name, req.content_type, req.format_hint)
    check_ceiling(fmt, len(req.data), max_upload)
    path = upload_path(req.path, req.file_name)
    extracted = extract_file(req.data, fmt)
    store = OriginStore(deps.engine)
    with scope(site):
        job_id = store.create_job(site, fmt.value, path, req.source_url or req.file_name, len(req.data),
                                  req.requested_by)
        key = staging_key(site, job_id, fmt)
        deps.blobs.put(key, req.data, MIME_TYPE[fmt])
        store.set_job_original(job_id, key)
    return Accepted(job_id, site, extracted)


def run_job(deps: Deps, job_id: str, site: str, extracted: ExtractedFile | None = None) -> dict[str, Any]:
    """Land a queued job (once: a job another worker took is only read) and return it as settled."""
    store = OriginStore(deps.engine)
    with scope(site):
        if not store.claim_job(job_id):
            job = store.job(job_id)
            if job is None:
                raise InvalidInput(f"no ingest job {job_id}")
            return job
        job = store.job(job_id)
        assert job is not None
        fmt = Format(job["format"])
        staged = job["original_ref"]
        try:
            data = deps.blobs.get(staged)
            found = extracted or extract_file(data, fmt)
            ident = DocumentIdentity(site, upload_url(site, job["path"]), job["path"], "upload",
                                     title=found.title or job["path"].rsplit("/", 1)[-1],
                                     source_url=job["source_name"], created_by=job["requested_by"])
            landed = land(deps, ident, found.markdown, extractor=found.extractor,
                          original=Original(data, ORIGINAL_EXTENSION[fmt], MIME_TYPE[fmt]))
            store.finish_job(job_id, document_id=landed.document_id, version=landed.version,
                             outcome=landed.outcome, conflicts=landed.conflicts)
        except (InvalidInput, KeyError) as exc:
            store.finish_job(job_id, error=str(exc) or type(exc).__name__)
        except Exception as exc:  # a job never stays "running": the caller polling it learns it failed
            store.finish_job(job_id, error=f"internal error: {type(exc).__name__}")
            raise
        finally:
            with contextlib.suppress(KeyError):
                deps.blobs.delete(staged)
        settled = store.job(job_id)
        assert settled is not None
        return settled


def fetch_for_upload(settings: Any, url: str) -> tuple[bytes, str | None, str]:
    """(body, content type, final URL) of a URL to upload, through the crawl's fetcher (address policy,
    robots.txt, size limits); UnreadableFile says why it was not fetched."""
    from gleaner.fetch.explain import why_not_fetched
    from gleaner.fetch.fetcher import Fetcher
    from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest
    from gleaner.urls import canonicalize

    canonical = canonicalize(url)
    with Fetcher(settings) as fetcher:
        result = fetcher.fetch(FetchRequest(canonical, accept=(ContentKind.HTML, ContentKind.PDF, ContentKind.TEXT)))
    if result.outcome is not FetchOutcome.FETCHED or result.body is None:
        raise UnreadableFile(f"{canonical}: not fetched: {why_not_fetched(result, canonical)}")
    return result.body, result.content_type, result.final_url or canonical


def job_answer(job: dict[str, Any]) -> dict[str, Any]:
    """``GET /v1/ingest/{job}``'s answer (and the CLI's): status, document, version, error, conflicts."""
    return {"job_id": job["job_id"], "status": job["status"], "document_id": job["document_id"],
            "version": job["version"], "outcome": job["outcome"], "error": job["error"],
            "site_domain": job["site_domain"], "path": job["path"], "conflicts": job["conflicts"]}
