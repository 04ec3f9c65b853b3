"""Answers kept the moment they come: a sample or a scrape batch redone after a crash asks the site nothing twice.

Sample's sample and each scrape batch write what the site answered for a page (a
:class:`~gleaner.store.ledger.fetchonce.Prefetched` as JSON, its body beside it at ``bodies/{page_id}``) before
anything else is done with it. Extraction and the ledger write that records the page come later, a few
pages at a time: a ``kill -9`` in between lost the answers, and a resume asked for those pages again.
The stage redone lists its own folder of kept answers once (``bodies/answers-{stage}/``: absent, and one
cheap listing, on a first delivery) and replays them as if it had just fetched them. They go with the
run's bodies when the run settles (stages/upkeep.py) and with the page when it is erased. Scrape keeps
them on the in-process bus only (stages/scrapebatch.py says why).
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

from gleaner.errors import BlobConflict, GleanerError
from gleaner.fetch.types import FetchOutcome, FetchResult
from gleaner.store.backends.blobs import BlobStore, run_kept_answer_key
from gleaner.store.ledger.fetchonce import Prefetched, kept

log = logging.getLogger(__name__)


class KeptAnswers:
    """One stage's kept answers in one run (``stage``: ``sample``, or ``scrape-{batch_no}``)."""

    def __init__(self, blobs: BlobStore, site: str, run_id: str, stage: str, by: str) -> None:
        self._blobs, self._site, self._run_id, self._stage, self._by = blobs, site, run_id, stage, by
        self._earlier: dict[str, dict[str, Any]] | None = None
        self._failed = False

    def earlier(self) -> dict[str, dict[str, Any]]:
        """Page id -> the answer an earlier delivery of this stage kept (listed once; unreadable ones left out)."""
        if self._earlier is None:
            self._earlier = {}
            prefix = run_kept_answer_key(self._site, self._run_id, self._stage, "").rsplit("/", 1)[0] + "/"
            try:
                keys = self._blobs.list(prefix)
            except GleanerError as exc:
                log.warning("run %s: answers kept by an earlier %s not read: %s", self._run_id, self._stage, exc)
                keys = []
            for key in keys:
                with contextlib.suppress(KeyError, ValueError, GleanerError):
                    self._earlier[key.rsplit("/", 1)[1].removesuffix(".json")] = json.loads(self._blobs.get(key))
        return self._earlier

    def keep(self, page_id: str, result: FetchResult) -> dict[str, Any] | None:
        """Keep ``result`` (its body, then its answer) for a redone delivery; the answer kept, or None.

        A 304 is not kept (asking again costs the site no body), nor a spent budget. A store that cannot
        take the body keeps nothing more in this stage: the page goes on as fetched and meets the store's
        failure where its artefacts are written, which ends the run."""
        if self._failed or result.outcome in (FetchOutcome.NOT_MODIFIED, FetchOutcome.EXHAUSTED):
            return None
        try:
            answer = kept(self._blobs, self._site, self._run_id, page_id, result, self._by)
        except GleanerError as exc:
            self._failed = True
            log.warning("run %s: answers of %s not kept for a resume: %s", self._run_id, self._stage, exc)
            return None
        if answer is None:
            return None
        self.note(page_id, answer)
        return answer.to_dict()

    def note(self, page_id: str, answer: Prefetched) -> None:
        """Write down an answer whose body (if any) is kept already."""
        if self._failed:
            return
        try:
            with contextlib.suppress(BlobConflict):  # a redelivery's answer: the first one stands
                self._blobs.put(run_kept_answer_key(self._site, self._run_id, self._stage, page_id),
                                json.dumps(answer.to_dict(), sort_keys=True).encode("utf-8"), "application/json")
        except GleanerError as exc:
            self._failed = True
            log.warning("run %s: answers of %s not kept for a resume: %s", self._run_id, self._stage, exc)
