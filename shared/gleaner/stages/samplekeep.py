"""What sample's sample keeps: the sample's markdown at ``sample_uri`` (the ADR's samples/), and for this run's
scrape its answer and its rendering (store/ledger/fetchonce.py, render/kept.py), so scrape neither asks for the
page again nor renders it again. Each answer is kept the moment it comes (stages/answerkeep.py): a sample
redone after a crash (a resume of a run killed while sampling) replays it instead of asking again."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from gleaner.errors import BlobConflict, GleanerError
from gleaner.fetch.types import FetchOutcome
from gleaner.render.kept import keep_rendering
from gleaner.stages.answerkeep import KeptAnswers
from gleaner.store.backends.blobs import sample_key
from gleaner.store.ledger.fetchonce import kept, replay_for

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.fetch.types import FetchResult
    from gleaner.messages import CrawlMapped
    from gleaner.render.sampling import RenderedSample
    from gleaner.store.ledger.decisions import PreviousSample
    from gleaner.store.ledger.records import RunPage

log = logging.getLogger("gleaner.stages.sample")  # its warnings read as the sample stage's, as before the split


class SampleAnswers:
    """What the samples got from the site: ``by_document`` goes on the ledger rows for scrape; each answer is
    also kept at once for a sample redone after a crash (:meth:`earlier`)."""

    def __init__(self, deps: Deps, message: CrawlMapped) -> None:
        self.deps = deps
        self.by_document: dict[str, dict[str, Any]] = {}
        self.keeper = KeptAnswers(deps.blobs, message.site_domain, message.run_id, "sample", "sample")

    def earlier(self, sample: RunPage) -> FetchResult | None:
        """The answer an earlier try of this sample got before it died, as a fetch result; None if none."""
        answer = self.keeper.earlier().get(sample.url_hash)
        result = replay_for(self.deps.blobs, answer, sample.fetch_url, None, sample.current_hash is not None)
        if result is not None and answer is not None:
            self.by_document[sample.document_id] = answer
        return result


def keep_answer(deps: Deps, message: CrawlMapped, sample: RunPage, result: FetchResult,
                answers: SampleAnswers) -> None:
    """Keep the sample's answer for scrape; a store that cannot take its body keeps nothing (scrape then asks
    for the page itself and meets the store's failure, which ends the run: the verdict does not need it)."""
    try:
        answer = kept(deps.blobs, message.site_domain, message.run_id, sample.url_hash, result, "sample")
    except GleanerError as exc:
        log.warning("run %s: sample of %s not kept for scrape: %s", message.run_id, sample.path, exc)
        return
    if answer is not None:
        answers.by_document[sample.document_id] = answer.to_dict()
        answers.keeper.note(sample.url_hash, answer)  # beside the body just kept: a redone sample replays it


def vouched_by_walk(prefetched: dict[str, Any] | None, prev: PreviousSample) -> bool:
    """Whether map's walk got a 304 for validators that name the same body as ``prev``'s."""
    if not prefetched or prefetched.get("outcome") != FetchOutcome.NOT_MODIFIED:
        return False
    etag, last_modified = prefetched.get("etag"), prefetched.get("last_modified")
    if etag and prev.etag:
        return bool(etag == prev.etag)
    return bool(last_modified and last_modified == prev.last_modified)


def keep_rendered(deps: Deps, message: CrawlMapped, sample: RunPage, rendered: RenderedSample,
                  answers: SampleAnswers) -> None:
    """Keep the sample's rendering beside its kept answer (this stage's, or map's walk's), so scrape reads it
    instead of rendering the page again."""
    answer = answers.by_document.get(sample.document_id) or sample.prefetched
    if rendered.rendering is None or not answer:
        return  # read from a rendering kept earlier in the run (or no answer to keep it with)
    try:
        answers.by_document[sample.document_id] = keep_rendering(deps.blobs, message.site_domain, message.run_id,
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
