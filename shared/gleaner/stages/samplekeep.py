"""What sample's sample keeps: the sample's markdown at ``sample_uri`` (the ADR's samples/), and for this run's
scrape its answer and its rendering (store/ledger/fetchonce.py, render/kept.py), so scrape neither asks for the
page again nor renders it again."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from gleaner.errors import BlobConflict, GleanerError
from gleaner.render.kept import keep_rendering
from gleaner.store.backends.blobs import sample_key
from gleaner.store.ledger.fetchonce import kept

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.fetch.types import FetchResult
    from gleaner.messages import CrawlMapped
    from gleaner.render.sampling import RenderedSample
    from gleaner.store.ledger.records import RunPage

log = logging.getLogger("gleaner.stages.sample")  # its warnings read as the sample stage's, as before the split


def keep_answer(deps: Deps, message: CrawlMapped, sample: RunPage, result: FetchResult,
                answers: dict[str, dict[str, Any]]) -> None:
    """Keep the sample's answer for scrape; a store that cannot take its body keeps nothing (scrape then asks
    for the page itself and meets the store's failure, which ends the run: the verdict does not need it)."""
    try:
        answer = kept(deps.blobs, message.site_domain, message.run_id, sample.url_hash, result, "sample")
    except GleanerError as exc:
        log.warning("run %s: sample of %s not kept for scrape: %s", message.run_id, sample.path, exc)
        return
    if answer is not None:
        answers[sample.document_id] = answer.to_dict()


def keep_rendered(deps: Deps, message: CrawlMapped, sample: RunPage, rendered: RenderedSample,
                  answers: dict[str, dict[str, Any]]) -> None:
    """Keep the sample's rendering beside its kept answer (this stage's, or map's walk's), so scrape reads it
    instead of rendering the page again."""
    answer = answers.get(sample.document_id) or sample.prefetched
    if rendered.rendering is None or not answer:
        return  # read from a rendering kept earlier in the run (or no answer to keep it with)
    try:
        answers[sample.document_id] = keep_rendering(deps.blobs, message.site_domain, message.run_id,
                                                     sample.url_hash, answer, rendered.rendering)
    except GleanerError as exc:
        log.warning("run %s: rendering of %s not kept for scrape: %s", message.run_id, sample.path, exc)


def store_sample(deps: Deps, message: CrawlMapped, sample: RunPage, content_md: str, errors: list[str]) -> str | None:
    """Keep the sample's markdown; its key, or None (the reason joins ``errors``) when the store refused it."""
    key = sample_key(message.site_domain, message.run_id, sample.url_hash)
    try:
        deps.blobs.put(key, content_md.encode("utf-8"))
    except BlobConflict:
        pass  # a redelivery may re-sample a page that changed meanwhile: the first sample stands
    except GleanerError as exc:
        # The verdict does not need the blob; the scrape stage meets the store's failure and ends the run.
        errors.append(f"sample not stored: {exc}")
        return None
    return key
