"""Map's side of rendering: links that exist only in a page's rendered DOM feed discovery.

A walked page is also read rendered when its rendering is already known: its mode (the run's, or a
matching ``--render`` rule's) is ``always``, or ``auto`` and the site's latest sample of its section
was judged to need the browser (the verdict sample carries across runs). The links its scripts wrote
join the plain ones, and the rendering is kept for sample and scrape (render/kept.py), so the page is
rendered once in the run. Under ``auto`` a section with no such verdict yet is walked plainly: its
sample is judged after discovery, and the links of what sample and scrape render then join the run
(stages/foundlinks.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gleaner.discover.links import PageLinks, extract_links
from gleaner.fetch.types import ContentKind, FetchResult
from gleaner.render.modes import RenderedBy, RenderMode, mode_for, parse_render_mode
from gleaner.render.reader import render_rules
from gleaner.urls import path_of, section_of

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.render.browser import SubFetcher
    from gleaner.stages.walkkeep import WalkKeeper

ReadLinks = Callable[[FetchResult, str], PageLinks | None]


def browser_sections(deps: Deps, site: str, run_id: str) -> frozenset[str]:
    """The path sections whose latest sample (before this run) was read by the browser."""
    return frozenset(section_of(prev.path) for prev in deps.metadata.previous_samples(site, run_id)
                     if prev.metadata.get("render") == RenderedBy.BROWSER)


def rendered_links(deps: Deps, fetcher: SubFetcher, run_id: str, site_domain: str, render: str | None,
                   max_links: int, keeper: WalkKeeper | None = None) -> ReadLinks | None:
    """A reader of walked pages' rendered links, or None when no page of the run is known to need rendering."""
    run_mode = parse_render_mode(render) or RenderMode.NEVER
    rules = render_rules(deps, site_domain)
    actions = {action for _glob, action in rules}
    auto = run_mode is RenderMode.AUTO or "render_auto" in actions
    sections = browser_sections(deps, site_domain, run_id) if auto else frozenset()
    if run_mode is not RenderMode.ALWAYS and "render_always" not in actions and not sections:
        return None

    def read(result: FetchResult, canonical: str) -> PageLinks | None:
        if result.kind is not ContentKind.HTML:
            return None
        path = path_of(canonical)
        mode = mode_for(path, run_mode, rules)
        if mode is not RenderMode.ALWAYS and not (mode is RenderMode.AUTO and section_of(path) in sections):
            return None
        rendering = deps.renderer.render(result, fetcher, run_id=run_id)
        if rendering.html is None:
            return None
        if keeper is not None:
            keeper.keep_rendering(canonical, rendering)
        return extract_links(rendering.html.decode("utf-8", "replace"), result.final_url or result.url, max_links)

    return read


def merged(plain: PageLinks, rendered: PageLinks | None, max_links: int) -> PageLinks:
    """The plain links, then the rendered ones not among them, at most ``max_links``."""
    if rendered is None:
        return plain
    links = tuple(dict.fromkeys([*plain.links, *rendered.links]))
    return PageLinks(links[:max_links], tuple(dict.fromkeys([*plain.feeds, *rendered.feeds])),
                     plain.nofollow, plain.truncated or rendered.truncated or len(links) > max_links,
                     tuple(dict.fromkeys([*plain.chain, *rendered.chain])))
