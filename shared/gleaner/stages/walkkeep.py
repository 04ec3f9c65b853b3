"""What map's walk remembers across runs and keeps for this run's later stages (store/ledger/fetchonce.py)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from gleaner.discover.links import PageLinks
from gleaner.errors import BlobConflict, GleanerError, PermanentError
from gleaner.fetch.types import FetchOutcome, FetchResult
from gleaner.render.kept import keep_rendering
from gleaner.store.backends.blobs import run_answer_key
from gleaner.store.ledger.fetchonce import Prefetched, kept, replayed
from gleaner.store.ledger.prefetch import KnownLinks
from gleaner.urls import url_hash

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.render.browser import Rendering


class MapFailed(PermanentError):
    """The whole run cannot proceed (robots unknown, start URL unreachable and nothing else found)."""


class WalkKeeper:
    """What the walk remembers across runs and keeps for this run's scrape (store/ledger/fetchonce.py).

    ``known`` gives, for pages about to be walked, the links their body held when last read and the
    validators to ask with; ``keep`` stores each answer for scrape (``answers``, by canonical URL, which
    the run's ledger rows are inserted with); ``read`` notes the links of a body read now, which ``save``
    writes once the run's documents exist.
    """

    def __init__(self, deps: Deps, site: str, run_id: str,
                 erased: Callable[[str], str | None] = lambda _url: None) -> None:
        self._deps, self._site, self._run_id, self._erased = deps, site, run_id, erased
        self.answers: dict[str, dict[str, object]] = {}
        self._redone: set[str] | None = None  # the answers an earlier walk of this run kept (kept_before)
        self._links: list[tuple[str, str | None, str | None, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = []

    def known(self, urls: list[str]) -> dict[str, KnownLinks]:
        return self._deps.metadata.known_links(self._site, urls)

    def keep(self, canonical: str, result: FetchResult, ask: KnownLinks | None = None) -> None:
        if result.outcome is FetchOutcome.NOT_MODIFIED and ask is not None:
            # A 304 need not repeat the validators: the page is still the one they name, and sample
            # matches them against its previous sample's (stages/sample.py).
            result = replace(result, etag=result.etag or ask.etag,
                             last_modified=result.last_modified or ask.last_modified)
        try:
            answer = kept(self._deps.blobs, self._site, self._run_id, url_hash(canonical), result, "map")
        except GleanerError as exc:
            # The store cannot take a body, so it will not take the pages either: end the run now (as for
            # the map JSON below) rather than walk the site again on every retry of the map.
            raise MapFailed(f"blob store failed: {exc}") from exc
        if answer is not None:
            self.answers[canonical] = answer.to_dict()
            try:  # beside the body: a walk redone after a crash replays it (kept_before)
                with contextlib.suppress(BlobConflict):
                    self._deps.blobs.put(run_answer_key(self._site, self._run_id, url_hash(canonical)),
                                         json.dumps(answer.to_dict(), sort_keys=True).encode("utf-8"),
                                         "application/json")
            except GleanerError as exc:
                raise MapFailed(f"blob store failed: {exc}") from exc

    def kept_before(self, canonical: str, url: str) -> FetchResult | None:
        """The answer this run's walk kept for the page before a crash (its map is redone on resume), as a
        fetch result: the site is not asked twice in one run. None when there is none (or its body is gone)."""
        if self._redone is None:  # one listing per map: a first walk (the usual case) asks for nothing more
            prefix = run_answer_key(self._site, self._run_id, "").rsplit("/", 1)[0] + "/"
            self._redone = set(self._deps.blobs.list(prefix))
        key = run_answer_key(self._site, self._run_id, url_hash(canonical))
        if key not in self._redone:
            return None
        try:
            raw = self._deps.blobs.get(key)
        except KeyError:
            return None
        prefetched = Prefetched.from_dict(json.loads(raw))
        result = replayed(self._deps.blobs, prefetched, url, url)
        if result is not None:
            self.answers[canonical] = prefetched.to_dict()
        return result

    def keep_rendering(self, canonical: str, rendering: Rendering) -> None:
        """Keep a walked page's rendering beside its answer, so sample and scrape do not render it again."""
        answer = self.answers.get(canonical)
        if answer is None:
            return
        try:
            self.answers[canonical] = keep_rendering(self._deps.blobs, self._site, self._run_id, url_hash(canonical),
                                                     answer, rendering)
        except GleanerError as exc:
            raise MapFailed(f"blob store failed: {exc}") from exc

    def read(self, canonical: str, etag: str | None, last_modified: str | None, page: PageLinks) -> None:
        if etag or last_modified:
            self._links.append((canonical, etag, last_modified, page.links, page.feeds, page.chain))

    def save(self) -> None:
        # Links to erased pages are not remembered: the URL is kept nowhere.
        links = [(u, et, lm, tuple(x for x in ln if self._erased(x) is None), fd,
                  tuple(x for x in ch if self._erased(x) is None)) for u, et, lm, ln, fd, ch in self._links]
        self._deps.metadata.save_links(self._site, self._run_id, links)
