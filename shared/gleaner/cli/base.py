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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from gleaner import __version__
from gleaner.app import Deps
from gleaner.cli.progress import Progress  # noqa: F401  (re-exported: command modules take it from here)
from gleaner.display.humanize import plain as plain  # re-exported: the commands print values with it
from gleaner.errors import GleanerError
from gleaner.settings.config import Settings
from gleaner.store.backends.dberrors import DatabaseRefused, DatabaseUnavailable, quiet_driver_logs

log = logging.getLogger("gleaner")

# DESIGN.md "Contracts" and "Document lifecycle": refused (by policy), not_modified and limited (left by a
# limit or budget) beside failed (what the site failed to serve).
SUMMARY_KEYS = ("run_id", "site_domain", "status", "discovered", "included", "excluded", "fetched", "not_modified",
                "refused", "failed", "limited", "snapshots", "warnings")
# Added when known: the politeness the start page's host got and where each value came from; webhook
# deliveries still to send (a crawl never waits for them).
SUMMARY_EXTRA_KEYS = ("politeness", "notifications_pending")


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment over ``gleaner.toml`` (the current directory's, then GLEANER_HOME's)."""
    from pathlib import Path

    from gleaner.settings.config import POLITENESS_VARIABLES
    from gleaner.settings.configfile import layered_env

    layered = layered_env(os.environ, Path.cwd())
    given = overrides.pop("politeness_sources", {})  # what the command line set (cli/crawl.py's politeness())
    settings = Settings.from_env(layered.env, **overrides)
    sources = dict(settings.politeness_sources)
    for name, variable in POLITENESS_VARIABLES.items():
        where = layered.origins.get(variable)
        if where is not None and where != "environment":
            sources[name] = f"config file {where}"
    return settings.with_(politeness_sources={**sources, **given})


@contextmanager
def open_deps(settings: Settings) -> Iterator[Deps]:
    """The command's dependencies; its database reads act for ``--tenant`` if given, else as the operator.

    The operator sees every tenant (listing runs, sweeping): the deliberate cross-tenant path of
    row-level security (docs/security.md). Stages a command runs act for their own tenant.
    """
    from gleaner import tenancy

    context = click.get_current_context(silent=True)
    tenant = context.find_root().params.get("tenant") if context is not None else None
    deps = Deps(settings)
    try:
        with tenancy.scope(tenant) if tenant else tenancy.all_tenants():
            yield deps
    finally:
        deps.close()


@contextmanager
def interruptible(run_id: str) -> Iterator[None]:
    """Ctrl-C or SIGTERM while a run is driven here: the runner marks it interrupted; say so in one line.

    SIGTERM (what a service manager or ``kill`` sends) is turned into the same KeyboardInterrupt.
    """
    from gleaner.bus import interrupts

    with interrupts.catching():
        try:
            yield
        except KeyboardInterrupt:
            fail(f"run {run_id} interrupted; `gleaner runs resume {run_id}` goes on from here", 130)


def error_line(message: str) -> None:
    """The one shape every error takes on stderr: ``gleaner: error: <cause>; <what to do>``."""
    click.echo(f"gleaner: error: {message}", err=True)


def fail(message: str, code: int = 1) -> None:
    error_line(message)
    sys.exit(code)


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn expected failures into one line on stderr and a non-zero exit."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (DatabaseUnavailable, DatabaseRefused) as exc:
            # The database is outside Gleaner's control (down, full, a schema someone changed): every
            # engine translates the driver's errors into these (store/backends/dberrors.py); one line here, the
            # driver's traceback with -vv.
            log.debug("database error", exc_info=True)
            fail(f"{exc} (run with -vv for details)")
        except GleanerError as exc:
            fail(_in_words(exc))
        except KeyboardInterrupt:
            fail("interrupted", 130)

    return wrapper


def _in_words(exc: GleanerError) -> str:
    """A run that could not start says what happened in words first ("the host name could not be
    found"), the resolver's own words after it."""
    from gleaner.display.vocabulary import explain_error
    from gleaner.runtime.runner import CrawlFailed

    said = str(exc)
    if isinstance(exc, CrawlFailed) and explain_error(said) != said:
        return f"{explain_error(said)}: {said}"
    return said


def tenant_key(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A click callback: a --site-domain / SITE that is not a valid tenant key is a usage error (exit 2)."""
    from gleaner.tenancy import InvalidTenant, validate_site_domain

    if value is None:
        return None
    try:
        return validate_site_domain(value)
    except InvalidTenant as exc:
        raise click.BadParameter(str(exc)) from exc


def _stdout_closed() -> bool:
    """True when stdout is a pipe (or socket) whose reader has gone: poll reports an error on it."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLERR)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real stdout (a test runner's buffer)
        return False


class GleanerGroup(click.Group):
    """The ``main`` group: click's own errors (bad options, unknown commands) in Gleaner's one-line
    style, and no traceback for an unexpected failure unless asked for with ``-vv``."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            # The reader of stdout left (`gleaner docs SITE | head -1`): it has what it wanted, so exit 0
            # in silence (stdout pointed at /dev/null, so the interpreter's final flush cannot fail again).
            # A pipe that is not stdout (a socket) is a failure that must say what it was.
            if not _stdout_closed():
                raise RuntimeError(f"broken pipe: {exc}") from exc
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(0)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            return super().main(args, prog_name or "gleaner", complete_var, False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "gleaner"
            fail(f"{exc.format_message()} (see '{command} --help')", exc.exit_code)
        except click.ClickException as exc:
            fail(exc.format_message(), exc.exit_code)
        except click.Abort:
            fail("interrupted", 130)
        except Exception as exc:
            if logging.getLogger().isEnabledFor(logging.DEBUG):
                raise
            fail(f"unexpected {exc.__class__.__name__}: {str(exc).splitlines()[0][:500] if str(exc) else ''} "
                 "(run with -vv for the traceback, and please report it)")


@click.group(cls=GleanerGroup)
@click.version_option(__version__, prog_name="gleaner")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-v info, -vv debug).")
@click.option("--tenant", metavar="SITE", callback=tenant_key,
              help="Act as this tenant only: other tenants' rows are invisible (row-level security).")
def main(verbose: int, tenant: str | None) -> None:
    """Keep an auditable, always-current markdown copy of the web sources you depend on."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    if verbose < 2:
        quiet_driver_logs()  # the tracebacks stay for -vv
        # asyncio's finalizers report an HTTP session a failed handler left to the garbage collector (a
        # database outage mid-batch) as a multi-line ERROR; the handler's failure is reported already.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    if verbose < 1:
        # A dead letter is recorded on its run, and the command's own last line reports the run's error
        # (exit_for_run); logging it too printed every failure twice. -v shows the log line again.
        logging.getLogger("gleaner.runtime.deadletters").setLevel(logging.CRITICAL)


def exit_for_run(summary: dict[str, Any]) -> None:
    """Exit non-zero, with one line saying why, unless the run finished (or ended partial by its budget)."""
    from gleaner.store.ledger.runstate import RunStatus

    status = RunStatus(summary["status"])
    error = summary.get("error")
    if status is RunStatus.FINISHED or (status is RunStatus.PARTIAL and not error):
        return
    from gleaner.display.vocabulary import cannot_resume_because, explain_error

    run = summary["run_id"]
    if error and explain_error(error) != error:
        error = f"{explain_error(error)} ({error})"
    hint = ""
    if status in (RunStatus.INTERRUPTED, RunStatus.FAILED, RunStatus.PARTIAL, RunStatus.CANCELLED) and error:
        hint = f"; `gleaner runs resume {run}` goes on from here" if status is RunStatus.INTERRUPTED else ""
    if status is RunStatus.FAILED and cannot_resume_because(summary.get("error")):
        hint = "; resuming cannot help: fix the site's address and crawl it again"
    fail(f"run {run} ended {status}: {error or 'no reason recorded'}{hint}",
         130 if status is RunStatus.INTERRUPTED else 1)


def print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        keys = (*SUMMARY_KEYS, *(k for k in SUMMARY_EXTRA_KEYS if k in summary))
        click.echo(json.dumps({k: summary.get(k, []) if k == "warnings" else summary[k] for k in keys},
                              sort_keys=False))
        for line in (*limit_notes(summary), *run_notes(summary)):
            click.echo(f"gleaner: {line}", err=True)
        return
    from gleaner.display.vocabulary import explain_error

    snaps = summary["snapshots"]
    # A replay fetches nothing: what its counters call fetched was read from the store.
    fetched = (f"replayed {summary['fetched']} from the store (nothing fetched)" if summary.get("replay_of")
               else f"fetched {summary['fetched']}")
    click.echo(
        f"run {summary['run_id']} ({summary['site_domain']}): {summary['status']}\n"
        f"  discovered {summary['discovered']}, included {summary['included']}, excluded {summary['excluded']}\n"
        f"  {fetched}, not modified {summary['not_modified']}, refused {summary['refused']},"
        f" failed {summary['failed']}, limited {summary['limited']}\n"
        f"  snapshots: {snaps['new']} new, {snaps['changed']} changed, {snaps['unchanged']} unchanged"
    )
    if summary.get("error"):  # why a run failed or stopped short, not only under --json
        said = explain_error(summary["error"])
        click.echo(f"  error: {said}" + (f" ({summary['error']})" if said != summary["error"] else ""))
    for warning in summary.get("warnings") or ():
        click.echo(f"  warning: {warning}")
    for line in limit_notes(summary):
        click.echo(f"  {line}")
    for line in run_notes(summary):
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


def run_notes(summary: dict[str, Any]) -> list[str]:
    """The politeness the run kept and where each value came from; notifications still to send."""
    notes: list[str] = []
    polite = summary.get("politeness")
    if polite:
        notes.append(f"politeness: delay {polite['delay']:g} s ({polite['delay_source']}), concurrency"
                     f" {polite['concurrency']} ({polite['concurrency_source']})")
    pending = int(summary.get("notifications_pending") or 0)
    if pending:
        notes.append(f"{pending} webhook deliveries pending: `gleaner deliver` sends them now"
                     " (`gleaner watch` and `gleaner serve` send them in the background)")
    return notes


def resolve_id(deps: Deps, kind: str, value: str) -> str:
    """The full id of ``kind`` (run, subscription, ...) that ``value`` is or uniquely starts with; an
    unknown or ambiguous id is one error line naming the matches (gleaner/display/idprefix.py)."""
    from gleaner.display import idprefix

    return idprefix.resolve(kind, value, deps.metadata.ids_between)


def require_known_site(deps: Deps, site: str) -> None:
    """Exit 2 naming ``site`` unless Gleaner has crawled it or it is registered: a mistyped site is a
    mistake to say, not an empty answer ("no changes") that looks like a quiet site."""
    from gleaner.operator.sites import find_site

    if deps.browse.site_exists(site) or find_site(deps, site) is not None:
        return
    fail(f"unknown site {site!r}: Gleaner has neither crawled nor registered it (`gleaner sites list`;"
         " `gleaner sites add URL` registers one before its first crawl)", 2)


def is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


Item = TypeVar("Item")


def _plain(item: Any) -> Any:
    to_dict = getattr(item, "to_dict", None)
    return to_dict() if callable(to_dict) else item


def echo_listing(items: Sequence[Item], as_json: bool, line: Callable[[Item], str], empty: str | None = None) -> None:
    """A listing: one JSON array (values by their ``to_dict``, rows as they are), or a line each for a
    person, with ``empty`` on stderr when there is nothing."""
    if as_json:
        click.echo(json.dumps([_plain(item) for item in items], default=str))
        return
    if not items and empty:
        click.echo(empty, err=True)
    for item in items:
        click.echo(line(item))
