"""Provenance commands: cite and check quotes, slice stored text, triage conflicts, erase, prune.

``cite`` refuses with exit 5 and one line saying why; ``citation verify`` exits 0
when verified, 3 when rejected, 4 when unverifiable.
"""

from __future__ import annotations

import getpass
import json
import sys
from typing import Any

import click

from gleaner.cli.base import fail, guard, load_settings, main, open_deps, resolve_id

REFUSED_EXIT = 5


def _document(deps: Any, url: str, site_domain: str | None) -> dict[str, Any]:
    from gleaner.origins.identity import is_origin_url
    from gleaner.store.documents.citations import AmbiguousUrl
    from gleaner.urls import canonicalize

    canonical = url if is_origin_url(url) else canonicalize(url)  # an upload or a feedback has no http URL
    try:
        document = deps.provenance.document_at(canonical, site_domain)
        if document is None:  # an erased page is found by its erased form (store/documents/erasure.py)
            from gleaner.store.documents.blocklist import erased_forms

            for site, form in erased_forms(deps.blocklist, canonical, site_domain):
                document = document or deps.provenance.document_at(form, site)
    except AmbiguousUrl as exc:
        fail(str(exc), 2)
        raise  # unreachable: fail exits
    if document is None:
        fail(f"no document for {canonical}" + (f" in site {site_domain}" if site_domain else ""))
    assert document is not None
    return document


@main.command("cite")
@click.argument("url")
@click.argument("quote")
@click.option("--site-domain", default=None, help="The site, when several know the URL.")
@click.option("--json", "as_json", is_flag=True)
@guard
def cite_cmd(url: str, quote: str, site_domain: str | None, as_json: bool) -> None:
    """Bind QUOTE (at most 15 words, verbatim) to the exact bytes of URL's current version."""
    from gleaner.store.documents.citations import Refused

    with open_deps(load_settings()) as deps:
        document = _document(deps, url, site_domain)
        cited = deps.provenance.cite(document, quote)
    if isinstance(cited, Refused):
        fail(f"refused: {cited.refusal.explain()} ({cited.refusal})", REFUSED_EXIT)
        return
    if as_json:
        click.echo(json.dumps(cited.to_dict()))
        return
    click.echo(f"{cited.citation_id}  v{cited.version} {cited.text_hash}[{cited.start}:{cited.end}]\n{cited.quote}")


@main.group("citation")
def citation_group() -> None:
    """Check a citation: against its own bytes (verify) or against the page as it is now (drift)."""


def _citation(deps: Any, citation_id: str) -> Any:
    cited = deps.provenance.citation(resolve_id(deps, "citation", citation_id))
    if cited is None:
        fail(f"no citation {citation_id}")
    return cited


@citation_group.command("verify")
@click.argument("citation_id")
@click.option("--json", "as_json", is_flag=True)
@guard
def citation_verify_cmd(citation_id: str, as_json: bool) -> None:
    """verified, rejected (the stored quote or offsets do not match the bytes) or unverifiable (bytes gone)."""
    from gleaner.provenance.verification import VerifyState

    with open_deps(load_settings()) as deps:
        cited = _citation(deps, citation_id)
        verdict = deps.provenance.verify_citation(cited)
    if as_json:
        click.echo(json.dumps({**cited.to_dict(), "state": str(verdict.state), "reason": verdict.reason or None}))
    else:
        click.echo(f"{verdict.state}" + (f": {verdict.reason}" if verdict.reason else ""))
    sys.exit({VerifyState.VERIFIED: 0, VerifyState.REJECTED: 3}.get(verdict.state, 4))


@citation_group.command("drift")
@click.argument("citation_id")
@click.option("--json", "as_json", is_flag=True)
@guard
def citation_drift_cmd(citation_id: str, as_json: bool) -> None:
    """holds, changed (new offsets), drifted, gone or unknown, against the document's current version."""
    with open_deps(load_settings()) as deps:
        cited = _citation(deps, citation_id)
        _verdict, found = deps.provenance.drift_of(cited)
    if as_json:
        click.echo(json.dumps({"citation_id": cited.citation_id, "state": str(found.state),
                               "reason": found.reason or None, "current": found.current}))
        return
    line = str(found.state) + (f": {found.reason}" if found.reason else "")
    if found.current:
        c = found.current
        line += f"\n  now v{c['version']} {c['text_hash']}[{c['start']}:{c['end']}]"
    click.echo(line)


@main.command("slice")
@click.argument("text_hash")
@click.argument("start", type=int)
@click.argument("end", type=int)
@guard
def slice_cmd(text_hash: str, start: int, end: int) -> None:
    """Print bytes [START, END) of the stored canonical text TEXT_HASH, exactly as stored."""
    from gleaner import tenancy
    from gleaner.provenance.slices import slice_text_bytes
    from gleaner.serving.textsapi import TextReader, read_text

    with open_deps(load_settings()) as deps:
        # The operator's console reads every text; `gleaner --tenant SITE slice` only that site's.
        site = tenancy.current().site_domain
        body = read_text(deps, text_hash, TextReader.site(site) if site else TextReader.operator())
    if body is None:
        fail(f"no canonical text {text_hash}")
        return
    piece = slice_text_bytes(text_hash, body, start, end, whole_characters=False)
    sys.stdout.buffer.write(piece.data)
    sys.stdout.buffer.flush()


@main.group("conflicts")
def conflicts_group() -> None:
    """Duplicates and other conflicts between a site's documents."""


@conflicts_group.command("list")
@click.argument("site")
@click.option("--status", type=click.Choice(["open", "acknowledged", "resolved", "false_positive"]), default=None)
@click.option("--json", "as_json", is_flag=True)
@guard
def conflicts_list_cmd(site: str, status: str | None, as_json: bool) -> None:
    """The site's conflicts, oldest first."""
    from gleaner.provenance.conflicts import ConflictStatus

    with open_deps(load_settings()) as deps:
        rows = deps.provenance.list_conflicts(site, ConflictStatus(status) if status else None)
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        click.echo("no conflicts")
    for r in rows:
        details = r["details"] or {}
        click.echo(f"{r['id']}  {r['status']:<14} {r['conflict_type']} ({details.get('kind', r['detected_by'])})"
                   f"  {r['a']['url']}  <->  {r['b']['url']}")


@conflicts_group.command("set")
@click.argument("conflict_id")
@click.argument("status", type=click.Choice(["acknowledged", "resolved", "false_positive"]))
@guard
def conflicts_set_cmd(conflict_id: str, status: str) -> None:
    """Acknowledge, resolve or dismiss a conflict."""
    from gleaner.provenance.conflicts import ConflictStatus

    with open_deps(load_settings()) as deps:
        conflict_id = resolve_id(deps, "conflict", conflict_id)
        if not deps.provenance.set_conflict_status(conflict_id, ConflictStatus(status)):
            fail(f"no conflict {conflict_id}")
    click.echo(f"{conflict_id}: {status}")


@main.command("erase")
@click.argument("url")
@click.option("--site-domain", default=None, help="The site, when several know the URL.")
@click.option("--reason", default=None, help="Why (kept with the erasure record).")
@click.option("--yes", "-y", "assume_yes", is_flag=True,
              help="Do not ask for confirmation (needed when not on a terminal).")
@click.option("--json", "as_json", is_flag=True)
@guard
def erase_cmd(url: str, site_domain: str | None, reason: str | None, assume_yes: bool, as_json: bool) -> None:
    """Delete every body of URL's document, blocklist its content, and keep a record of the erasure.

    It cannot be undone: on a terminal it asks first, naming what goes; elsewhere give --yes."""
    from gleaner.origins.identity import is_origin_url
    from gleaner.store.documents.erasure import erase_document
    from gleaner.urls import canonicalize

    with open_deps(load_settings()) as deps:
        document = _document(deps, url, site_domain)
        if not assume_yes:
            _confirm_erase(deps, document, url if is_origin_url(url) else canonicalize(url))
        report = erase_document(deps.provenance, deps.blobs, deps.blocklist, document["id"], reason,
                                getpass.getuser())
        from gleaner.changes import outbox

        outbox.flush_after_commit(deps)  # the document.removed event, to subscribers now
        scrubbed = None
        if deps.settings.database_url is None:  # the embedded database: its files and WAL are rewritten too
            from gleaner.store.scrub import scrub_after_erasure

            scrubbed = scrub_after_erasure(deps.engine)
    if as_json:
        answer = report.to_dict()
        if scrubbed is not None:
            answer["disk_scrub"] = {"tables": scrubbed.tables, "seconds": round(scrubbed.seconds, 2)}
        click.echo(json.dumps(answer))
        return
    click.echo(f"erased {report.url} ({report.site_domain}): {report.versions_removed} versions, "
               f"{report.blobs_deleted} blobs, {report.texts_removed} texts, {report.citations_cleared} citations; "
               f"{report.digests} digests blocklisted (erasure {report.erasure_id})")
    if report.texts_shared:
        click.echo(f"kept {len(report.texts_shared)} text(s) another document also holds: erase it too if it must go",
                   err=True)


def _confirm_erase(deps: Any, document: dict[str, Any], url: str) -> None:
    """Ask on a terminal, naming the page and how many versions go; refuse elsewhere (exit 2)."""
    from gleaner.display.humanize import plural

    versions = len(deps.metadata.snapshots_of(document["id"]))
    what = (f"{url} ({document['site_domain']}): {plural(versions, 'stored version')}, its texts and"
            " citations; its content is blocklisted")
    if not sys.stdin.isatty():
        fail(f"erase removes {what}; it cannot be undone: run it on a terminal to confirm, or add --yes", 2)
    if not click.confirm(f"Erase {what}? This cannot be undone", default=False, err=True):
        fail("not erased", 1)


@main.command("prune")
@click.option("--site", default=None, help="Only this site (default: every site).")
@click.option("--json", "as_json", is_flag=True)
@guard
def prune_cmd(site: str | None, as_json: bool) -> None:
    """Drop versions beyond GLEANER_KEEP_VERSIONS per document; never the current or a pinned one."""
    from gleaner.store.documents.retention import prune

    settings = load_settings()
    with open_deps(settings) as deps:
        report = prune(deps.provenance, deps.blobs, site, settings.keep_versions)
    if as_json:
        click.echo(json.dumps(report.to_dict()))
        return
    click.echo(f"pruned {report.versions_removed} versions ({report.blobs_deleted} blobs, {report.texts_removed} "
               f"texts); kept the newest {report.keep_versions} of each document, the current and pinned ones")
    if report.blobs_failed:
        fail(f"{len(report.blobs_failed)} blobs could not be deleted: {', '.join(report.blobs_failed[:5])}")
