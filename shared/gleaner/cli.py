"""The ``gleaner`` command line.

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


def _settings(**overrides: Any) -> Settings:
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
def _deps(settings: Settings) -> Iterator[Deps]:
    deps = Deps(settings)
    try:
        yield deps
    finally:
        deps.close()


def _fail(message: str, code: int = 1) -> None:
    click.echo(f"gleaner: error: {message}", err=True)
    sys.exit(code)


def _guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn expected failures into one line on stderr and a non-zero exit."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GleanerError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            # The database is outside Gleaner's control (down, full, a schema someone changed): say so
            # in one line; the traceback is there with -vv.
            log.debug("database error", exc_info=True)
            detail = getattr(exc, "orig", None) or exc
            _fail(f"database error: {str(detail).splitlines()[0][:500]} (run with -vv for details)")

    return wrapper


@click.group()
@click.version_option(__version__, prog_name="gleaner")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-v info, -vv debug).")
def main(verbose: int) -> None:
    """Keep an auditable, always-current markdown copy of the web sources you depend on."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
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


def _run_crawl(settings: Settings, url: str, as_json: bool, **request: Any) -> dict[str, Any]:
    from gleaner.runner import crawl, new_request

    with _deps(settings) as deps, Progress(enabled=True) as progress:
        progress.line(f"crawling {url}")
        summary = crawl(deps, new_request(url, **request), progress.on_message)
    _print_summary(summary, as_json)
    return summary


@main.command("crawl")
@click.argument("url", required=False)
@click.option("--site-domain", help="Tenant key (default: the URL's host without www.).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many URLs in the run.")
@click.option("--max-depth", type=click.IntRange(min=0), help="Link depth from the start page.")
@click.option("--include", multiple=True, help="Only paths matching this glob (repeatable).")
@click.option("--exclude", multiple=True, help="Never scrape paths matching this glob (repeatable).")
@click.option("--feed", "feeds", multiple=True, help="Also read this RSS/Atom feed for URLs (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary on stdout.")
@_guard
def crawl_cmd(url: str | None, site_domain: str | None, limit: int | None, max_depth: int | None,
              include: tuple[str, ...], exclude: tuple[str, ...], feeds: tuple[str, ...], as_json: bool) -> None:
    """Crawl URL's site into versioned markdown snapshots.

    With --feed and no URL, crawls the feed's entries: the run starts at the feed host's root page and
    does not follow its links (unless --max-depth says otherwise).
    """
    from gleaner.urls import canonicalize, origin_of, validate_glob

    for feed in feeds:
        canonicalize(feed)
    if url is None:
        if not feeds:
            _fail("give a URL to crawl, or --feed FEED_URL")
            return
        url = origin_of(canonicalize(feeds[0])) + "/"
        max_depth = 0 if max_depth is None else max_depth
    canonicalize(url)
    for glob in (*include, *exclude):
        validate_glob(glob)
    summary = _run_crawl(_settings(), url, as_json, site_domain=site_domain, limit=limit, max_depth=max_depth,
                         include=include, exclude=exclude, feeds=feeds, triggered_by="api", mode="manual")
    if summary["status"] == "failed":
        sys.exit(1)


@main.command("demo")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary on stdout.")
@click.option("--serve-seconds", type=float, default=300.0, show_default=True,
              help="The demo site stops by itself after this long.")
@_guard
def demo_cmd(as_json: bool, serve_seconds: float) -> None:
    """Serve the bundled demo site on 127.0.0.1 and crawl it."""
    from gleaner.config import parse_networks
    from gleaner.demo import demo_pages
    from gleaner.testsite import TestSite

    pages: dict[str, Any] = {}
    site = TestSite(pages, max_seconds=serve_seconds)
    pages.update(demo_pages(site.url))
    # The demo site is on loopback: allow exactly that, and relax politeness for our own server.
    settings = _settings(allow_networks=parse_networks("127.0.0.0/8"), host_delay=0.0, host_concurrency=4)
    with site:
        if not as_json:
            click.echo(f"gleaner: demo site at {site.url}/", err=True)
        summary = _run_crawl(settings, site.url + "/", as_json, site_domain="demo.gleaner.local",
                             triggered_by="api", mode="manual")
    if not as_json:
        click.echo("\nTry: gleaner docs demo.gleaner.local    gleaner runs    "
                   f"gleaner show {site.url}/docs/install", err=True)
    if summary["status"] == "failed":
        sys.exit(1)


@main.command("runs")
@click.argument("run_id", required=False)
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@_guard
def runs_cmd(run_id: str | None, limit: int, as_json: bool) -> None:
    """Recent runs with their counters, or one run's per-URL status breakdown."""
    with _deps(_settings()) as deps:
        if run_id:
            summary = deps.metadata.run_summary(run_id) if _is_uuid(run_id) else None
            if summary is None:
                _fail(f"no run {run_id}")
                return
            summary["outcomes"] = deps.metadata.outcome_breakdown(run_id)
            if as_json:
                click.echo(json.dumps(summary))
                return
            _print_summary(summary, False)
            click.echo("  per-URL status:")
            for outcome, count in summary["outcomes"].items():
                click.echo(f"    {outcome:<28} {count}")
            return
        runs = deps.metadata.recent_runs(limit)
    if as_json:
        click.echo(json.dumps(runs))
        return
    if not runs:
        click.echo("no runs yet: try `gleaner demo`")
    for r in runs:
        s = r["snapshots"]
        click.echo(f"{r['run_id']}  {r['status']:<9} {r['site_domain']:<24} disc {r['discovered']:>5}  "
                   f"incl {r['included']:>5}  fetched {r['fetched']:>5}  failed {r['failed']:>4}  "
                   f"snap +{s['new']} ~{s['changed']} ={s['unchanged']}  {r['started_at'] or ''}")


def _is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


@main.command("docs")
@click.argument("site")
@click.option("--json", "as_json", is_flag=True)
@_guard
def docs_cmd(site: str, as_json: bool) -> None:
    """The site's document tree (built from path alone) with status and scrape policy."""
    with _deps(_settings()) as deps:
        rows = deps.metadata.documents_tree(site)
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        _fail(f"no documents for site {site!r}")
    from gleaner.tree import render_tree

    for line in render_tree(rows):
        click.echo(line)


@main.command("show")
@click.argument("url")
@click.option("--raw", is_flag=True, help="Print raw.md instead of content.md.")
@click.option("--json", "as_json", is_flag=True)
@_guard
def show_cmd(url: str, raw: bool, as_json: bool) -> None:
    """A page's current body and its version history."""
    from gleaner.urls import canonicalize

    canonical = canonicalize(url)
    with _deps(_settings()) as deps:
        doc = deps.metadata.document_by_url(canonical)
        if doc is None:
            _fail(f"no document for {canonical}")
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


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=8080, show_default=True,
              help="Port to listen on (0: any free port).")
@_guard
def serve_cmd(host: str, port: int) -> None:
    """Run the ingest function's HTTP surface locally: the feed-poller webhook and /refs retrieval.

    Needs GLEANER_WEBHOOK_SECRET (callers send it as a bearer token). Accepted articles land in the
    background on the in-process bus. Stops on Ctrl-C.
    """
    import signal
    import threading

    from gleaner.serve import WebhookServer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with _deps(_settings()) as deps, WebhookServer(deps, host, port) as server:
        click.echo(f"gleaner: serving the ingest webhook on {server.url}/ (refs at {server.url}/refs)", err=True)
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        click.echo("gleaner: stopping", err=True)


@main.group("refs")
def refs_group() -> None:
    """Reference items: external articles landed from feed pollers (never client knowledge)."""


@refs_group.command("search")
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 100), default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON object.")
@_guard
def refs_search(query: str, limit: int, as_json: bool) -> None:
    """Ranked previews of the reference items matching QUERY (PostgreSQL full-text search)."""
    with _deps(_settings()) as deps:
        results = deps.references.search(query, limit)
    if as_json:
        click.echo(json.dumps({"query": query, "results": results}))
        return
    if not results:
        click.echo(f"no reference items match {query!r}", err=True)
        sys.exit(1)
    for r in results:
        click.echo(f"{r['fulltext_score']:.4f}  {r['reference_id']}  {r['title']}\n"
                   f"        {r['source_url']}  published {r['published_at'] or 'unknown'}\n"
                   f"        {(r['body_preview'] or '').strip()}")


@refs_group.command("show")
@click.argument("reference_id")
@click.option("--json", "as_json", is_flag=True, help="Print the whole item as one JSON object.")
@_guard
def refs_show(reference_id: str, as_json: bool) -> None:
    """One reference item verbatim: its body on stdout, its provenance on stderr."""
    if not _is_uuid(reference_id):
        _fail(f"{reference_id!r} is not a reference id (a UUID)")
    with _deps(_settings()) as deps:
        item = deps.references.get(reference_id)
    if item is None:
        _fail(f"no reference item {reference_id}")
        return
    if as_json:
        click.echo(json.dumps(item))
        return
    click.echo(f"{item['title']}\n  {item['source_url']}  published {item['published_at'] or 'unknown'}\n"
               f"  document {item['source_document_id']}  snapshot {item['source_snapshot_id']}  "
               f"{item['extraction_method']}  ({item['ingestion_source']})", err=True)
    for article in item["articles"]:
        click.echo(f"  from workspace {article['workspace_id']} via {article['feed_source'] or 'a direct import'}",
                   err=True)
    click.echo(item["body"], nl=False)


@refs_group.command("walk")
@click.option("--full-reprocess", is_flag=True, help="Re-fetch every passed article, landed or not.")
@click.option("--json", "as_json", is_flag=True)
@_guard
def refs_walk(full_reprocess: bool, as_json: bool) -> None:
    """Land every passed feed article not yet landed, now, in this process (what the walk nudge does)."""
    from gleaner.bus.local import LocalBus
    from gleaner.messages import ArticlesAccepted
    from gleaner.stages import dispatch, wire

    with _deps(_settings()) as deps:
        if isinstance(deps.bus, LocalBus) and not deps.bus.handlers:
            wire(deps.bus, deps)
        report = dispatch(ArticlesAccepted(walk=True, full_reprocess=full_reprocess), deps)
        if isinstance(deps.bus, LocalBus):
            deps.bus.drain()
    counts = report.to_dict()
    if as_json:
        click.echo(json.dumps(counts))
    else:
        click.echo(", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items()))


@main.command("verify")
@click.argument("url")
@click.argument("quote")
@click.option("--json", "as_json", is_flag=True)
@_guard
def verify_cmd(url: str, quote: str, as_json: bool) -> None:
    """Check that QUOTE occurs verbatim in URL's stored text; print the byte span that holds it.

    Exits 0 when the current version holds the quote, 3 when only an earlier version did (drift),
    4 when no stored version does.
    """
    from gleaner.provenance.citations import locate
    from gleaner.urls import canonicalize

    canonical = canonicalize(url)
    with _deps(_settings()) as deps:
        doc = deps.metadata.document_by_url(canonical)
        if doc is None:
            _fail(f"no document for {canonical}")
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


@main.group("db")
def db_group() -> None:
    """Database maintenance."""


@db_group.command("upgrade")
@_guard
def db_upgrade() -> None:
    """Apply schema migrations (every command also does this when needed)."""
    from gleaner.store import db

    settings = _settings()
    engine = db.create_engine(settings)
    db.upgrade(engine)
    click.echo(f"schema at revision {db.current_revision(engine)}")
    engine.dispose()


if __name__ == "__main__":  # pragma: no cover
    main()
