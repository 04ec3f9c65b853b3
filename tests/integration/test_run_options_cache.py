"""A run's options are read once per run and process: the stages ask for them several times a run."""

from __future__ import annotations

from typing import Any

import pytest

SITE = "options.test"
RUN = "00000000-0000-0000-0000-0000000000b1"


def test_a_runs_options_are_read_once_and_an_unknown_run_is_asked_again(deps: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    meta = deps.metadata
    reads: list[str] = []
    real = meta.run_options
    monkeypatch.setattr(meta, "run_options", lambda run_id: reads.append(run_id) or real(run_id))
    assert deps.run_options(RUN) == {}  # not created yet: nothing to keep
    host = meta.upsert_source_host(SITE, "127.0.0.1", own_site=True)
    meta.create_run(RUN, SITE, host, "http://127.0.0.1:9/", {"limit": 7, "exclude": ["/private/*"]}, "manual", "api")
    for _ in range(5):
        assert deps.run_options(RUN) == {"limit": 7, "exclude": ["/private/*"]}
    assert reads == [RUN, RUN]


def test_every_run_of_a_many_site_tick_keeps_its_options_while_the_others_are_read(
        deps: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    meta = deps.metadata
    host = meta.upsert_source_host(SITE, "127.0.0.1", own_site=True)
    runs = [f"00000000-0000-0000-0000-{n:012d}" for n in range(1, 61)]  # more runs than a tick of 50 sites
    for run in runs:
        meta.create_run(run, SITE, host, "http://127.0.0.1:9/", {"limit": 3}, "manual", "api")
    reads: list[str] = []
    real = meta.run_options
    monkeypatch.setattr(meta, "run_options", lambda run_id: reads.append(run_id) or real(run_id))
    for _ in range(3):  # map, sample and scrape each ask, the runs interleaved
        for run in runs:
            assert deps.run_options(run) == {"limit": 3}
    assert sorted(reads) == sorted(runs)
