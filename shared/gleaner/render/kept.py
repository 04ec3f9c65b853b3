"""A page rendered once per run: map's walk or sample's sample keep their rendering for scrape.

A page whose rendering is already known (its section's verdict is ``browser``, or its mode
``always``) may be read by the browser before scrape: by map's walk, for the links only its scripts
write, and by sample, to judge its section. Each keeps the rendered DOM beside the answer it keeps
for scrape (store/ledger/fetchonce.py), under the run's bodies (discarded with them), with the rendering's
fetch facts; scrape then reads that DOM instead of rendering the page again, and a later stage of the
same run reuses it the same way.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gleaner.errors import BlobConflict
from gleaner.store.backends.blobs import run_rendered_key

if TYPE_CHECKING:
    from gleaner.render.browser import Rendering
    from gleaner.store.backends.blobs import BlobStore


@dataclass(frozen=True, slots=True)
class KeptRendering:
    """A rendering read back: the DOM and its fetch facts."""

    html: bytes
    facts: dict[str, Any]


def keep_rendering(blobs: BlobStore, site: str, run_id: str, page_id: str, answer: dict[str, Any],
                   rendering: Rendering) -> dict[str, Any]:
    """``answer`` (a kept answer's dict) with ``rendering`` kept beside it; as it was if nothing was read."""
    if rendering.html is None:
        return answer
    key = run_rendered_key(site, run_id, page_id)
    with contextlib.suppress(BlobConflict):  # a redelivered stage rendered it already: the first one stands
        blobs.put(key, rendering.html, "text/html; charset=utf-8")
    return {**answer, "rendered_key": key, "rendering": rendering.facts()}


def kept_rendering(blobs: BlobStore, answer: dict[str, Any] | None) -> KeptRendering | None:
    """The rendering kept with a kept answer; None when there is none or its blob is gone (run artefacts
    expire), and then the page is rendered again."""
    if not answer or not answer.get("rendered_key"):
        return None
    try:
        html = blobs.get(str(answer["rendered_key"]))
    except KeyError:
        return None
    return KeptRendering(html, dict(answer.get("rendering") or {}))
