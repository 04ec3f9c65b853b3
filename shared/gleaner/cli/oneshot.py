"""One look at a site without a crawl: ``gleaner scrape URL`` (one page) and ``gleaner map URL`` (its URLs).

Both go through the same fetcher as a crawl (address policy, robots.txt, politeness, limits) and
need no database: they print and forget, unless ``scrape --store`` asks to keep the page.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from gleaner.cli.base import fail, guard, load_settings, main
from gleaner.cli.crawl import politeness, run_crawl
from gleaner.fetch.explain import why_not_fetched

if TYPE_CHECKING:
    pass


@main.command("scrape")
@click.argument("url")
@click.option("--raw", is_flag=True, help="The whole page as markdown (raw.md), not just its main content.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--store", is_flag=True, help="Keep it: a run of this one URL, versioned like any crawl.")
@click.option("--site-domain", help="Tenant key for --store (default: the URL's host without www.).")
@guard
def scrape_cmd(url: str, raw: bool, as_json: bool, store: bool, site_domain: str | None) -> None:
    """Fetch one page and print it as markdown (robots.txt and the address policy still apply)."""
    from gleaner.extract.page import extract_page
    from gleaner.fetch.fetcher import Fetcher
    from gleaner.fetch.types import ContentKind, FetchOutcome, FetchRequest
    from gleaner.urls import canonicalize

    canonical = canonicalize(url)
    settings = load_settings()
    if store:
        _scrape_and_store(settings, url, canonical, raw, as_json, site_domain)
        return
    with Fetcher(settings) as fetcher:
        result = fetcher.fetch(FetchRequest(url, accept=(ContentKind.HTML,)))
    if result.outcome is not FetchOutcome.FETCHED:
        fail(f"{url}: not fetched: {why_not_fetched(result, url)}")
        return
    page = extract_page(result.body or b"", result.charset, result.final_url or url)
    markdown = (page.raw if raw else page.content).decode("utf-8")
    if as_json:
        click.echo(json.dumps({"url": url, "final_url": result.final_url or url, "status": result.status,
                               "title": page.title, "content_hash": page.content_hash, "markdown": markdown,
                               "stored": False}))
        return
    _print_markdown(markdown)


def _scrape_and_store(settings: Any, url: str, canonical: str, raw: bool, as_json: bool,
                      site_domain: str | None) -> None:
    """A run of this one URL (no links followed), then its stored version printed: one fetch of the page."""
    from gleaner.cli.base import open_deps

    summary = run_crawl(settings, url, as_json=False, summary=False, site_domain=site_domain, limit=1,
                        max_depth=0, triggered_by="api", mode="manual")
    with open_deps(settings) as deps:
        doc = deps.metadata.document_by_url(canonical)
        versions = deps.metadata.snapshots_of(doc["id"]) if doc else []
        ref = (versions[0]["raw_ref"] if raw else versions[0]["content_ref"]) if versions else None
        markdown = deps.blobs.get(ref).decode("utf-8") if ref else None
        outcomes = deps.metadata.outcome_breakdown(summary["run_id"])
    if markdown is None or doc is None:
        fail(f"{url}: not stored ({', '.join(f'{k} {v}' for k, v in outcomes.items()) or summary['status']}); "
             f"see gleaner runs {summary['run_id']}")
        return
    version = versions[0]
    click.echo(f"gleaner: stored {canonical} as version {version['version']} of {doc['site_domain']} "
               f"(run {summary['run_id']})", err=True)
    if as_json:
        click.echo(json.dumps({"url": url, "title": doc.get("title"), "content_hash": version["content_hash"],
                               "markdown": markdown, "stored": True, "run_id": summary["run_id"],
                               "version": version["version"]}))
        return
    _print_markdown(markdown)


def _print_markdown(markdown: str) -> None:
    sys.stdout.write(markdown if markdown.endswith("\n") else markdown + "\n")


@main.command("map")
@click.argument("url")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many URLs (default: GLEANER's 1000).")
@click.option("--max-depth", type=click.IntRange(min=0), help="Link depth from the start page (default 3).")
@click.option("--include", multiple=True, help="Only paths matching this glob (repeatable).")
@click.option("--feed", "feeds", multiple=True, help="Also read this RSS/Atom feed for URLs (repeatable).")
@click.option("--delay", type=click.FloatRange(min=0), help="Seconds between requests to one host.")
@click.option("--concurrency", type=click.IntRange(min=1), help="Requests at once to one host.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array on stdout.")
@guard
def map_cmd(url: str, limit: int | None, max_depth: int | None, include: tuple[str, ...], feeds: tuple[str, ...],
            delay: float | None, concurrency: int | None, as_json: bool) -> None:
    """List a site's URLs (robots.txt, sitemaps, feeds, links) without fetching its pages' content.

    The walk reads the pages it walks for their links, exactly as a crawl's map stage does; nothing
    is stored.
    """
    from gleaner.cli.progress import Progress
    from gleaner.decide.port import PageFacts
    from gleaner.decide.rules import RuleDecider
    from gleaner.fetch.fetcher import Fetcher
    from gleaner.stages.mapwalk import discover
    from gleaner.urls import canonicalize, path_of, validate_glob

    canonicalize(url)
    globs = tuple(validate_glob(g) for g in include)
    settings = load_settings(**politeness(delay, concurrency))
    decider = RuleDecider()

    def walkable(found: str) -> bool:  # the crawl's rule: do not walk into traps (login, search, …)
        return decider.decide(PageFacts(url=found, path=path_of(found)), ()).decision != "exclude"

    with Fetcher(settings) as fetcher, Progress(enabled=True) as progress:
        found = discover(fetcher, url, limit=limit or settings.default_limit,
                         max_depth=settings.default_max_depth if max_depth is None else max_depth,
                         include=globs, walkable=walkable, feeds=feeds, on_found=progress.urls_found)
        progress.line(f"mapping: {len(found.urls)} URLs found")
    rows: list[dict[str, Any]] = [{"url": canonical, "source_url": source, "depth": depth, "via": via}
                                  for canonical, (depth, via, source) in found.urls.items()]
    if as_json:
        click.echo(json.dumps({"url": url, "urls": rows, "problems": found.problems}))
        return
    for row in rows:
        click.echo(f"{row['url']}\t{row['via']}\t{row['depth']}")
    for problem in found.problems:
        click.echo(f"gleaner: note: {problem}", err=True)
