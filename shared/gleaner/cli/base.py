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

# DESIGN.md "Contracts" and "Document lifecycle": refused (by policy), not_modified and limited (left by a
# limit or budget) beside failed (what the site failed to serve).
SUMMARY_KEYS = ("run_id", "site_domain", "status", "discovered", "included", "excluded", "fetched", "not_modified",
                "refused", "failed", "limited", "snapshots")


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


def print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({k: summary[k] for k in SUMMARY_KEYS}, sort_keys=False))
        for line in limit_notes(summary):
            click.echo(f"gleaner: {line}", err=True)
        return
    snaps = summary["snapshots"]
    click.echo(
        f"run {summary['run_id']} ({summary['site_domain']}): {summary['status']}\n"
        f"  discovered {summary['discovered']}, included {summary['included']}, excluded {summary['excluded']}\n"
        f"  fetched {summary['fetched']}, not modified {summary['not_modified']}, refused {summary['refused']},"
        f" failed {summary['failed']}, limited {summary['limited']}\n"
        f"  snapshots: {snaps['new']} new, {snaps['changed']} changed, {snaps['unchanged']} unchanged"
    )
    for line in limit_notes(summary):
        click.echo(f"  {line}")


def limit_notes(summary: dict[str, Any]) -> list[str]:
    """What a limit or budget left of the run, and how to raise it (empty when nothing was left)."""
    notes: list[str] = []
    beyond = int(summary.get("beyond_limit") or 0)
    if beyond:
        notes.append(f"stopped at its limit of {summary.get('limit')} URLs: at least {beyond} more discovered URLs"
                     " were left (discovery stops reading once the limit is reached); raise it with --limit N")
    exhausted = int(summary.get("limited") or 0) - beyond
    if exhausted > 0:
        notes.append(f"{exhausted} URLs were left by the run's budget; raise GLEANER_RUN_MAX_REQUESTS,"
                     " GLEANER_RUN_MAX_BYTES or GLEANER_RUN_MAX_SECONDS")
    return notes


def is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
