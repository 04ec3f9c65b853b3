"""How many URLs one scrape task takes: as many as it can settle before its soft deadline.

A scrape task fetches its URLs at the host's pace: one start every ``spacing`` seconds (the larger
of the host's delay and its robots.txt Crawl-delay) on each of ``concurrency`` slots. A batch
sized for a fast host (the ADR's 100) would take over an hour at a Crawl-delay of 60 s, run past
every deadline and be handed on part after part; sized to the pace, each task fits. The soft
deadline (scrape.py) still hands on whatever a slower-than-expected host leaves.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from gleaner.fetch.politeness import HostTable

# What one page costs besides the host's spacing: the exchange and its extraction. A guess on the
# generous side; the soft deadline covers hosts slower than this.
EXPECTED_PAGE_SECONDS = 2.0


def batch_size(*, spacing: float, concurrency: int, soft_deadline: float, cap: int,
               per_page: float = EXPECTED_PAGE_SECONDS) -> int:
    """URLs per task for one host: what ``concurrency`` slots settle in ``soft_deadline`` seconds, 1..cap."""
    per_slot = soft_deadline / (max(0.0, spacing) + per_page)
    return max(1, min(cap, int(per_slot * max(1, concurrency))))


def batch_size_for(urls: Iterable[str], hosts: HostTable, *, default_delay: float, default_concurrency: int,
                   soft_deadline: float, cap: int) -> int:
    """The batch size of the slowest host among ``urls`` (its pace as this process last saw it)."""
    size = cap
    for host in {(urlsplit(u).hostname or "").lower() for u in urls}:
        state = hosts.peek(host)
        spacing = max(state.delay, state.crawl_delay) if state is not None else default_delay
        concurrency = state.concurrency if state is not None else default_concurrency
        size = min(size, batch_size(spacing=spacing, concurrency=concurrency, soft_deadline=soft_deadline, cap=cap))
    return size
