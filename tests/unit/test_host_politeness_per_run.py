"""A process's host table serves many runs (a function instance, a multi-site engine): a run that asks
for its own delay or concurrency gets them, even where another run set the host up before."""

from __future__ import annotations

import asyncio

from gleaner.fetch.politeness import HostTable

SETTINGS = {"host_delay": "environment", "host_concurrency": "environment"}
OWN = {"host_delay": "command line", "host_concurrency": "command line"}


def test_a_run_with_its_own_politeness_gets_it_on_a_host_another_run_set_up():
    table = HostTable(lambda host: (0.5, None))  # the operator set a 0.5 s delay for the site
    first = table.get("h.test", default_delay=0.2, default_concurrency=2, sources=SETTINGS)
    assert (first.delay, first.concurrency) == (0.5, 2)
    first.next_at, first.crawl_delay = 123.0, 1.5
    own = table.get("h.test", default_delay=3.0, default_concurrency=1, sources=OWN)
    assert (own.delay, own.concurrency, own.delay_source) == (3.0, 1, "command line")
    # Spaced from the last request the process sent, with what robots.txt asked for already known.
    assert (own.next_at, own.crawl_delay) == (123.0, 1.5)
    assert table.get("h.test", default_delay=3.0, default_concurrency=1, sources=OWN) is own
    assert table.get("h.test", default_delay=0.2, default_concurrency=2, sources=SETTINGS).delay == 0.5


def test_while_another_run_holds_the_host_the_longer_delay_spaces_both():
    table = HostTable()
    held = table.get("h.test", default_delay=0.2, default_concurrency=1, sources=SETTINGS)
    asyncio.run(held.slots.acquire())  # a request of the first run is in flight
    joined = table.get("h.test", default_delay=2.0, default_concurrency=1, sources=OWN)
    assert joined is held and held.delay == 2.0
