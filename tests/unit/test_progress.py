"""The crawl's progress on stderr without a terminal: pages, rate, ETA, batches in order."""

from __future__ import annotations

import time

from gleaner.cli.progress import Progress, duration
from gleaner.messages import CrawlMapped, ScrapeBatch


def lines(capsys) -> list[str]:
    return [line.removeprefix("gleaner: ") for line in capsys.readouterr().err.splitlines()]


def test_plain_lines_count_urls_then_pages_with_rate_and_eta(capsys):
    with Progress(tty=False, interval=0.05, pages_total=lambda run_id: 10) as progress:
        progress.urls_found(12)
        time.sleep(0.3)
        progress.on_message("crawl-mapped", CrawlMapped(run_id="r", site_domain="s"))
        for _ in range(4):
            progress.page_fetched()
            time.sleep(0.02)
        time.sleep(0.3)
    out = lines(capsys)
    assert out[0] == "mapping: 12 URLs found"
    assert out.index("scraping: 10 pages") > 0
    scraping = [line for line in out if line.startswith("scraping: 4/10 pages, ")]
    assert scraping and "pages/s, ETA " in scraping[0]


def test_batches_are_reported_in_batch_order_whatever_order_they_finish_in(capsys):
    def batch(n: int) -> ScrapeBatch:
        return ScrapeBatch(run_id="r", site_domain="s", batch_no=n, document_ids=("a",) * (n + 1))

    with Progress(tty=False, interval=60) as progress:
        progress.on_message("scrape", batch(1))
        progress.on_message("scrape", batch(2))
        progress.on_message("scrape", batch(0))
        progress.on_message("scrape", batch(4))  # batch 3 never came (all its pages were settled already)
    assert lines(capsys) == ["batch 0: 1 pages done", "batch 1: 2 pages done", "batch 2: 3 pages done",
                             "batch 4: 5 pages done"]


def test_politeness_that_makes_a_crawl_long_is_announced_up_front(capsys):
    with Progress(tty=False, interval=60, pages_total=lambda run_id: 306, seconds_per_page=1.0) as progress:
        progress.scraping("r")
    (line,) = lines(capsys)
    assert line.startswith("scraping: 306 pages; politeness alone makes this at least 5m06s")
    assert "--delay" in line


def test_durations_read_as_people_write_them():
    assert [duration(s) for s in (0.4, 59, 61, 3600 + 120)] == ["0s", "59s", "1m01s", "1h02m"]
