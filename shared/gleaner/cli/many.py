"""Driving several runs from the command line: the multi-site engine under one board and one Ctrl-C.

``gleaner tick``, ``gleaner watch`` and ``gleaner crawl URL URL ...`` come here. Ctrl-C or SIGTERM marks
every run still active ``interrupted`` (the engine does) and exits 130 with one line per run saying how
to resume it.

``watch`` keeps one engine serving on a thread of its own while its schedule ticks: a tick's runs
start at once, whatever runs of earlier ticks are still going, and a run's end wakes the schedule (a
site left due behind that run starts then, not at the next tick).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from gleaner.app import Deps
from gleaner.bus import interrupts
from gleaner.cli.board import RunBoard
from gleaner.cli.search import merge_when_idle
from gleaner.messages import CrawlRequested
from gleaner.runtime.engine import Engine, RunRef
from gleaner.store.access.rls import generic_plans


def crawl_many(deps: Deps, requests: Sequence[CrawlRequested]) -> list[dict[str, Any]]:
    """Crawl one run per request at once; a summary per request, in order."""
    return _drive(deps, [RunRef.of(r) for r in requests], requests)


def drive_many(deps: Deps, runs: Sequence[RunRef]) -> list[dict[str, Any]]:
    """Drive runs whose crawl requests are already on the bus (a tick published them)."""
    return _drive(deps, runs, None)


def watch_many(deps: Deps, every: float, rounds: int | None) -> int:
    """``gleaner watch`` on this machine: tick on the schedule, drive every run at once; the runs started."""
    from gleaner.operator.schedule import TickReport, watch

    deps.extract_pool.prestart()  # its imports overlap the first tick's database work and map stage
    gc.freeze()  # what the imports built lives as long as the process: no full collection scans it again
    woken = threading.Event()
    stop = threading.Event()
    failed: list[BaseException] = []
    active = [0]  # runs handed to the engine and not ended yet
    counted = threading.Lock()

    def ended(run: RunRef, summary: dict[str, Any]) -> None:
        click.echo(f"{run.site_domain}: run {run.run_id} {summary['status']} (fetched {summary['fetched']})",
                   err=True)
        with counted:
            active[0] -= 1
        woken.set()

    engine = Engine(deps, on_run_end=ended)

    def serve() -> None:
        try:
            engine.serve(stop)
        except BaseException as exc:  # the schedule stops with it, rather than tick for an engine that is gone
            failed.append(exc)
            woken.set()

    def started(report: TickReport) -> None:
        with counted:  # before the engine has them: a run may end before add() returns
            active[0] += len(report.started)
        engine.add([RunRef(s.run_id, s.site_domain, "") for s in report.started])

    def nap(seconds: float) -> None:
        with counted:
            idle = active[0] == 0
        if idle:  # fresh vectors into the HNSW index while no run waits for it (gleaner.retrieval.fresh)
            merge_when_idle(deps, lambda line: click.echo(line, err=True))
        woken.wait(seconds)
        woken.clear()
        if failed:
            raise failed[0]

    driver = threading.Thread(target=serve, name="gleaner-watch-engine", daemon=True)
    with _interruptible(engine), generic_plans(deps.engine):
        driver.start()
        total = watch(deps, every=every, rounds=rounds, after_tick=started, sleep=nap)
        stop.set()
        engine.bus.wake()
        driver.join()
        if failed:
            raise failed[0]
    engine.close()
    return total


@contextmanager
def _interruptible(engine: Engine) -> Iterator[None]:
    """SIGTERM as Ctrl-C; either marks the engine's active runs interrupted and exits 130."""
    with interrupts.catching():
        try:
            yield
        except KeyboardInterrupt:
            if not engine.interrupted:
                engine.interrupt()
            for run_id in engine.interrupted:
                click.echo(f"gleaner: run {run_id} interrupted; `gleaner runs resume {run_id}` goes on from here",
                           err=True)
            raise SystemExit(130) from None
        finally:
            engine.close()


def _drive(deps: Deps, runs: Sequence[RunRef], requests: Sequence[CrawlRequested] | None) -> list[dict[str, Any]]:
    with generic_plans(deps.engine):  # the stages' statements, prepared once per connection, planned once
        return _drive_runs(deps, runs, requests)


def _drive_runs(deps: Deps, runs: Sequence[RunRef], requests: Sequence[CrawlRequested] | None
                ) -> list[dict[str, Any]]:
    gc.freeze()  # what the imports built lives as long as the process: no full collection scans it again
    engine = Engine(deps)

    def pages_total(run_id: str) -> int:
        site = next(r.site_domain for r in runs if r.run_id == run_id)
        from gleaner import tenancy

        with tenancy.scope(site):
            summary = deps.metadata.run_summary(run_id)
        return int(summary["included"]) if summary else 0

    with interrupts.catching():
        try:
            with RunBoard({r.run_id: r.site_domain for r in runs}, pages_total=pages_total) as board:
                deps.observer = board
                engine.on_dispatch = board.on_message
                board.line(f"crawling {len(runs)} sites at once (data in {deps.settings.data_dir})")
                return engine.crawl(requests) if requests is not None else engine.drive(runs)
        except KeyboardInterrupt:
            for run in runs:
                if run.run_id in engine.interrupted:
                    click.echo(f"gleaner: {run.site_domain}: run {run.run_id} interrupted; "
                               f"`gleaner runs resume {run.run_id}` goes on from here", err=True)
                else:
                    click.echo(f"gleaner: {run.site_domain}: run {run.run_id} had ended or not started", err=True)
            raise SystemExit(130) from None
        finally:
            engine.close()
