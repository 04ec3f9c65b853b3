"""Composite documents: ``gleaner composite create|list|move|edit|history|versions``.

``move`` takes a composite through the ADR's lifecycle (generated -> in_validation -> validated ->
staged -> prod; prod -> stale -> in_validation; edited -> validated), only by a legal step, recorded
as the command's caller (``cli:<os user>``) in the composite's history; ``edit`` writes its next
version from a file, ``edited`` until validated (:mod:`gleaner.operator.composites`).
"""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gleaner.cli.base import echo_listing, fail, guard, load_settings, main, open_deps, resolve_id
from gleaner.cli.operating import drain_local


def cli_actor() -> str:
    """Who a command acts as: the terminal's user (the CLI holds the database, so it is the operator)."""
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no user name in this environment (a bare container)
        return "cli"


@main.group("composite")
def composite_group() -> None:
    """Composite documents: several pages folded into one routed unit, validated before production."""


@composite_group.command("create")
@click.argument("site")
@click.argument("title")
@click.option("--from", "urls", multiple=True, required=True, help="A source page's URL (repeatable).")
@click.option("--kind", help="A label (pricing, competitors, feature_map, ...).")
@click.option("--json", "as_json", is_flag=True)
@guard
def composite_create(site: str, title: str, urls: tuple[str, ...], kind: str | None, as_json: bool) -> None:
    """Fold the --from pages' current versions into a composite routed to rag (its sources lose theirs)."""
    from gleaner.operator.routing import create_composite

    with open_deps(load_settings()) as deps:
        composite = create_composite(deps, site, title, urls, kind=kind, actor=cli_actor())
        drain_local(deps)
    click.echo(json.dumps(composite.to_dict(), default=str) if as_json else
               f"composite {composite.id}: {composite.title} from {len(composite.sources)} pages")


@composite_group.command("list")
@click.argument("site")
@click.option("--json", "as_json", is_flag=True)
@guard
def composite_list(site: str, as_json: bool) -> None:
    """SITE's composites with their status (stale: a source changed since it was made)."""
    from gleaner.operator.routing import list_composites

    with open_deps(load_settings()) as deps:
        composites = list_composites(deps, site)

    def line(c: object) -> str:
        from gleaner.operator.routing import Composite

        assert isinstance(c, Composite)
        validated = f"  validated by {c.validated_by}" if c.validated_by else ""
        return f"{c.id}  {c.status:<13} {c.title}  ({len(c.sources)} sources){validated}"

    echo_listing(composites, as_json, line, f"no composites in {site}: try `gleaner composite create`")


@composite_group.command("move")
@click.argument("composite_id")
@click.argument("status")
@click.option("--note", help="Why (kept in the composite's history).")
@click.option("--json", "as_json", is_flag=True)
@guard
def composite_move(composite_id: str, status: str, note: str | None, as_json: bool) -> None:
    """Move a composite to STATUS: in_validation, validated, staged, prod or stale, one legal step at a time."""
    from gleaner.operator import composites

    with open_deps(load_settings()) as deps:
        composite_id = resolve_id(deps, "composite", composite_id)
        try:
            moved = composites.move(deps, composite_id, status, cli_actor(), note)
        except composites.IllegalMove as exc:
            fail(str(exc), 3)
            return
    click.echo(json.dumps(moved.to_dict(), default=str) if as_json else f"{moved.id}: {moved.status}")


@composite_group.command("edit")
@click.argument("composite_id")
@click.argument("file")
@click.option("--note", help="What changed (kept in the composite's history).")
@click.option("--json", "as_json", is_flag=True)
@guard
def composite_edit(composite_id: str, file: str, note: str | None, as_json: bool) -> None:
    """Make FILE's markdown (- for standard input) the composite's next version, edited until validated."""
    from gleaner.operator import composites

    markdown = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8") \
        if Path(file).is_file() else None
    if markdown is None:
        fail(f"no file {file}")
        return
    with open_deps(load_settings()) as deps:
        composite_id = resolve_id(deps, "composite", composite_id)
        try:
            edited, written = composites.edit(deps, composite_id, markdown, cli_actor(), note)
        except composites.IllegalMove as exc:
            fail(str(exc), 3)
            return
        drain_local(deps)  # the new version is searchable when the command returns
        version = next(v.version for v in composites.versions(deps, composite_id) if v.current)
    if as_json:
        click.echo(json.dumps({**edited.to_dict(), "version": version, "written": written}, default=str))
    else:
        click.echo(f"{edited.id}: {edited.status}, v{version}" + ("" if written else " (unchanged: nothing written)"))


def _of_composite(composite_id: str, read: Callable[[Any, str], list[Any]]) -> list[Any]:
    """``read(deps, id)`` for the composite a listing names (an id or its start); exits when there is none."""
    with open_deps(load_settings()) as deps:
        composite_id = resolve_id(deps, "composite", composite_id)
        if deps.metadata.composite(composite_id) is None:
            fail(f"no composite {composite_id}")
        return read(deps, composite_id)


@composite_group.command("versions")
@click.argument("composite_id")
@click.option("--json", "as_json", is_flag=True)
@guard
def composite_versions(composite_id: str, as_json: bool) -> None:
    """Every version of a composite, oldest first: who wrote it (generated or edited) and when."""
    from gleaner.operator import composites

    echo_listing(_of_composite(composite_id, composites.versions), as_json,
                 lambda v: f"v{v.version}{'*' if v.current else ' '} {v.at[:19]}  "
                 f"{'edited' if v.generator == composites.EDIT_GENERATOR else 'generated'} by {v.by or 'gleaner'}"
                 + (f"  ({v.note})" if v.note else ""))


@composite_group.command("history")
@click.argument("composite_id")
@click.option("--json", "as_json", is_flag=True)
@guard
def composite_history(composite_id: str, as_json: bool) -> None:
    """Every move of a composite, oldest first: from, to, who and when."""
    from gleaner.operator import composites

    echo_listing(_of_composite(composite_id, composites.history), as_json,
                 lambda t: f"{t.at[:19]}  {t.from_status or '-':<13} -> {t.to_status:<13} "
                 f"by {t.actor}" + (f"  ({t.note})" if t.note else ""))
