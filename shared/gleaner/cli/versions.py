"""Versions compared and written out: ``gleaner diff`` and ``gleaner export``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from gleaner.cli.base import fail, guard, load_settings, main, open_deps
from gleaner.cli.reading import find_document, pick_version, read_body


@main.command("diff")
@click.argument("url")
@click.option("--site-domain", help="The site holding the URL (needed when several do).")
@click.option("--from", "from_version", type=click.IntRange(min=1),
              help="Older version (default: the one the current version replaced).")
@click.option("--to", "to_version", type=click.IntRange(min=1), help="Newer version (default: the current one).")
@click.option("--json", "as_json", is_flag=True, help='Print {"from", "to", "added", "removed", "diff"}.')
@guard
def diff_cmd(url: str, site_domain: str | None, from_version: int | None, to_version: int | None,
             as_json: bool) -> None:
    """Unified diff of a page's content.md between two versions (default: previous -> current)."""
    from gleaner.changes.diff import diff_versions, previous_version

    with open_deps(load_settings()) as deps:
        doc = find_document(deps, url, site_domain)
        versions = deps.metadata.snapshots_of(doc["id"])
        new = pick_version(doc, versions, to_version)
        if new is None:
            fail(f"{doc['canonical_url']} has no version yet")
            return
        if from_version is None and to_version is None:
            from_version = previous_version(versions, doc["current_snapshot_id"])
        old = pick_version(doc, versions, from_version) if from_version is not None else None
        old_body = read_body(deps, old["content_ref"], old["version"]) if old else ""
        new_body = read_body(deps, new["content_ref"], new["version"])
    result = diff_versions(doc["canonical_url"], old_body, new_body, old["version"] if old else None, new["version"])
    if as_json:
        click.echo(json.dumps(result.to_dict()))
        return
    if not result.diff:
        click.echo(f"v{result.from_version} and v{result.to_version} have the same content", err=True)
    elif old is None:
        click.echo(f"v{result.to_version} is the first version: all of it shows as added", err=True)
    click.echo(result.diff, nl=False)


@main.command("export")
@click.argument("site")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--raw", is_flag=True, help="Write raw.md (the whole page) instead of content.md.")
@click.option("--format", "fmt", type=click.Choice(["md", "jsonl", "parquet"]), default="md", show_default=True,
              help="md: a .md tree + manifest.jsonl; jsonl: DIRECTORY/documents.jsonl; parquet: documents.parquet.")
@click.option("--spans", is_flag=True, help="jsonl/parquet: add each text's span ledger (byte offsets).")
@guard
def export_cmd(site: str, directory: Path, raw: bool, fmt: str, spans: bool) -> None:
    """Write SITE's current documents to DIRECTORY: a markdown tree, JSON Lines or Parquet."""
    from gleaner.exporting.exportformats import ExportFormat, write_jsonl, write_parquet

    with open_deps(load_settings()) as deps:
        if not deps.metadata.current_versions_after(site, None, 1):
            fail(f"no active documents with a version for site {site!r}")
        if ExportFormat(fmt) is not ExportFormat.MD:  # records listed a page at a time: flat memory
            write = write_jsonl if ExportFormat(fmt) is ExportFormat.JSONL else write_parquet
            written = write(deps, site, directory, raw=raw, spans=spans)
            click.echo(f"exported {written} documents of {site} to {directory}/documents.{fmt}", err=True)
            return
        erased = deps.metadata.erased_forms_of(site)
        written = _write_tree(deps, deps.metadata.current_versions(site), directory, raw, erased)
    click.echo(f"exported {written} pages of {site} to {directory} (manifest.jsonl beside them)"
               + (f"; {len(erased)} erased" if erased else ""), err=True)


def _write_tree(deps: Any, items: list[dict[str, Any]], directory: Path, raw: bool, erased: Any) -> int:
    from gleaner.exporting.export import write_export

    bodies: dict[str, bytes] = {}
    for item in items:
        ref = (item["raw_ref"] if raw else None) or item["content_ref"]
        item["ref"] = ref
        try:
            bodies[ref] = deps.blobs.get(ref)
        except KeyError:
            fail(f"the body of {item['url']} v{item['version']} is missing from the blob store ({ref})")
    return write_export(directory, items, bodies, erased)
