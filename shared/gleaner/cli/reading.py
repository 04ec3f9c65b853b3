"""Reading what Gleaner keeps: runs, the document tree, a page's versions, quote verification."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from gleaner.cli.base import fail, guard, is_uuid, load_settings, main, open_deps, print_summary


@main.command("runs")
@click.argument("run_id", required=False)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most this many runs.")
@click.option("--json", "as_json", is_flag=True)
@guard
def runs_cmd(run_id: str | None, limit: int, as_json: bool) -> None:
    """Recent runs with their counters, or one run's per-URL status breakdown."""
    settings = load_settings()
    with open_deps(settings) as deps:
        if run_id:
            summary = deps.metadata.run_summary(run_id) if is_uuid(run_id) else None
            if summary is None:
                fail(f"no run {run_id}")
                return
            summary["outcomes"] = deps.metadata.outcome_breakdown(run_id)
            if as_json:
                click.echo(json.dumps(summary))
                return
            print_summary(summary, False)
            click.echo("  per-URL status:")
            for outcome, count in summary["outcomes"].items():
                click.echo(f"    {outcome:<28} {count}")
            return
        runs = deps.metadata.recent_runs(limit)
    if as_json:
        click.echo(json.dumps(runs))
        return
    if not runs:
        click.echo(f"no runs yet in {settings.data_dir} (GLEANER_HOME; `gleaner info` shows where data lives): "
                   "try `gleaner demo`")
    for r in runs:
        s = r["snapshots"]
        click.echo(f"{r['run_id']}  {r['status']:<9} {r['site_domain']:<24} disc {r['discovered']:>5}  "
                   f"incl {r['included']:>5}  fetched {r['fetched']:>5}  failed {r['failed']:>4}  "
                   f"snap +{s['new']} ~{s['changed']} ={s['unchanged']}  {r['started_at'] or ''}")


@main.command("docs")
@click.argument("site")
@click.option("--json", "as_json", is_flag=True)
@guard
def docs_cmd(site: str, as_json: bool) -> None:
    """The site's document tree (built from path alone) with status and scrape policy."""
    with open_deps(load_settings()) as deps:
        rows = deps.metadata.documents_tree(site)
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        fail(f"no documents for site {site!r}")
    from gleaner.tree import render_tree

    for line in render_tree(rows):
        click.echo(line)


@main.command("show")
@click.argument("url")
@click.option("--raw", is_flag=True, help="Print raw.md instead of content.md.")
@click.option("--json", "as_json", is_flag=True)
@guard
def show_cmd(url: str, raw: bool, as_json: bool) -> None:
    """A page's current body and its version history."""
    from gleaner.urls import canonicalize

    canonical = canonicalize(url)
    with open_deps(load_settings()) as deps:
        doc = deps.metadata.document_by_url(canonical)
        if doc is None:
            fail(f"no document for {canonical}")
            return
        versions = deps.metadata.snapshots_of(doc["id"])
        body = ""
        if versions:
            ref = versions[0]["raw_ref"] if raw else versions[0]["content_ref"]
            body = deps.blobs.get(ref).decode("utf-8") if ref else ""
    if as_json:
        click.echo(json.dumps({"document": doc, "versions": versions, "body": body}, default=str))
        return
    click.echo(f"{doc['canonical_url']}  [{doc['status']}, scrape_policy={doc['scrape_policy']}]", err=True)
    for v in versions:
        click.echo(f"  v{v['version']}  {v['content_hash']}  {v['created_at']}  {v['change_signal'] or 'first'}",
                   err=True)
    click.echo(body, nl=False)


@main.command("verify")
@click.argument("url")
@click.argument("quote")
@click.option("--json", "as_json", is_flag=True)
@guard
def verify_cmd(url: str, quote: str, as_json: bool) -> None:
    """Check that QUOTE occurs verbatim in URL's stored text; print the byte span that holds it.

    Exits 0 when the current version holds the quote, 3 when only an earlier version did (drift),
    4 when no stored version does.
    """
    from gleaner.provenance.citations import locate
    from gleaner.urls import canonicalize

    canonical = canonicalize(url)
    with open_deps(load_settings()) as deps:
        doc = deps.metadata.document_by_url(canonical)
        if doc is None:
            fail(f"no document for {canonical}")
            return
        answer: dict[str, Any] = {"url": canonical, "verified": False, "drifted": False}
        for version, snapshot_id, text_hash, current in deps.metadata.texts_of_document(doc["id"]):
            stored = deps.metadata.canonical_text(text_hash)
            if stored is None:
                continue
            cite = locate(stored[0], quote, stored[1])
            if cite is not None:
                kind = stored[1][cite.span_ordinal][2] if cite.span_ordinal is not None else None
                answer.update(verified=current, drifted=not current, version=version, snapshot_id=snapshot_id,
                              text_hash=text_hash, start=cite.start, end=cite.end, span_kind=kind, text=cite.text)
                break
    if as_json:
        click.echo(json.dumps(answer))
    elif answer["verified"] or answer["drifted"]:
        state = "verified" if answer["verified"] else "drifted: only in an earlier version"
        click.echo(f"{state}: v{answer['version']} {answer['text_hash']}[{answer['start']}:{answer['end']}]"
                   f" ({answer['span_kind'] or 'across blocks'})\n{answer['text']}")
    else:
        click.echo("not found in any stored version")
    sys.exit(0 if answer["verified"] else 3 if answer["drifted"] else 4)
