"""Scrape's side of rendering: which pages of a batch the browser reads, and what it found there.

A page is rendered when its mode (the oldest render rule matching its path, else its run's) is
``always``, or ``auto`` and its section's sample was judged to need the browser. Such a page is
asked for without validators: its document may be the same shell while the content its scripts
fetch has changed, so only the rendered markdown can say whether it changed (its content hash).
The rendered DOM replaces the fetched body before extraction; the version records
``render_mode = browser``, the ledger row what the page asked for.
A rendering that read nothing leaves the plain fetch standing (recorded with the reason).

A page map's walk or sample's sample already rendered in this run is not rendered again: their
kept rendering (render/kept.py) is read instead, and a kept plain body is rendered without being
fetched again. Links the rendered DOM holds feed discovery (render/found.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest, FetchResult
from gleaner.messages import FetchedPage
from gleaner.render.kept import kept_rendering
from gleaner.render.modes import RenderedBy, RenderMode, mode_for, parse_render_mode
from gleaner.store.ledger.rendering import browser_pages, record_render_facts

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.render.browser import SubFetcher
    from gleaner.store.ledger.records import RunPage


def render_rules(deps: Deps, site_domain: str) -> list[tuple[str, str]]:
    """The site's render rules as (glob, action), oldest first (``rules add --render``)."""
    return [(r.glob, str(r.action)) for r in deps.metadata.site_rules(site_domain)
            if str(r.action).startswith("render_")]


class RenderPlan:
    """Built once per scrape batch: ``request`` and ``read`` per page, ``handed`` per version, ``finish`` at the end."""

    def __init__(self, deps: Deps, run_id: str, site_domain: str, pages: Iterable[RunPage]) -> None:
        self._deps = deps
        self._run_id = run_id
        run_mode = parse_render_mode(deps.run_options(run_id).get("render")) or RenderMode.NEVER
        rules = render_rules(deps, site_domain)
        modes = {p.document_id: mode_for(p.path, run_mode, rules) for p in pages}
        auto = [doc for doc, mode in modes.items() if mode is RenderMode.AUTO]
        self.browser_ids = frozenset(doc for doc, mode in modes.items() if mode is RenderMode.ALWAYS) | (
            browser_pages(deps.engine, run_id, auto) if auto else frozenset())
        # Browser pages whose kept answer holds a rendering made earlier in this run (map's walk, the sample).
        self._kept = {p.document_id: p.prefetched for p in pages
                      if p.document_id in self.browser_ids and p.prefetched and p.prefetched.get("rendered_key")}
        self._rendered: set[str] = set()
        self._facts: dict[str, dict[str, Any]] = {}
        self.html: dict[str, tuple[bytes, str]] = {}  # rendered DOM and its URL, by page (for render/found.py)

    def replayable(self, page: RunPage) -> bool:
        """Whether a page's kept answer may stand for scrape's fetch: for a browser page only one with a body
        (a 304 vouches for the shell, not for what its scripts fetch; the page is asked without validators)."""
        if page.document_id not in self.browser_ids:
            return True
        return page.prefetched is not None and page.prefetched.get("outcome") == FetchOutcome.FETCHED

    def request(self, request: FetchRequest) -> FetchRequest:
        """The page's request: without validators when the browser reads it."""
        if request.key in self.browser_ids:
            return replace(request, etag=None, last_modified=None)
        return request

    def read(self, fetcher: SubFetcher, result: FetchResult) -> FetchResult:
        """The result extraction should read: the rendered DOM for a browser page, else ``result`` as it is."""
        key = str(result.key)
        if key not in self.browser_ids or not result.ok or result.kind is not ContentKind.HTML:
            return result
        kept = kept_rendering(self._deps.blobs, self._kept.get(key))
        if kept is not None:  # rendered earlier in this run: read as it was then
            self._facts[key] = {**kept.facts, "rendered_by": str((self._kept[key] or {}).get("by") or "")}
            html, elapsed_ms = kept.html, 0
        else:
            rendering = self._deps.renderer.render(result, fetcher, run_id=self._run_id)
            self._facts[key] = rendering.facts()
            if rendering.html is None:
                return result
            html, elapsed_ms = rendering.html, rendering.elapsed_ms
        self._rendered.add(key)
        self.html[key] = (html, result.final_url or result.url)
        return replace(result, body=html, charset="utf-8", elapsed_ms=result.elapsed_ms + elapsed_ms)

    def handed(self, page: FetchedPage) -> FetchedPage:
        if page.document_id in self._rendered:
            return replace(page, render_mode=str(RenderedBy.BROWSER))
        return page

    def finish(self) -> None:
        """Record each rendered page's facts on its ledger row."""
        record_render_facts(self._deps.engine, self._run_id, self._facts)
        self._facts.clear()
