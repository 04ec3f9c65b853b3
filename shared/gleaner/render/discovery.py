"""Map's side of rendering: links that exist only in a page's rendered DOM feed discovery.

A walked page whose mode is ``always`` (the run's, or a matching ``--render`` rule's) is also read
rendered, and the links its scripts wrote join the plain ones. Under ``auto`` the walk reads links
plainly: the sampler's verdict comes after discovery.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gleaner.discover.links import PageLinks, extract_links
from gleaner.fetch.types import ContentKind, FetchResult
from gleaner.render.modes import RenderMode, mode_for, parse_render_mode
from gleaner.render.scraping import render_rules
from gleaner.urls import path_of

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.render.browser import SubFetcher

ReadLinks = Callable[[FetchResult, str], PageLinks | None]


def rendered_links(deps: Deps, fetcher: SubFetcher, run_id: str, site_domain: str, render: str | None,
                   max_links: int) -> ReadLinks | None:
    """A reader of walked pages' rendered links, or None when no page of the run can be read rendered."""
    run_mode = parse_render_mode(render) or RenderMode.NEVER
    rules = render_rules(deps, site_domain)
    if run_mode is not RenderMode.ALWAYS and not any(action == "render_always" for _glob, action in rules):
        return None

    def read(result: FetchResult, canonical: str) -> PageLinks | None:
        if result.kind is not ContentKind.HTML:
            return None
        if mode_for(path_of(canonical), run_mode, rules) is not RenderMode.ALWAYS:
            return None
        rendering = deps.renderer.render(result, fetcher, run_id=run_id)
        if rendering.html is None:
            return None
        return extract_links(rendering.html.decode("utf-8", "replace"), result.final_url or result.url, max_links)

    return read


def merged(plain: PageLinks, rendered: PageLinks | None, max_links: int) -> PageLinks:
    """The plain links, then the rendered ones not among them, at most ``max_links``."""
    if rendered is None:
        return plain
    links = tuple(dict.fromkeys([*plain.links, *rendered.links]))
    return PageLinks(links[:max_links], tuple(dict.fromkeys([*plain.feeds, *rendered.feeds])),
                     plain.nofollow, plain.truncated or rendered.truncated or len(links) > max_links)
