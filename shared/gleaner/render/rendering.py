"""What a rendering is: the page read by the browser (or the render service) and the one thing it needs
of the Fetcher. The browser (browser.py), the render service's client (remote.py), what a run keeps of a
rendering (kept.py) and scrape's reading of its pages share these values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from gleaner.fetch.types import FetchRequest, FetchResult
from gleaner.render.gate import SubRequest
from gleaner.render.modes import RenderOutcome


class SubFetcher(Protocol):
    """The one thing rendering needs of the Fetcher: an answer for a request, on the fetch loop."""

    async def fetch_async(self, request: FetchRequest) -> FetchResult: ...


@dataclass(frozen=True, slots=True)
class Rendering:
    """A rendered page: the DOM as HTML (None when nothing could be read), and what the page asked for."""

    outcome: RenderOutcome
    html: bytes | None
    sub_requests: tuple[SubRequest, ...]
    elapsed_ms: int
    reason: str = ""

    def facts(self) -> dict[str, Any]:
        """The fetch facts of a rendered page (stored with its version)."""
        counts: dict[str, int] = {}
        for sub in self.sub_requests:
            counts[sub.outcome] = counts.get(sub.outcome, 0) + 1
        return {"outcome": str(self.outcome), "reason": self.reason, "elapsed_ms": self.elapsed_ms,
                "sub_request_count": len(self.sub_requests), "by_outcome": counts,
                "sub_requests": [s.to_dict() for s in self.sub_requests[:200]]}
