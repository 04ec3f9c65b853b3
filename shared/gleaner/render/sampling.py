"""The sampler's side of rendering: is a section's sample better read by the browser?

Under ``auto``, a sample whose plain extraction says little (an SPA shell, navigation only) is
rendered and extracted again; the rendered reading is kept when it finds clearly more text, and the
section's verdict becomes ``browser`` (scrape then renders every page of the section). Under
``always`` the sample is read rendered whenever rendering read anything. The verdict is stored
with the sample's decision, so a later run whose sample answers 304 carries it over. A sample map's
walk already rendered in this run is read from that rendering (render/kept.py), not rendered again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gleaner.extract.page import extract_body
from gleaner.fetch.types import ContentKind, FetchResult
from gleaner.render.kept import KeptRendering
from gleaner.render.modes import RenderedBy, RenderMode, rendered_is_better, wants_render_check

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.extract.html import Extracted
    from gleaner.render.browser import Rendering, SubFetcher


@dataclass(frozen=True, slots=True)
class RenderedSample:
    """The rendered reading of a sample, kept because it beat the plain one: its extraction, the verdict,
    the DOM, and the rendering made now (None when it was read from one kept earlier in the run)."""

    extracted: Extracted
    verdict: RenderedBy
    html: bytes
    rendering: Rendering | None = None


def render_sample(deps: Deps, fetcher: SubFetcher, mode: RenderMode, result: FetchResult, plain_chars: int, *,
                  run_id: str, kept: KeptRendering | None = None) -> RenderedSample | None:
    """The rendered reading of an HTML sample when ``mode`` asks for one and it is better; else None.
    ``kept``: the page's rendering map's walk made in this run, read instead of rendering again."""
    if result.kind is not ContentKind.HTML or not wants_render_check(mode, plain_chars):
        return None
    rendering = None
    if kept is not None:
        html = kept.html
    else:
        rendering = deps.renderer.render(result, fetcher, run_id=run_id)
        if rendering.html is None:
            return None
        html = rendering.html
    extracted = deps.extract_pool.call(extract_body, html, "utf-8", result.final_url or result.url).result()
    if mode is RenderMode.ALWAYS or rendered_is_better(plain_chars, extracted.main_text_chars):
        return RenderedSample(extracted, RenderedBy.BROWSER, html, rendering)
    return None
