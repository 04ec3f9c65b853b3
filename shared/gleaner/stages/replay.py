"""Replay a past run's pages from what is stored (the ADR's "replay-from-snapshot"): a run of its own,
``mode=reprocess_from_snapshot``, that fetches nothing.

What it takes: every page the run got a body for (fetched, or 304 not modified), as the version that
run saw (the one it made, else the one with the hash it fetched, else the newest kept at its end).

What it does with each, from the store alone:

- **extraction**: a document whose original bytes are kept (a PDF's ``original.pdf``) is extracted
  again with this version's extractor. A web page's HTML is not kept (the ADR: "HTML is not
  retained"), so its stored content.md is the input as it is;
- **change detection**: the snapshot stage, as in any run (the site's ignore_text rules of now): a
  re-extraction that reads differently becomes a new version with its change event, the same text
  writes nothing;
- **ingest**: every replayed version goes to ingest again, so a version whose ingest failed or was
  lost is ingested now and each gets its default routing back; text already ingested is
  content-addressed and stays as it is.

What it leaves out, named in the run's options (``left_out``) and in the answer: a page whose current
version is a later one (a replay never rolls a page back), a page whose version is no longer kept
(pruned) and an erased page. A run still going cannot be replayed. Replayed pages count as fetched
in the run's counters (read from the store, each URL's reason says so); nothing touches the
documents' fetch facts.
"""

from __future__ import annotations

import uuid
from typing import Any

from gleaner.app import Deps
from gleaner.errors import InvalidInput
from gleaner.extract.page import PDF, extract_document
from gleaner.messages import FetchedPage, PagesFetched, SnapshotsWritten
from gleaner.runtime.runcontrol import RunNotFound
from gleaner.stages import snapshot
from gleaner.stages.upkeep import finish_run
from gleaner.store.backends.blobs import run_body_key, run_content_key, run_raw_key
from gleaner.store.ledger.runstate import RunStatus
from gleaner.urls import host_of, site_domain_of, url_hash


class RunNotReplayable(InvalidInput):
    """The run is still going (409 over HTTP)."""


def left_out_reason(page: dict[str, Any]) -> str | None:
    """Why a page of the run is not replayed, or None when it is."""
    if page["deleted"]:
        return "erased: its content is refused"
    if page["snapshot_id"] is None or not page["content_ref"]:
        return "the version this run saw is no longer kept"
    if page["current_snapshot_id"] != page["snapshot_id"]:
        return f"a later version than v{page['version']} is current: a replay never rolls a page back"
    return None


def _hand_off(deps: Deps, site: str, run_id: str, page: dict[str, Any]) -> dict[str, Any]:
    """The page as the snapshot stage takes it: re-extracted from its kept original, else as stored."""
    out = {"document_id": page["document_id"], "content_hash": page["content_hash"],
           "raw_hash": page["raw_hash"] or "", "extractor": page["extractor"] or "",
           "reason": f"replayed from stored version v{page['version']}: not fetched", "fetched": None}
    if not (page["original_ref"] and page["mime_type"] == PDF):
        return out
    body = deps.blobs.get(page["original_ref"])
    extracted = extract_document(body)
    if extracted.refused is not None or extracted.content_hash == page["content_hash"]:
        out["reason"] = f"re-extracted from the stored original of v{page['version']}: the same text"
        return out
    page_id = url_hash(page["url"])
    keys = (run_content_key(site, run_id, page_id), run_raw_key(site, run_id, page_id),
            run_body_key(site, run_id, page_id))
    for key, data in zip(keys, (extracted.content, extracted.raw, body), strict=True):
        deps.blobs.put(key, data)
    out.update(content_hash=extracted.content_hash, raw_hash=extracted.raw_hash, extractor=extracted.extractor,
               reason=f"re-extracted from the stored original of v{page['version']} with {extracted.extractor}",
               fetched=FetchedPage(document_id=page["document_id"], content_hash=extracted.content_hash,
                                   raw_hash=extracted.raw_hash, content_key=keys[0], raw_key=keys[1],
                                   fetch_status=200, fetch_time_ms=0, byte_size=len(body),
                                   extractor=extracted.extractor, source_blake3=extracted.source_blake3 or None,
                                   original_key=keys[2], mime_type=PDF))
    return out


def replayable(deps: Deps, source_run_id: str) -> dict[str, Any]:
    """The run's summary if it can be replayed now; RunNotFound, RunNotReplayable otherwise."""
    source = deps.metadata.run_summary(source_run_id)
    if source is None:
        raise RunNotFound(f"no run {source_run_id}")
    if not RunStatus(source["status"]).terminal:
        raise RunNotReplayable(f"run {source_run_id} is still {source['status']}: replay it once it has ended")
    return source


def replay(deps: Deps, source_run_id: str, triggered_by: str = "api", run_id: str | None = None) -> dict[str, Any]:
    """Replay the run's pages as a new run (``run_id``, else a new id); ``{"run_id", "replay_of", "status",
    "replayed", "left_out"}``."""
    source = replayable(deps, source_run_id)
    site, target = source["site_domain"], source["target_url"]
    run_id = run_id or str(uuid.uuid4())
    pages, left_out = [], []
    for page in deps.metadata.replay_inputs(source["run_id"]):
        why = left_out_reason(page)
        if why is None:
            pages.append(_hand_off(deps, site, run_id, page))
        else:
            left_out.append({"url": page["url"], "reason": why})
    host_id = deps.metadata.upsert_source_host(site, host_of(target), own_site=site_domain_of(target) == site)
    deps.metadata.open_replay_run(run_id, source["run_id"], site, host_id, target, triggered_by, pages, left_out,
                                  deps.worker)
    if pages:
        handed = tuple(p["fetched"] or FetchedPage(
            document_id=p["document_id"], content_hash=p["content_hash"], raw_hash=p["raw_hash"], content_key=None,
            raw_key=None, fetch_status=200, fetch_time_ms=0, byte_size=0, extractor=p["extractor"]) for p in pages)
        results = snapshot.handle(PagesFetched(run_id=run_id, site_domain=site, batch_no=0, pages=handed), deps)
        # The same text writes no version, but ingest takes it again: what it left undone is done now.
        same = tuple(r.snapshot_id for r in results if r.outcome == "unchanged" and r.snapshot_id)
        if same:
            deps.bus.publish(SnapshotsWritten(run_id=run_id, site_domain=site, snapshot_ids=same), ordering_key=site)
    finish_run(deps, run_id)
    if deps.local_bus is not None:
        deps.local_bus.drain()
    summary = deps.metadata.run_summary(run_id) or {}
    return {"run_id": run_id, "replay_of": source["run_id"], "status": summary.get("status"),
            "replayed": len(pages), "left_out": left_out}
