"""``gleaner ingest`` (uploads) and ``gleaner feedback``: texts that did not come from a crawl (gleaner.origins);
``gleaner comment``, ``gleaner flag`` and ``gleaner remarks``: a client's remarks on a document, with who and when."""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from gleaner.cli.base import echo_listing, fail, guard, load_settings, main, open_deps, resolve_id, tenant_key


def _who() -> str:
    return f"cli:{getpass.getuser()}"


def _print_conflicts(conflicts: list[dict[str, Any]]) -> None:
    for c in conflicts:
        click.echo(f"  conflict {c['id']} [{c['severity']}, {c['detected_by']}]: {c.get('reason') or ''}", err=True)
        click.echo(f"    {c['a']['quote']!r}  ({c['a']['text_hash'][:12]} {c['a']['start']}-{c['a']['end']})", err=True)
        click.echo(f"    {c['b']['quote']!r}  ({c['b']['text_hash'][:12]} {c['b']['start']}-{c['b']['end']})", err=True)


@main.command("ingest")
@click.argument("source", required=False)
@click.option("--site-domain", callback=tenant_key, help="The site (tenant) the document belongs to.")
@click.option("--path", default=None, help="Its path in the site's tree (default: the file's name).")
@click.option("--format", "fmt", default=None, help="pdf, docx, html, markdown or text (default: from the name).")
@click.option("--json", "as_json", is_flag=True, help="Print {job_id, status, document_id, version, conflicts}.")
@click.option("--no-wait", is_flag=True, help="Print the queued job and land it in the background.")
@click.option("--job", "job_id", default=None, help="Land (or show) a job accepted before.")
@guard
def ingest_cmd(source: str | None, site_domain: str | None, path: str | None, fmt: str | None, as_json: bool,
               no_wait: bool, job_id: str | None) -> None:
    """Keep a file (PDF, DOCX, HTML, Markdown, text) or a URL's body as a document of a site.

    Prints once the document is searchable, with the conflicts it opened. The same bytes at the
    same path again write nothing; other bytes there are its next version.
    """
    from gleaner.origins.formats import TooLarge
    from gleaner.origins.store import OriginStore
    from gleaner.origins.uploads import UploadRequest, accept, fetch_for_upload, job_answer, run_job

    with open_deps(load_settings()) as deps:
        if job_id is not None:
            found = OriginStore(deps.engine).job(job_id)
            if found is None:
                fail(f"no ingest job {job_id}")
                return
            answer = job_answer(run_job(deps, job_id, found["site_domain"]))
            _report(answer, as_json)
            return
        if source is None or site_domain is None:
            fail("name a FILE or URL and its --site-domain", 2)
            return
        if source.startswith(("http://", "https://")):
            data, content_type, final = fetch_for_upload(deps.settings, source)
            request = UploadRequest(site_domain, data, _who(), file_name=final.rstrip("/").rsplit("/", 1)[-1] or None,
                                    path=path, format_hint=fmt, content_type=content_type, source_url=final)
        else:
            file = Path(source)
            if not file.is_file():
                fail(f"no file {source}")
            request = UploadRequest(site_domain, file.read_bytes(), _who(), file_name=file.name, path=path,
                                    format_hint=fmt)
        try:
            accepted = accept(deps, request)
        except TooLarge as exc:
            fail(str(exc), 4)
            return
        if no_wait:
            # Landed by a process of its own, which outlives this one: the job says when it is done.
            subprocess.Popen([sys.executable, "-m", "gleaner.cli", "ingest", "--job", accepted.job_id],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
            _report({"job_id": accepted.job_id, "status": "queued", "document_id": None, "version": None,
                     "conflicts": []}, as_json)
            return
        answer = job_answer(run_job(deps, accepted.job_id, accepted.site_domain, accepted.extracted))
    _report(answer, as_json)


def _report(answer: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({k: answer.get(k) for k in ("job_id", "status", "document_id", "version", "outcome",
                                                           "error", "conflicts")}))
    else:
        if answer.get("status") == "queued":
            click.echo(f"job {answer['job_id']}: queued (`gleaner ingest --job {answer['job_id']}` shows it)")
            return
        where = f"upload://{answer.get('site_domain')}{answer.get('path')}" if answer.get("path") else ""
        click.echo(f"job {answer['job_id']}: {answer['status']}"
                   + (f", {where} v{answer['version']} ({answer['outcome']})" if answer.get("version") else "")
                   + (f": {answer['error']}" if answer.get("error") else ""))
        click.echo(f"conflicts: {len(answer.get('conflicts') or [])}", err=True)
        _print_conflicts(answer.get("conflicts") or [])
    if answer.get("status") == "failed":
        sys.exit(1)


@main.command("feedback")
@click.argument("site", callback=tenant_key)
@click.argument("text")
@click.option("--about", default=None,
              help="What it answers: a document id, or a search hit as TEXT_HASH:START:END.")
@click.option("--json", "as_json", is_flag=True, help="Print {document_id, version, conflicts}.")
@guard
def feedback_cmd(site: str, text: str, about: str | None, as_json: bool) -> None:
    """Keep TEXT as a dated, attributed feedback of SITE (searchable, citable), and check it for conflicts."""
    from gleaner.origins.feedback import About, give_feedback

    parsed = None
    if about:
        parts = about.split(":")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            parsed = About.parse({"text_hash": parts[0], "start": int(parts[1]), "end": int(parts[2])})
        else:
            parsed = About.parse(about)
    with open_deps(load_settings()) as deps:
        landed = give_feedback(deps, site, text, _who(), parsed)
    if as_json:
        click.echo(json.dumps({"document_id": landed.document_id, "version": landed.version,
                               "conflicts": landed.conflicts}))
        return
    click.echo(f"feedback {landed.document_id} v{landed.version} kept in {site}")
    click.echo(f"conflicts: {len(landed.conflicts)}", err=True)
    _print_conflicts(landed.conflicts)


def _remark(document: str, text: str, kind: str, as_json: bool) -> None:
    from gleaner.origins.remarks import add_remark

    with open_deps(load_settings()) as deps:
        kept = add_remark(deps, resolve_id(deps, "document", document), kind, text, _who())
    click.echo(json.dumps(kept.to_dict()) if as_json else
               f"{kept.kind} {kept.id} kept on document {kept.document_id}"
               + (f" v{kept.version}" if kept.version else "") + f" by {kept.by}")


@main.command("comment")
@click.argument("document")
@click.argument("text")
@click.option("--json", "as_json", is_flag=True, help="Print the remark as JSON.")
@guard
def comment_cmd(document: str, text: str, as_json: bool) -> None:
    """Keep TEXT as a comment on DOCUMENT (an id or its start), with who and when (`gleaner remarks`)."""
    _remark(document, text, "comment", as_json)


@main.command("flag")
@click.argument("document")
@click.argument("reason")
@click.option("--json", "as_json", is_flag=True, help="Print the remark as JSON.")
@guard
def flag_cmd(document: str, reason: str, as_json: bool) -> None:
    """Flag DOCUMENT as wrong, saying why (REASON), with who and when (`gleaner remarks`)."""
    _remark(document, reason, "flag", as_json)


@main.command("remarks")
@click.argument("document")
@click.option("--json", "as_json", is_flag=True, help="Print the remarks as JSON.")
@guard
def remarks_cmd(document: str, as_json: bool) -> None:
    """DOCUMENT's comments and flags, oldest first: when, which, who, on which version, the text."""
    from gleaner.origins.remarks import remarks_of

    with open_deps(load_settings()) as deps:
        found = remarks_of(deps, resolve_id(deps, "document", document))
    echo_listing(found, as_json, lambda r: f"{r.at[:19]}  {r.kind:<7} by {r.by}"
                 + (f" on v{r.version}" if r.version else "") + f": {r.text}",
                 f"no comments or flags on {document}: `gleaner comment` or `gleaner flag` adds one")
