"""A scrape batch's pages as read: each as the plain fetch or the browser read it, decided here.

Scrape hands a :class:`PageReader` its batch's pages (their URLs, the validators of their current
snapshots, the answers map's walk or sample's sample kept for them in this run) and takes back one
:class:`PageRead` per page: the answer extraction reads, and what the batch records about how it was
read. Scrape does not know whether a browser read a page; it records the facts it is handed.

Which pages the browser reads is decided once, when the reader is built: a page is rendered when its
mode (the oldest render rule matching its path, else its run's) is ``always``, or ``auto`` and its
section's sample was judged to need the browser. Such a page is asked for without validators: its
document may be the same shell while the content its scripts fetch has changed, so only the rendered
markdown can say whether it changed (its content hash). Its rendered DOM is the body it is read with;
a rendering that read nothing leaves the plain fetch standing (its facts say why).

An answer kept earlier in the run (store/ledger/fetchonce.py) is read before anything is asked: for a
browser page only one with a body stands (a 304 vouches for the shell, not for what its scripts
fetch), and a rendering kept with it (render/kept.py) is read instead of rendering again. A page that
moved for good to another known document of the site is read no further: it is superseded, and what
the redirect served is the other document's content (DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import chain
from typing import TYPE_CHECKING, Any

from gleaner.errors import GleanerError, InvalidInput
from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest, FetchResult
from gleaner.render.kept import kept_rendering
from gleaner.render.modes import RenderedBy, RenderMode, mode_for, parse_render_mode
from gleaner.store.ledger.fetchonce import PAGE_KINDS, replay_for, replayable
from gleaner.store.ledger.rendering import browser_pages
from gleaner.urls import canonicalize

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.fetch.fetcher import Fetcher
    from gleaner.store.ledger.records import RunPage

# Redirects that say a page moved for good: what they lead to is another document's content.
PERMANENT_REDIRECTS = frozenset({301, 308})


def render_rules(deps: Deps, site_domain: str) -> list[tuple[str, str]]:
    """The site's render rules as (glob, action), oldest first (``rules add --render``)."""
    return [(r.glob, str(r.action)) for r in deps.metadata.site_rules(site_domain)
            if str(r.action).startswith("render_")]


@dataclass(frozen=True, slots=True)
class PageRead:
    """One page as read: the answer extraction reads (for a page the browser read, its rendered DOM is the
    body, in UTF-8) and what the batch records about it."""

    page: RunPage
    result: FetchResult
    superseded_by: str | None = None  # the known document it moved to for good: read no further
    rendered: bool = False  # the body is the browser's DOM
    render_facts: dict[str, Any] | None = None  # a rendering's fetch facts, for the page's ledger row
    store_failure: GleanerError | None = None  # its kept answer could not be read back: settled as not stored

    @property
    def render_mode(self) -> str:
        """How its version's bytes were read (the snapshot's ``render_mode``)."""
        return str(RenderedBy.BROWSER if self.rendered else RenderedBy.PLAIN_FETCH)


class PageReader:
    """One scrape batch's pages: which the browser reads is decided when it is built; :meth:`read` reads them."""

    def __init__(self, deps: Deps, run_id: str, site_domain: str, pages: Iterable[RunPage], *,
                 on_answer: Callable[[RunPage, FetchResult], None] | None = None) -> None:
        self._deps = deps
        self._on_answer = on_answer  # told of each answer the site gives, before it is rendered or read
        self._run_id = run_id
        self._site = site_domain
        self._pages = {p.document_id: p for p in pages}
        run_mode = parse_render_mode(deps.run_options(run_id).get("render")) or RenderMode.NEVER
        rules = render_rules(deps, site_domain)
        modes = {doc: mode_for(p.path, run_mode, rules) for doc, p in self._pages.items()}
        auto = [doc for doc, mode in modes.items() if mode is RenderMode.AUTO]
        self._browser = frozenset(doc for doc, mode in modes.items() if mode is RenderMode.ALWAYS) | (
            browser_pages(deps.engine, run_id, auto) if auto else frozenset())
        self._kept = [p for p in self._pages.values() if self._kept_stands(p)]
        kept_ids = {p.document_id for p in self._kept}
        self._requests = [self._request(p) for p in self._pages.values() if p.document_id not in kept_ids]
        self._missing: list[FetchRequest] = []  # kept answers whose body artefact is gone: asked after all

    @property
    def renders(self) -> bool:
        """Whether the browser reads any of the batch's pages."""
        return bool(self._browser)

    def read(self, fetcher: Fetcher, *, stop_at: float | None = None) -> Iterator[PageRead]:
        """Each page as read, in the order its answer comes: kept answers first, then the fetcher's. A request
        that could not start by ``stop_at`` yields nothing (Fetcher.fetch_many). A rendered page's own
        requests go through ``fetcher`` too."""
        yield from self._replays(fetcher)
        for result in chain(fetcher.fetch_many(self._requests, stop_at=stop_at),
                            fetcher.fetch_many(self._missing, stop_at=stop_at)):
            if self._on_answer is not None:
                self._on_answer(self._pages[str(result.key)], result)
            yield self._read(fetcher, result)

    def _kept_stands(self, page: RunPage) -> bool:
        """Whether a page's kept answer may stand for scrape's fetch: for a browser page only one with a body."""
        if not replayable(page.prefetched, page.current_hash is not None):
            return False
        if page.document_id not in self._browser:
            return True
        return page.prefetched is not None and page.prefetched.get("outcome") == FetchOutcome.FETCHED

    def _request(self, page: RunPage) -> FetchRequest:
        """Scrape's request for a page: without validators when the browser reads it."""
        request = _conditional(page)
        if page.document_id in self._browser:
            return replace(request, etag=None, last_modified=None)
        return request

    def _replays(self, fetcher: Fetcher) -> Iterator[PageRead]:
        """Kept answers one at a time (bodies are read as they are needed, never a batch of them at once)."""
        for p in self._kept:
            try:
                result = replay_for(self._deps.blobs, p.prefetched, p.fetch_url, p.document_id,
                                    p.current_hash is not None)
            except GleanerError as exc:
                # The store cannot give the kept body back, so it will not take this page's version either:
                # settled as not stored, like a body it refuses (the site is not asked again).
                yield PageRead(p, FetchResult(p.fetch_url, FetchOutcome.STORE_FAILED, f"blob store: {exc}"[:500],
                                              key=p.document_id), store_failure=exc)
                continue
            if result is None:
                # Asked with its snapshot's validators even for a browser page, as scrape has always asked
                # these (a 304 then settles it unrendered); kept so that moving the decision here changed nothing.
                self._missing.append(_conditional(p))
            else:
                yield self._read(fetcher, result)

    def _read(self, fetcher: Fetcher, result: FetchResult) -> PageRead:
        """One answer as extraction should read it: the rendered DOM for a browser page, else as it came."""
        page = self._pages[str(result.key)]
        moved_to = self._moved_to_known(page, result)
        if moved_to is not None:
            return PageRead(page, result, superseded_by=moved_to)
        if page.document_id not in self._browser or not result.ok or result.kind is not ContentKind.HTML:
            return PageRead(page, result)
        answer = page.prefetched if page.prefetched and page.prefetched.get("rendered_key") else None
        kept = kept_rendering(self._deps.blobs, answer)
        if kept is not None:  # rendered earlier in this run: read as it was then
            facts = {**kept.facts, "rendered_by": str((answer or {}).get("by") or "")}
            html, elapsed_ms = kept.html, 0
        else:
            rendering = self._deps.renderer.render(result, fetcher, run_id=self._run_id)
            facts = rendering.facts()
            if rendering.html is None:
                return PageRead(page, result, render_facts=facts)
            html, elapsed_ms = rendering.html, rendering.elapsed_ms
        return PageRead(page, replace(result, body=html, charset="utf-8", elapsed_ms=result.elapsed_ms + elapsed_ms),
                        rendered=True, render_facts=facts)

    def _moved_to_known(self, page: RunPage, result: FetchResult) -> str | None:
        """The canonical URL of another known document of the site this page permanently redirected to."""
        if not result.ok or not result.redirects or not set(result.redirects) <= PERMANENT_REDIRECTS:
            return None
        try:
            target = canonicalize(result.final_url or "")
        except InvalidInput:
            return None
        if target == page.canonical_url or not self._deps.metadata.document_ids_by_url(self._site, [target]):
            return None
        return target


def _conditional(page: RunPage) -> FetchRequest:
    """A page's request, conditional on the validators of its current snapshot."""
    return FetchRequest(page.fetch_url, key=page.document_id, accept=PAGE_KINDS,
                        etag=page.etag if page.current_hash else None,
                        last_modified=page.last_modified if page.current_hash else None)
