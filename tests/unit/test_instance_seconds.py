"""The instance-seconds bench bills what Cloud Run bills: the union of a concurrent instance's
requests, the sum of requests that each had an instance of their own."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "infra" / "bench"))

from instance_seconds import instance_seconds, union_seconds  # the bench is not a package: on sys.path above


def test_overlapping_requests_are_billed_once_and_gaps_not_at_all():
    assert union_seconds([(0, 10), (2, 5), (8, 12), (20, 21)]) == 13
    assert union_seconds([]) == 0


def test_a_concurrent_function_is_billed_per_process_and_the_others_per_request():
    invocations = [{"stage": "scrape", "entry": "on_http", "pid": 1, "start": 0.0, "end": 10.0},
                   {"stage": "scrape", "entry": "on_http", "pid": 1, "start": 5.0, "end": 15.0},
                   {"stage": "scrape", "entry": "on_http", "pid": 2, "start": 5.0, "end": 6.0},
                   {"stage": "map", "entry": "on_event", "pid": 3, "start": 0.0, "end": 4.0},
                   {"stage": "map", "entry": "on_event", "pid": 3, "start": 1.0, "end": 3.0}]
    assert instance_seconds(invocations, {"scrape.on_http"}) == {"scrape.on_http": 16.0, "map.on_event": 6.0}
    assert instance_seconds(invocations, set())["scrape.on_http"] == 21.0
