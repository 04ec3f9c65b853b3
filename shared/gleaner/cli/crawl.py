"""Crawling: ``gleaner crawl`` and ``gleaner demo``."""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from gleaner.cli.base import (
    SUMMARY_KEYS,
    Progress,
    exit_for_run,
    fail,
    guard,
    interruptible,
    load_settings,
    main,
    open_deps,
    print_summary,
    tenant_key,
)
from gleaner.cli.search import embed_new_chunks
from gleaner.settings.config import Settings
from gleaner.store.backends.dberrors import DatabaseUnavailable

if TYPE_CHECKING:
    from gleaner.app import Deps

log = logging.getLogger(__name__)

# The demo site's fixed address: the same URLs every time, so a second demo is an unchanged recrawl.
DEMO_PORT = 8471


def run_crawl(settings: Settings, url: str, as_json: bool, *, summary: bool = True, **request: Any) -> dict[str, Any]:
    started: list[Any] = []  # the run's message, once made (after the imports the database's start overlaps)
    printed = False
    try:
        with open_deps(settings) as deps:
            try:
                result = _crawl(deps, settings, url, request, started)
            except BaseException as exc:
                if as_json and summary:  # --json always ends with its one object, a failure's included
                    printed = _print_failure(deps, started, request, exc)
                raise
    except BaseException as exc:
        if as_json and summary and not printed:  # the failure came before or after the crawl itself
            _print_failure(None, started, request, exc)
        raise
    if summary:
        print_summary(result, as_json)
    return result


def _print_failure(deps: Deps | None, started: list[Any], request: dict[str, Any], exc: BaseException) -> bool:
    from gleaner.cli.failedsummary import failed_summary

    run_id, site = (started[0].run_id, _tenant(started[0])) if started else (None, request.get("site_domain"))
    failure = failed_summary(deps, run_id, site, exc)
    click.echo(json.dumps({k: failure.get(k) for k in (*SUMMARY_KEYS, "error")}))
    return True


def _tenant(message: Any) -> str | None:
    from gleaner.stages import tenant_of

    try:
        return str(tenant_of(message))
    except Exception:  # a URL the request refused: no tenant
        return None


def _crawl(deps: Deps, settings: Settings, url: str, request: dict[str, Any], started: list[Any]) -> dict[str, Any]:
    opening = _open_database_meanwhile(deps)
    try:
        from gleaner.runtime.runner import crawl, new_request

        _freeze_imported()
        message = new_request(url, **request)
        started.append(message)

        def pages_total(run_id: str) -> int:
            summary = deps.metadata.run_summary(run_id)
            return int(summary["included"]) if summary else 0

        per_page = settings.host_delay / max(settings.host_concurrency, 1)
        with Progress(enabled=True, pages_total=pages_total, seconds_per_page=per_page) as progress, \
                interruptible(message.run_id):
            deps.observer = progress
            progress.line(f"crawling {url} (data in {settings.data_dir})")
            try:
                result = crawl(deps, message, progress.on_message)
            except DatabaseUnavailable as exc:  # the run stays active, its worker gone: resume takes it over
                raise DatabaseUnavailable(f"{exc}; when it is back, `gleaner runs resume {message.run_id}` goes on"
                                          " from there") from exc
            embed_new_chunks(deps, progress.line)
    finally:
        if opening is not None:
            opening.join()  # never close the dependencies under a database still starting
    return result


@main.command("crawl")
@click.argument("urls", nargs=-1, metavar="[URL]...")
@click.option("--site-domain", callback=tenant_key, help="Tenant key (default: the URL's host without www.).")
@click.option("--limit", type=click.IntRange(min=1),
              help=f"At most this many URLs in the run (default: {Settings().default_limit}); a run that stops "
                   "at its limit ends partial and says how many URLs were left.")
@click.option("--max-depth", type=click.IntRange(min=0), help="Link depth from the start page.")
@click.option("--include", multiple=True, help="Only paths matching this glob (repeatable).")
@click.option("--exclude", multiple=True, help="Never scrape paths matching this glob (repeatable).")
@click.option("--feed", "feeds", multiple=True, help="Also read this RSS/Atom feed for URLs (repeatable).")
@click.option("--delay", type=click.FloatRange(min=0), help="Seconds between requests to one host "
              "(GLEANER_HOST_DELAY; robots.txt's Crawl-delay can ask for more).")
@click.option("--concurrency", type=click.IntRange(min=1), help="Requests at once to one host "
              "(GLEANER_HOST_CONCURRENCY).")
@click.option("--render", type=click.Choice(["never", "auto", "always"]),
              help="Read pages with a headless browser: auto when a section's plain sample says little "
                   "(docs/rendering.md).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary on stdout.")
@guard
def crawl_cmd(urls: tuple[str, ...], site_domain: str | None, limit: int | None, max_depth: int | None,
              include: tuple[str, ...], exclude: tuple[str, ...], feeds: tuple[str, ...], delay: float | None,
              concurrency: int | None, render: str | None, as_json: bool) -> None:
    """Crawl URL's site into versioned markdown snapshots.

    Several URLs crawl their sites at once, one run each, in this process (each host at its own
    politeness); --json then prints a JSON array of the runs' summaries, in the order given.

    With --feed and no URL, crawls the feed's entries: the run starts at the feed host's root page and
    does not follow its links (unless --max-depth says otherwise).
    """
    from gleaner.urls import canonicalize, origin_of, validate_glob

    if len(urls) > 1:
        if site_domain or feeds:
            fail("--site-domain and --feed name one site: give one URL with them")
            return
        for glob in (*include, *exclude):
            validate_glob(glob)
        for each in urls:
            canonicalize(each)
        settings = load_settings(**politeness(delay, concurrency))
        summaries = run_crawls(settings, urls, as_json, limit=limit, max_depth=max_depth, include=include,
                               exclude=exclude, delay=delay, concurrency=concurrency, triggered_by="api",
                               mode="manual", render=render)
        exit_for_runs(summaries)
        return
    url = urls[0] if urls else None

    for feed in feeds:
        canonicalize(feed)
    if url is None:
        if not feeds:
            fail("give a URL to crawl, or --feed FEED_URL")
            return
        url = origin_of(canonicalize(feeds[0])) + "/"
        max_depth = 0 if max_depth is None else max_depth
    canonicalize(url)
    for glob in (*include, *exclude):
        validate_glob(glob)
    settings = load_settings(**politeness(delay, concurrency))
    summary = run_crawl(settings, url, as_json, site_domain=site_domain, limit=limit, max_depth=max_depth,
                         include=include, exclude=exclude, feeds=feeds, delay=delay, concurrency=concurrency,
                         triggered_by="api", mode="manual", render=render)
    exit_for_run(summary)


def run_crawls(settings: Settings, urls: Sequence[str], as_json: bool, **request: Any) -> list[dict[str, Any]]:
    """One run per URL, all at once (the multi-site engine); prints their summaries."""
    with open_deps(settings) as deps:
        from gleaner.cli.many import crawl_many
        from gleaner.runtime.runner import new_request

        _freeze_imported()
        deps.extract_pool.prestart()  # its imports overlap the database's start and the runs' map stage
        summaries = crawl_many(deps, [new_request(url, **request) for url in urls])
        embed_new_chunks(deps, lambda line: click.echo(line, err=True))
    if as_json:
        click.echo(json.dumps([{k: s.get(k, []) if k == "warnings" else s[k] for k in SUMMARY_KEYS}
                               | ({"error": s["error"]} if s.get("error") else {})
                               for s in summaries]))
    else:
        for summary in summaries:
            print_summary(summary, False)
    return summaries


def exit_for_runs(summaries: Sequence[dict[str, Any]]) -> None:
    """Exit as the worst run would alone: 130 if any was interrupted, 1 if any failed, else 0."""
    from gleaner.store.ledger.runstate import RunStatus

    statuses = {RunStatus(s["status"]) for s in summaries}
    if RunStatus.INTERRUPTED in statuses:
        fail("some runs were interrupted; `gleaner runs resume RUN_ID` goes on from there", 130)
    bad = [s for s in summaries if RunStatus(s["status"]) is not RunStatus.FINISHED
           and not (RunStatus(s["status"]) is RunStatus.PARTIAL and not s.get("error"))]
    if bad:
        fail(f"{len(bad)} of {len(summaries)} runs did not finish: "
             + "; ".join(f"{s['site_domain']} {s['status']}: {s.get('error') or 'no reason recorded'}" for s in bad))


def _freeze_imported() -> None:
    """Keep the garbage collector's full collections (during the run and at exit) off what the imports made.

    Modules, classes and functions live as long as the process; scanning them again at every full
    collection was a large part of a short run's CPU (infra/bench/README.md, issue 16 session 6).
    """
    gc.freeze()


def _open_database_meanwhile(deps: Deps) -> threading.Thread | None:
    """Open the database (the embedded PostgreSQL's start, the schema check) while this thread imports the pipeline.

    Most of a database's start is spent waiting for the server, time the imports can use. A failure is left
    to the run: its first use of the database opens it again, and reports or retries what fails.
    """

    def open_database() -> None:
        try:
            deps.engine  # noqa: B018  (built once, under the Deps lock: the run waits for it if it is first)
        except Exception:
            log.debug("opening the database ahead of the run failed; the run opens it again", exc_info=True)

    if deps.settings.bus == "gcp":  # a crawl here refuses that bus before it needs any database
        return None
    thread = threading.Thread(target=open_database, name="gleaner-open-database", daemon=True)
    thread.start()
    return thread


def politeness(delay: float | None, concurrency: int | None) -> dict[str, Any]:
    """The CLI's politeness options as settings overrides (an option wins over the environment)."""
    overrides: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if delay is not None:
        overrides["host_delay"] = delay
        sources["host_delay"] = "command line"
    if concurrency is not None:
        overrides["host_concurrency"] = concurrency
        sources["host_concurrency"] = "command line"
    return {**overrides, "politeness_sources": sources} if sources else overrides


# What ``gleaner demo --changed`` rewrites: the README's diff example shows /docs/install's change.
DEMO_CHANGES = ("/docs/install", "/about")


def _demo_site(pages: dict[str, Any], port: int, serve_seconds: float) -> Any:
    from gleaner.demosite.testsite import TestSite

    try:
        return TestSite(pages, port=port, max_seconds=serve_seconds)
    except OSError as exc:
        if port == 0:
            raise
        click.echo(f"gleaner: port {port} is taken ({exc.strerror}); serving the demo on another port, so its "
                   "URLs differ from earlier demos and nothing is recognised as unchanged (free the port, or "
                   "pass --port)", err=True)
        return TestSite(pages, max_seconds=serve_seconds)


@main.command("demo")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary on stdout.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEMO_PORT, show_default=True,
              help="Serve the demo site on 127.0.0.1 at this port (0: any free port).")
@click.option("--serve-seconds", type=float, default=300.0, show_default=True,
              help="At most this long: the demo site stops when the crawl ends, or after this many seconds if "
                   "the crawl takes longer.")
@click.option("--changed", is_flag=True,
              help="Serve the site as it is a week later: /docs/install and /about rewritten (a recrawl "
                   "then finds 2 changed pages, and `gleaner diff` shows what changed).")
@guard
def demo_cmd(as_json: bool, port: int, serve_seconds: float, changed: bool) -> None:
    """Serve the bundled demo site on 127.0.0.1 and crawl it (again: an unchanged recrawl; with --changed:
    two pages changed)."""
    from gleaner.demosite.demo import demo_pages
    from gleaner.settings.config import parse_networks

    pages: dict[str, Any] = {}
    site = _demo_site(pages, port, serve_seconds)
    pages.update(demo_pages(site.url, changed=DEMO_CHANGES if changed else ()))
    if changed:
        for path in DEMO_CHANGES:  # a later Last-Modified, as a site that changed a page answers
            pages[path].modified += 7 * 86400
    # The demo site is on loopback: allow exactly that, and relax politeness for our own server.
    settings = load_settings(allow_networks=parse_networks("127.0.0.0/8"), host_delay=0.0, host_concurrency=4,
                             politeness_sources=dict.fromkeys(("host_delay", "host_concurrency"), "the demo"))
    with site:
        if not as_json:
            click.echo(f"gleaner: demo site at {site.url}/", err=True)
        summary = run_crawl(settings, site.url + "/", as_json, site_domain="demo.gleaner.local",
                             triggered_by="api", mode="manual")
    if not as_json:
        click.echo("\nTry: gleaner docs demo.gleaner.local    gleaner runs    "
                   f"gleaner show {site.url}/docs/install    gleaner demo (again: nothing changed)    "
                   "gleaner demo --changed (a week later: 2 pages changed)", err=True)
    exit_for_run(summary)
