"""A crawl's own politeness (`gleaner crawl --delay/--concurrency`) stays with its run."""

from __future__ import annotations

from itertools import pairwise

from gleaner.demosite.testsite import Page, TestSite
from gleaner.runtime.runner import crawl, new_request

from ..generated_site import site_pages


def test_a_crawls_delay_is_kept_with_its_run_and_every_later_fetcher_of_the_run_keeps_it(make_deps):
    served: dict[str, Page] = {}
    with TestSite(served, host="127.0.0.2") as site:
        served.update(site_pages(site.url, 3))
        summary = crawl(make_deps(), new_request(site.url + "/", delay=0.2, concurrency=1))

        times = [r.at for r in site.log]
    assert summary["status"] == "finished"
    assert min(b - a for a, b in pairwise(times)) >= 0.2 - 0.005
    # Another process (a `gleaner runs resume`) fetches for this run at the crawl's pace, not its own default.
    later = make_deps(host_delay=0.0, host_concurrency=4)
    with later.new_fetcher(run_id=summary["run_id"]) as fetcher:
        assert (fetcher.settings.host_delay, fetcher.settings.host_concurrency) == (0.2, 1)
    with later.new_fetcher() as fetcher:
        assert fetcher.settings.host_delay == 0.0
