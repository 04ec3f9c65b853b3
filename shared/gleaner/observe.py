"""What a running crawl tells whoever watches it (the CLI's progress display), as it happens.

A narrow port the stages call at the points a person waits on: URLs found while mapping, pages
fetched while scraping. The default observer does nothing, so the cloud functions pay nothing.
"""

from __future__ import annotations

from typing import Protocol


class RunObserver(Protocol):
    """``run_id`` says which run, where one process drives several (the multi-site engine)."""

    def urls_found(self, count: int, run_id: str | None = None) -> None:
        """Mapping has found ``count`` URLs so far."""

    def page_fetched(self, run_id: str | None = None) -> None:
        """Scrape settled one more page (any outcome)."""


class NoObserver:
    def urls_found(self, count: int, run_id: str | None = None) -> None:
        pass

    def page_fetched(self, run_id: str | None = None) -> None:
        pass
