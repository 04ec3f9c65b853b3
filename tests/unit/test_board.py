"""Every active run on one screen without a terminal: a line per site with pages, rate and ETA."""

from __future__ import annotations

import threading
import time

from gleaner.cli.board import RunBoard
from gleaner.messages import CrawlMapped


def test_plain_lines_show_each_site_mapping_then_its_pages_rate_and_eta(capsys):
    totals = {"r1": 10, "r2": 4}
    with RunBoard({"r1": "a.example", "r2": "b.example"}, tty=False, interval=0.05,
                  pages_total=totals.__getitem__) as board:
        board.urls_found(12, "r1")
        board.urls_found(5, "r2")
        time.sleep(0.2)
        board.on_message(CrawlMapped(run_id="r1", site_domain="a.example"))
        for _ in range(4):
            board.page_fetched("r1")
            time.sleep(0.02)
        board.page_fetched("elsewhere")  # a run the board does not show
        time.sleep(0.2)
    out = [line.removeprefix("gleaner: ") for line in capsys.readouterr().err.splitlines()]
    assert "a.example: mapping, 12 URLs found" in out and "b.example: mapping, 5 URLs found" in out
    progress = [line for line in out if line.startswith("a.example: 4/10 pages, ")]
    assert progress and "pages/s, ETA " in progress[-1]
    assert out[-1] == "b.example: mapping, 5 URLs found"


def test_a_slow_page_total_does_not_hold_the_bus_and_still_reaches_the_line():
    asked = []
    release = threading.Event()

    def total(run_id: str) -> int:  # the database under a tick's start: slow to answer
        asked.append(run_id)
        release.wait(5)
        return 7

    with RunBoard({"r1": "a.example"}, tty=False, interval=60, pages_total=total) as board:
        started = time.monotonic()
        board.on_message(CrawlMapped(run_id="r1", site_domain="a.example"))
        returned = time.monotonic() - started
        assert returned < 1.0  # the draining thread went on while the total was read
        release.set()
        deadline = time.monotonic() + 5
        while board.runs["r1"].total is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert asked == ["r1"] and board.runs["r1"].total == 7
