"""The benchmark harness runs end to end in quick mode and reports every figure (no timing asserted)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "infra" / "bench" / "bench.py"


def _load_bench():  # type: ignore[no-untyped-def]
    pytest.importorskip("scrapy", reason="the benchmark's baseline needs the 'bench' extra")
    pytest.importorskip("psutil", reason="the benchmark needs the 'bench' extra")
    sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("gleaner_bench", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(420)  # two synthetic profiles, on a machine shared with other runs
def test_the_quick_benchmark_on_a_tiny_corpus_reports_every_figure(tmp_path: Path, database_url: str) -> None:
    bench = _load_bench()
    report = bench.main(["--quick", "--pages", "30", "--server", "testsite", "--name", "smoke",
                         "--results", str(tmp_path / "results"), "--workdir", str(tmp_path / "work"),
                         "--database-url", database_url])

    written = (tmp_path / "results" / "smoke.json").read_text()
    assert '"gleaner_first"' in written
    assert {"cpus", "cpu_model", "python"} <= set(report["machine"])
    assert set(report["corpora"]) == {"synthetic", "cheap"}  # both synthetic profiles; no real corpus in quick mode
    for profile in ("synthetic", "cheap"):
        _assert_every_figure(report["corpora"][profile])


def _assert_every_figure(run: dict) -> None:  # type: ignore[type-arg]
    for part in ("ceiling_1", "ceiling_2", "baseline", "gleaner_first", "gleaner_recrawl_unchanged",
                 "gleaner_recrawl_mutated"):
        assert run[part]["pages_per_second"] >= 0
        assert run[part]["peak_rss_mb"] > 0
    assert {"gleaner_over_baseline", "gleaner_over_ceiling_2", "gleaner_over_ceiling_1",
            "baseline_over_ceiling_1", "ceiling_2_over_ceiling_1"} <= set(run["ratios"])
    assert len(run["rounds"]) == run["repeat"] == 1
    # Whole processes too (start-up counted), each longer than its crawl or extraction loop alone.
    assert all(run["ratios_whole_process"][k] > 0 for k in ("gleaner_over_baseline", "gleaner_over_ceiling_2"))
    for part in ("ceiling_2", "baseline", "gleaner_first"):
        assert run[part]["whole_process_seconds"] > run[part].get("crawl_seconds", run[part].get("seconds"))
    first = run["gleaner_first"]
    assert first["pages_fetched"] >= 30  # the pages, plus section indexes found by links
    assert set(first["stage_shares"]) == {"map", "sample", "scrape", "snapshot", "ingest"}
    same = run["gleaner_recrawl_unchanged"]
    assert same["snapshot_rows_written"] == 0 and same["blobs_written"]["snapshot"] == 0
    assert same["not_modified"] == first["pages_fetched"]
    mutated = run["gleaner_recrawl_mutated"]
    assert mutated["exactly_mutated_pages_versioned"] is True
    assert "time_fraction_of_first" in mutated
    # `gleaner crawl` itself, as a whole process: a first crawl of every page, then an unchanged recrawl.
    cli_first, cli_same = run["gleaner_cli_first"], run["gleaner_cli_recrawl_unchanged"]
    assert cli_first["summary"]["fetched"] == first["pages_fetched"]
    assert cli_same["summary"]["not_modified"] == cli_first["summary"]["fetched"]
    assert 0 < cli_same["whole_process_fraction_of_first"] < 1.5
