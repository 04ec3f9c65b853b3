"""Crawling: ``gleaner crawl`` and ``gleaner demo``."""

from __future__ import annotations

import sys
from typing import Any

import click

from gleaner.cli.base import Progress, fail, guard, load_settings, main, open_deps, print_summary
from gleaner.config import Settings


def run_crawl(settings: Settings, url: str, as_json: bool, **request: Any) -> dict[str, Any]:
    from gleaner.runner import crawl, new_request

    with open_deps(settings) as deps, Progress(enabled=True) as progress:
        progress.line(f"crawling {url}")
        summary = crawl(deps, new_request(url, **request), progress.on_message)
    print_summary(summary, as_json)
    return summary


@main.command("crawl")
@click.argument("url", required=False)
@click.option("--site-domain", help="Tenant key (default: the URL's host without www.).")
@click.option("--limit", type=click.IntRange(min=1),
              help=f"At most this many URLs in the run (default: {Settings().default_limit}); a run that stops "
                   "at its limit ends partial and says how many URLs were left.")
@click.option("--max-depth", type=click.IntRange(min=0), help="Link depth from the start page.")
@click.option("--include", multiple=True, help="Only paths matching this glob (repeatable).")
@click.option("--exclude", multiple=True, help="Never scrape paths matching this glob (repeatable).")
@click.option("--feed", "feeds", multiple=True, help="Also read this RSS/Atom feed for URLs (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary on stdout.")
@guard
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
            fail("give a URL to crawl, or --feed FEED_URL")
            return
        url = origin_of(canonicalize(feeds[0])) + "/"
        max_depth = 0 if max_depth is None else max_depth
    canonicalize(url)
    for glob in (*include, *exclude):
        validate_glob(glob)
    summary = run_crawl(load_settings(), url, as_json, site_domain=site_domain, limit=limit, max_depth=max_depth,
                         include=include, exclude=exclude, feeds=feeds, triggered_by="api", mode="manual")
    if summary["status"] == "failed":
        sys.exit(1)


@main.command("demo")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary on stdout.")
@click.option("--serve-seconds", type=float, default=300.0, show_default=True,
              help="The demo site stops by itself after this long.")
@guard
def demo_cmd(as_json: bool, serve_seconds: float) -> None:
    """Serve the bundled demo site on 127.0.0.1 and crawl it."""
    from gleaner.config import parse_networks
    from gleaner.demo import demo_pages
    from gleaner.testsite import TestSite

    pages: dict[str, Any] = {}
    site = TestSite(pages, max_seconds=serve_seconds)
    pages.update(demo_pages(site.url))
    # The demo site is on loopback: allow exactly that, and relax politeness for our own server.
    settings = load_settings(allow_networks=parse_networks("127.0.0.0/8"), host_delay=0.0, host_concurrency=4)
    with site:
        if not as_json:
            click.echo(f"gleaner: demo site at {site.url}/", err=True)
        summary = run_crawl(settings, site.url + "/", as_json, site_domain="demo.gleaner.local",
                             triggered_by="api", mode="manual")
    if not as_json:
        click.echo("\nTry: gleaner docs demo.gleaner.local    gleaner runs    "
                   f"gleaner show {site.url}/docs/install", err=True)
    if summary["status"] == "failed":
        sys.exit(1)
