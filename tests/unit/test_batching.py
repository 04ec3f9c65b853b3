"""Scrape batches are sized to the host's pace, so each task settles its URLs before its soft deadline."""

from __future__ import annotations

from gleaner.fetch.politeness import HostTable
from gleaner.stages.batching import EXPECTED_PAGE_SECONDS, batch_size, batch_size_for

DEADLINE = 1500.0


def test_a_host_at_the_default_pace_gets_the_full_batch():
    assert batch_size(spacing=1.0, concurrency=1, soft_deadline=DEADLINE, cap=100) == 100


def test_a_long_crawl_delay_shrinks_the_batch_to_what_fits_before_the_deadline():
    size = batch_size(spacing=60.0, concurrency=1, soft_deadline=DEADLINE, cap=100)
    assert size == int(DEADLINE / (60.0 + EXPECTED_PAGE_SECONDS))
    assert size * 60.0 < DEADLINE


def test_more_slots_on_a_host_take_proportionally_more_urls():
    one = batch_size(spacing=60.0, concurrency=1, soft_deadline=DEADLINE, cap=100)
    assert batch_size(spacing=60.0, concurrency=2, soft_deadline=DEADLINE, cap=100) in (2 * one, 2 * one + 1)


def test_even_a_host_slower_than_the_deadline_gets_one_url_a_task():
    assert batch_size(spacing=3600.0, concurrency=1, soft_deadline=DEADLINE, cap=100) == 1


def test_the_slowest_host_of_a_batch_decides_and_unseen_hosts_use_the_defaults():
    hosts = HostTable()
    hosts.get("slow.example", default_delay=1.0, default_concurrency=1).crawl_delay = 30.0
    urls = ["https://fast.example/a", "https://slow.example/b"]
    expected = batch_size(spacing=30.0, concurrency=1, soft_deadline=DEADLINE, cap=100)
    assert batch_size_for(urls, hosts, default_delay=1.0, default_concurrency=1, soft_deadline=DEADLINE,
                          cap=100) == expected < 100
    assert batch_size_for(urls[:1], hosts, default_delay=1.0, default_concurrency=1, soft_deadline=DEADLINE,
                          cap=100) == 100
