"""Reading what Gleaner keeps: runs and their URLs, the document tree, a page's versions, quote verification.

``diff`` and ``export`` (versions compared, the current tree written out) are in ``cli/versions.py``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from gleaner.app import Deps
from gleaner.cli.base import (
    fail,
    guard,
    load_settings,
    main,
    open_deps,
    print_summary,
    resolve_id,
    tenant_key,
)
from gleaner.cli.statuses import statuses_for
from gleaner.display.humanize import plural
from gleaner.errors import InvalidInput
from gleaner.store.ledger.llmanswers import model_usage


@main.command("runs")
@click.argument("run_id", required=False)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most this many runs.")
@click.option("--urls", is_flag=True, help="With RUN_ID: every URL of the run with its status and reason.")
@click.option("--status", "status_filter",
              help="With --urls: only these URLs, by the summary's counter (fetched, not_modified, refused, failed, "
                   "limited, excluded) or one URL status (e.g. robots-denied, unavailable).")
@click.option("--json", "as_json", is_flag=True)
@guard
def runs_cmd(run_id: str | None, limit: int, urls: bool, status_filter: str | None, as_json: bool) -> None:
    """Recent runs with their counters, or one run's per-URL status breakdown (--urls: each URL)."""
    if (urls or status_filter) and not run_id:
        fail("--urls and --status need a RUN_ID", 2)
    if status_filter:
        try:
            statuses_for(status_filter)
        except InvalidInput as exc:
            fail(str(exc), 2)
    settings = load_settings()
    with open_deps(settings) as deps:
        if run_id:
            run_id = resolve_id(deps, "run", run_id)
            summary = deps.metadata.run_summary(run_id)
            if summary is None:
                fail(f"no run {run_id}")
                return
            if urls or status_filter:
                wanted = statuses_for(status_filter) if status_filter else None
                rows = [r for r in deps.metadata.run_urls(run_id) if wanted is None or r["status"] in wanted]
                if as_json:
                    click.echo(json.dumps(rows))
                    return
                for r in rows:
                    code = f" HTTP {r['http_status']}" if r["http_status"] else ""
                    click.echo(f"{r['status']:<16} {r['url']}{code}  {r['reason'] or ''}".rstrip())
                return
            summary["outcomes"] = deps.metadata.outcome_breakdown(run_id)
            summary["language_model"] = model_usage(deps.engine, run_id)
            if as_json:
                click.echo(json.dumps(summary))
                return
            print_summary(summary, False)
            click.echo("  per-URL status:")
            for outcome, count in summary["outcomes"].items():
                click.echo(f"    {outcome:<28} {count}")
            for used in (summary["language_model"] or {}).get("models", ()):
                fell_back = f", {used['fell_back']} left to the rules" if used["fell_back"] else ""
                click.echo(f"  language model {used['model']}: read {plural(used['samples'], 'section sample')},"
                           f" {used['cached']} from its cache or an earlier run{fell_back},"
                           f" {plural(used['tokens'], 'token')}")
            return
        runs = deps.metadata.recent_runs(limit)
    if as_json:
        click.echo(json.dumps(runs))
        return
    if not runs:
        click.echo(f"no runs yet in {settings.data_dir} (GLEANER_HOME; `gleaner info` shows where data lives): "
                   "try `gleaner demo`")
    else:
        click.echo(_RUN_ROW.format("run", "status", "site", "found", "fetched", "304", "failed", "new", "changed",
                                   "same", "started"))
    for r in runs:
        s = r["snapshots"]
        started = (r["started_at"] or "")[:19].replace("T", " ")
        # A replay fetched nothing: its counted pages were read from the store; the row says so.
        replay = f"  replay of {r['replay_of'][:8]}: pages from the store" if r.get("replay_of") else ""
        click.echo(_RUN_ROW.format(r["run_id"], r["status"], r["site_domain"], r["discovered"], r["fetched"],
                                   r["not_modified"], r["failed"], s["new"], s["changed"], s["unchanged"], started)
                   + replay)


# One row per run: counts right-aligned under their header, the site cut to its column.
_RUN_ROW = "{:<36}  {:<11} {:<24.24} {:>6} {:>7} {:>6} {:>6} {:>5} {:>7} {:>6}  {}"


@main.command("docs")
@click.argument("site", callback=tenant_key)
@click.option("--json", "as_json", is_flag=True)
@guard
def docs_cmd(site: str, as_json: bool) -> None:
    """The site's document tree (built from path alone) with status and scrape policy."""
    with open_deps(load_settings()) as deps:
        rows = deps.metadata.documents_tree(site)
    if not rows:  # the same exit with --json: a script must not read an unknown site as an empty one
        fail(f"no documents for site {site!r} (`gleaner sites list` and `gleaner runs` show the sites)")
    if as_json:
        click.echo(json.dumps(rows))
        return
    from gleaner.display.tree import render_tree

    for line in render_tree(rows):
        click.echo(line)


@main.command("show")
@click.argument("url")
@click.option("--site-domain", help="The site holding the URL (needed when several do).")
@click.option("--version", "version", type=click.IntRange(min=1), help="This version instead of the current one.")
@click.option("--raw", is_flag=True, help="Print raw.md instead of content.md.")
@click.option("--json", "as_json", is_flag=True)
@guard
def show_cmd(url: str, site_domain: str | None, version: int | None, raw: bool, as_json: bool) -> None:
    """A page's current body (or --version N's) and its version history."""
    from gleaner.store.documents.blocklist import is_erased_form

    with open_deps(load_settings()) as deps:
        doc = find_document(deps, url, site_domain)
        if is_erased_form(doc["canonical_url"]):
            # Nothing of it is left to show; that it was erased is the answer (exit 0).
            if as_json:
                click.echo(json.dumps({"document": doc, "erased": True, "version": None, "versions": [],
                                       "body": ""}, default=str))
            else:
                click.echo(f"erased: {doc['canonical_url']} (site {doc['site_domain']}); its content was removed"
                           " and is refused if it comes back")
            return
        versions = deps.metadata.snapshots_of(doc["id"])
        chosen = pick_version(doc, versions, version)
        body = ""
        if chosen is not None:
            ref = chosen["raw_ref"] if raw else chosen["content_ref"]
            body = read_body(deps, ref, chosen["version"]) if ref else ""
    if as_json:
        click.echo(json.dumps({"document": doc, "version": chosen["version"] if chosen else None,
                               "versions": versions, "body": body}, default=str))
        return
    reason = f": {doc['status_reason']}" if doc.get("status_reason") else ""
    click.echo(f"{doc['canonical_url']}  [{doc['status']}{reason}, scrape_policy={doc['scrape_policy']},"
               f" site {doc['site_domain']}]", err=True)
    for v in versions:
        mark = " <- current" if v["id"] == doc["current_snapshot_id"] else ""
        click.echo(f"  v{v['version']}  {v['content_hash']}  {v['created_at']}  {v['change_signal'] or 'first'}{mark}",
                   err=True)
    click.echo(body, nl=False)


def find_document(deps: Deps, url: str, site_domain: str | None) -> dict[str, Any]:
    """The one document for URL (and site); exits 2 listing the sites when several hold the URL."""
    from gleaner.origins.identity import is_origin_url
    from gleaner.store.documents.blocklist import erased_forms
    from gleaner.urls import canonicalize

    canonical = url if is_origin_url(url) else canonicalize(url)  # an upload or a feedback has no http URL
    docs = deps.metadata.documents_by_url(canonical, site_domain)
    if not docs:  # an erased page is found by its erased form (store/documents/erasure.py)
        docs = [d for s, form in erased_forms(deps.blocklist, canonical, site_domain)
                for d in deps.metadata.documents_by_url(form, s)]
    if not docs:
        fail(f"no document for {canonical}" + (f" in site {site_domain}" if site_domain else ""))
    if len(docs) > 1:
        sites = ", ".join(d["site_domain"] for d in docs)
        fail(f"{canonical} is known under {len(docs)} sites ({sites}): name one with --site-domain", 2)
    return docs[0]


def pick_version(doc: dict[str, Any], versions: list[dict[str, Any]], number: int | None) -> dict[str, Any] | None:
    """The named version, else the current snapshot (not the highest number: content can revert)."""
    if number is not None:
        for v in versions:
            if v["version"] == number:
                return v
        known = ", ".join(f"v{v['version']}" for v in sorted(versions, key=lambda v: v["version"])) or "none"
        fail(f"{doc['canonical_url']} has no version {number} (versions: {known})")
    return next((v for v in versions if v["id"] == doc["current_snapshot_id"]), None)


def read_body(deps: Deps, ref: str, version: int) -> str:
    try:
        return deps.blobs.get(ref).decode("utf-8")
    except KeyError:  # the blob port's "absent"
        fail(f"the body of v{version} is missing from the blob store ({ref})")
        raise AssertionError("unreachable") from None


@main.command("verify")
@click.argument("url")
@click.argument("quote")
@click.option("--site-domain", help="The site holding the URL (needed when several do).")
@click.option("--json", "as_json", is_flag=True)
@guard
def verify_cmd(url: str, quote: str, site_domain: str | None, as_json: bool) -> None:
    """Check that QUOTE occurs verbatim in URL's stored text; print the byte span that holds it.

    Exits 0 when the current version holds the quote, 3 when only an earlier version did (drift),
    4 when no stored version does.
    """
    from gleaner.provenance.citations import locate_in_versions

    with open_deps(load_settings()) as deps:
        doc = find_document(deps, url, site_domain)
        found = locate_in_versions(deps.metadata.texts_of_document(doc["id"]), quote, deps.metadata.canonical_text)
    answer: dict[str, Any] = {"url": doc["canonical_url"], "verified": bool(found and found.current),
                              "drifted": bool(found and not found.current)}
    if found is not None:
        answer.update(version=found.version, snapshot_id=found.snapshot_id, text_hash=found.text_hash,
                      start=found.citation.start, end=found.citation.end, span_kind=found.span_kind,
                      text=found.citation.text)
    if as_json:
        click.echo(json.dumps(answer))
    elif answer["verified"] or answer["drifted"]:
        state = "verified" if answer["verified"] else "drifted: only in an earlier version"
        click.echo(f"{state}: v{answer['version']} {answer['text_hash']}[{answer['start']}:{answer['end']}]"
                   f" ({answer['span_kind'] or 'across blocks'})\n{answer['text']}")
    else:
        click.echo("not found in any stored version")
    sys.exit(0 if answer["verified"] else 3 if answer["drifted"] else 4)
