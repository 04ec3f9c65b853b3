"""Run control on the command line: ``gleaner runs cancel|resume|replay RUN_ID`` and ``gleaner sweep``.

``runs`` stays the listing command of cli/reading.py (``gleaner runs [RUN_ID] [--json]``); this
module wraps it in a group whose subcommands are ``cancel``, ``resume`` and ``replay``, and anything else
(a run id, an option, nothing) goes to the listing as before.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gleaner.cli.base import (
    Progress,
    exit_for_run,
    fail,
    guard,
    interruptible,
    load_settings,
    main,
    open_deps,
    print_summary,
    resolve_id,
)
from gleaner.store.ledger.runstate import RunStatus


class RunsGroup(click.Group):
    """``runs cancel|resume|replay RUN_ID``; every other ``runs ...`` goes to the listing command."""

    def __init__(self, listing: click.Command, **kwargs: Any) -> None:
        super().__init__(invoke_without_command=False, **kwargs)
        self.listing = listing
        self.help = (f"{listing.help or ''}\n\nAlso: `gleaner runs cancel RUN_ID`, `gleaner runs resume RUN_ID`, "
                     "`gleaner runs replay RUN_ID`.")

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args[:1] == ["--help"] or (args and args[0] in self.commands):
            return super().parse_args(ctx, args)
        return super().parse_args(ctx, ["list", *args])

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing's usage and options (what `gleaner runs` mostly is), then the subcommands."""
        listing_ctx = click.Context(self.listing, info_name=ctx.info_name, parent=ctx.parent)
        self.listing.format_usage(listing_ctx, formatter)
        self.format_help_text(ctx, formatter)
        self.listing.format_options(listing_ctx, formatter)
        self.format_commands(ctx, formatter)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in super().list_commands(ctx) if name != "list"]


def _install() -> RunsGroup:
    listing = main.commands["runs"]
    group = RunsGroup(listing, name="runs")
    group.add_command(listing, "list")
    group.add_command(cancel_cmd)
    group.add_command(resume_cmd)
    group.add_command(replay_cmd)
    main.add_command(group, "runs")
    return group


@click.command("cancel")
@click.argument("run_id")
@guard
def cancel_cmd(run_id: str) -> None:
    """Cancel a run: its worker fetches nothing more (a batch in flight completes)."""
    from gleaner.runtime.runcontrol import cancel

    with open_deps(load_settings()) as deps:
        run_id = resolve_id(deps, "run", run_id)
        moved, status = cancel(deps.metadata, run_id)
    if moved:
        click.echo(f"run {run_id} cancelled")
    elif status == RunStatus.CANCELLED:
        click.echo(f"run {run_id} was already cancelled")
    else:
        fail(f"run {run_id} already ended {status}; nothing to cancel")


@click.command("resume")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary on stdout.")
@guard
def resume_cmd(run_id: str, as_json: bool) -> None:
    """Finish what a stopped run left; pages it fetched are not fetched again."""
    from gleaner.runtime.runner import resume

    with open_deps(load_settings()) as deps:
        run_id = resolve_id(deps, "run", run_id)
    with open_deps(load_settings()) as deps, Progress(enabled=True) as progress, interruptible(run_id):
        progress.line(f"resuming run {run_id}")
        summary = resume(deps, run_id, progress.on_message)
    print_summary(summary, as_json)
    exit_for_run(summary)


@click.command("replay")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@guard
def replay_cmd(run_id: str, as_json: bool) -> None:
    """Re-run snapshot and ingest for a past run's pages from what is stored, as a new run (nothing fetched)."""
    from gleaner.stages.replay import replay

    with open_deps(load_settings()) as deps:
        run_id = resolve_id(deps, "run", run_id)
        done = replay(deps, run_id)
        summary = deps.metadata.run_summary(done["run_id"]) or {}
    if as_json:
        click.echo(json.dumps({**summary, "replay_of": done["replay_of"], "replayed": done["replayed"],
                               "left_out": done["left_out"]}, default=str))
        return
    snaps = summary.get("snapshots") or {}
    click.echo(f"run {done['run_id']} replayed {done['replayed']} pages of run {run_id}: {summary.get('status')}, "
               f"{snaps.get('changed', 0)} changed, {snaps.get('unchanged', 0)} unchanged")
    for page in done["left_out"]:
        click.echo(f"left out {page['url']}: {page['reason']}")


@main.command("sweep")
@click.option("--idle", "idle", type=click.FloatRange(min=0), default=None,
              help="Settle runs no stage touched for this many seconds (default 1800; 0: every run with no "
                   "live worker now).")
@click.option("--json", "as_json", is_flag=True, help="Print the settled runs as one JSON array.")
@guard
def sweep_cmd(idle: float | None, as_json: bool) -> None:
    """Settle runs that nobody works on any more (crashed, killed): interrupted, or finished if they were done."""
    from gleaner.runtime.runcontrol import sweep
    from gleaner.stages.upkeep import upkeep

    settings = load_settings()
    with open_deps(settings) as deps:
        settled = sweep(deps.metadata, settings.sweep_idle_seconds if idle is None else idle)
        kept = upkeep(deps)  # retention, as the cloud's sweep job applies it
    if as_json:
        click.echo(json.dumps([s.to_dict() for s in settled]))
        return
    if any(kept.to_dict().values()):
        click.echo(f"upkeep: {json.dumps(kept.to_dict())}", err=True)
    if not settled:
        click.echo("no idle runs to settle")
    for s in settled:
        click.echo(f"{s.run_id}  {s.site_domain}  {s.was} -> {s.now}  (idle {s.idle_seconds:.0f}s)")


runs_group = _install()
