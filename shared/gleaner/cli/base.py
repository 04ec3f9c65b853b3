"""The command line's common parts: the ``main`` group, settings, dependencies and error reporting.

Progress and logs go to stderr (a progress bar on a terminal, plain lines
otherwise); ``--json`` prints exactly one JSON object on stdout at the end.
Expected failures print one clear line and exit non-zero, never a traceback.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
import sqlalchemy.exc

from gleaner import __version__
from gleaner.app import Deps
from gleaner.config import Settings
from gleaner.errors import GleanerError
from gleaner.messages import Message

log = logging.getLogger("gleaner")

SUMMARY_KEYS = ("run_id", "site_domain", "status", "discovered", "included", "excluded", "fetched", "failed",
                "snapshots")


def load_settings(**overrides: Any) -> Settings:
    return Settings.from_env(os.environ, **overrides)


class Progress:
    """Stage progress on stderr: a rich bar on a terminal, plain lines otherwise."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self._bar: Any = None
        self._task: Any = None
        self.batches_total = 0
        self.batches_done = 0

    def __enter__(self) -> Progress:
        if self.enabled and self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            console=Console(stderr=True), transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task("mapping", total=None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def line(self, text: str) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, description=text)
        else:
            click.echo(f"gleaner: {text}", err=True)

    def on_message(self, topic: str, message: Message) -> None:
        from gleaner.messages import CrawlMapped, PagesFetched, ScrapeBatch, SnapshotsWritten

        if isinstance(message, CrawlMapped):
            self.line(f"mapped run {message.run_id}; sampling sections")
        elif isinstance(message, ScrapeBatch):
            self.batches_total += 1
            if self._bar is not None:
                self._bar.update(self._task, total=self.batches_total, description="scraping batches")
        elif isinstance(message, PagesFetched):
            self.batches_done += 1
            if self._bar is not None:
                self._bar.update(self._task, completed=self.batches_done)
            else:
                self.line(f"batch {message.batch_no}: {len(message.pages)} pages fetched "
                          f"({self.batches_done}/{self.batches_total})")
        elif isinstance(message, SnapshotsWritten):
            self.line(f"ingesting {len(message.snapshot_ids)} new snapshots")


@contextmanager
def open_deps(settings: Settings) -> Iterator[Deps]:
    deps = Deps(settings)
    try:
        yield deps
    finally:
        deps.close()


@contextmanager
def interruptible(run_id: str) -> Iterator[None]:
    """Ctrl-C or SIGTERM while a run is driven here: the runner marks it interrupted; say so in one line.

    SIGTERM (what a service manager or ``kill`` sends) is turned into the same KeyboardInterrupt.
    """
    import signal

    def terminate(_signo: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    except KeyboardInterrupt:
        fail(f"run {run_id} interrupted; `gleaner runs resume {run_id}` goes on from here", 130)
    finally:
        signal.signal(signal.SIGTERM, previous)


def fail(message: str, code: int = 1) -> None:
    click.echo(f"gleaner: error: {message}", err=True)
    sys.exit(code)


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn expected failures into one line on stderr and a non-zero exit."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GleanerError as exc:
            fail(str(exc))
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            # The database is outside Gleaner's control (down, full, a schema someone changed): say so
            # in one line; the traceback is there with -vv.
            log.debug("database error", exc_info=True)
            detail = getattr(exc, "orig", None) or exc
            fail(f"database error: {str(detail).splitlines()[0][:500]} (run with -vv for details)")

    return wrapper


@click.group()
@click.version_option(__version__, prog_name="gleaner")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-v info, -vv debug).")
def main(verbose: int) -> None:
    """Keep an auditable, always-current markdown copy of the web sources you depend on."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    if verbose < 2:
        # SQLAlchemy's pool logs a multi-line traceback when it drops a connection the server closed (a
        # restart); Gleaner reports the failure in one line and retries. The tracebacks stay for -vv.
        logging.getLogger("sqlalchemy").setLevel(logging.CRITICAL)


def exit_for_run(summary: dict[str, Any]) -> None:
    """Exit non-zero, with one line saying why, unless the run finished (or ended partial by its budget)."""
    from gleaner.runstate import RunStatus

    status = RunStatus(summary["status"])
    error = summary.get("error")
    if status is RunStatus.FINISHED or (status is RunStatus.PARTIAL and not error):
        return
    run = summary["run_id"]
    hint = ""
    if status in (RunStatus.INTERRUPTED, RunStatus.FAILED, RunStatus.PARTIAL, RunStatus.CANCELLED) and error:
        hint = f"; `gleaner runs resume {run}` goes on from here" if status is RunStatus.INTERRUPTED else ""
    fail(f"run {run} ended {status}: {error or 'no reason recorded'}{hint}",
         130 if status is RunStatus.INTERRUPTED else 1)


def print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({k: summary[k] for k in SUMMARY_KEYS}, sort_keys=False))
        return
    snaps = summary["snapshots"]
    click.echo(
        f"run {summary['run_id']} ({summary['site_domain']}): {summary['status']}\n"
        f"  discovered {summary['discovered']}, included {summary['included']}, excluded {summary['excluded']}\n"
        f"  fetched {summary['fetched']}, not modified {summary.get('not_modified', 0)}, failed {summary['failed']}\n"
        f"  snapshots: {snaps['new']} new, {snaps['changed']} changed, {snaps['unchanged']} unchanged"
    )


def is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
