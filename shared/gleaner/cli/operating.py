"""Running Gleaner continuously: ``sites``, ``rules``, ``tick``, ``watch`` and ``review``.

Each command is a thin layer over :mod:`gleaner.operator` (the same functions the HTTP API calls).
With the in-process bus, work the operation queued (a tick's crawls, an unblocked page's ingest, a
composite's ingest) runs here before the command returns.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import click

from gleaner.app import Deps
from gleaner.changes import outbox
from gleaner.cli.base import echo_listing, guard, load_settings, main, open_deps, plain, resolve_id
from gleaner.cli.search import embed_new_chunks

if TYPE_CHECKING:
    from gleaner.operator.rules import Applied, Rule
    from gleaner.operator.schedule import TickReport


def drain_local(deps: Deps) -> None:
    """Run what an operation queued on the in-process bus (nothing else would); a no-op on Pub/Sub."""
    bus = deps.local_bus
    if bus is not None and bus.pending():
        bus.drain()


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, default=str))


class _Value(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


V = TypeVar("V", bound=_Value)


def _show(value: V, as_json: bool, line: str) -> None:
    """One result: its JSON, or one line for a person."""
    click.echo(json.dumps(value.to_dict(), default=str) if as_json else line)


def _show_rule(rule: Rule, applied: Applied, as_json: bool, line: str) -> None:
    if as_json:
        _echo_json({"rule": rule.to_dict(), "applied": applied.to_dict()})
    else:
        click.echo(line)


# -- sites ---------------------------------------------------------------------------------------


@main.group("sites")
def sites_group() -> None:
    """The sites Gleaner keeps current, and their schedules."""


@sites_group.command("add")
@click.argument("url")
@click.option("--site-domain", help="Site key (default: the URL's host without www.).")
@click.option("--every", help="Schedule: a duration (30m, 6h, 1d, 1h30m), auto, or manual (the default).")
@click.option("--include", multiple=True, help="Only paths matching this glob (repeatable).")
@click.option("--exclude", multiple=True, help="Never scrape paths matching this glob (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many URLs a run.")
@click.option("--max-depth", type=click.IntRange(min=0), help="Link depth from the start page.")
@click.option("--delay", type=click.FloatRange(min=0), help="Seconds between requests to the site's host.")
@click.option("--concurrency", type=click.IntRange(min=1), help="Requests at once to the site's host.")
@click.option("--max-requests", type=click.IntRange(min=0), help="Run budget: requests (0: unlimited).")
@click.option("--max-bytes", type=click.IntRange(min=0), help="Run budget: bytes (0: unlimited).")
@click.option("--max-seconds", type=click.FloatRange(min=0), help="Run budget: seconds (0: unlimited).")
@click.option("--render", type=click.Choice(["never", "auto", "always"]),
              help="Read pages with a headless browser (docs/rendering.md); default never.")
@click.option("--json", "as_json", is_flag=True)
@guard
def sites_add(url: str, site_domain: str | None, every: str | None, include: tuple[str, ...],
              exclude: tuple[str, ...], limit: int | None, max_depth: int | None, delay: float | None,
              concurrency: int | None, max_requests: int | None, max_bytes: int | None, max_seconds: float | None,
              render: str | None, as_json: bool) -> None:
    """Register URL's site (or update it); a scheduled site is due at the next tick."""
    from gleaner.operator.sites import add_site

    with open_deps(load_settings()) as deps:
        site = add_site(deps, url, site_domain=site_domain, every=every, include=include, exclude=exclude,
                        limit=limit, max_depth=max_depth, delay=delay, concurrency=concurrency,
                        max_requests=max_requests, max_bytes=max_bytes, max_seconds=max_seconds, render=render)
    _show(site, as_json, f"site {site.site_domain}: {site.target_url}, every {site.every}"
          + (f", next run {site.next_run_at}" if site.next_run_at else ""))


@sites_group.command("list")
@click.option("--json", "as_json", is_flag=True)
@guard
def sites_list(as_json: bool) -> None:
    """Every registered site with its schedule."""
    from gleaner.operator.sites import list_sites

    with open_deps(load_settings()) as deps:
        sites = list_sites(deps)
    echo_listing(sites, as_json, lambda s: f"{s.site_domain:<28} every {s.every:<8} next {s.next_run_at or '-':<34}"
              f" {s.target_url}", "no sites yet: try `gleaner sites add URL --every 1d`")


@sites_group.command("show")
@click.argument("site")
@click.option("--json", "as_json", is_flag=True)
@guard
def sites_show(site: str, as_json: bool) -> None:
    """One site: schedule, globs, limits, politeness, budgets and its rules."""
    from gleaner.operator.rules import list_rules
    from gleaner.operator.sites import effective_politeness, get_site

    settings = load_settings()
    with open_deps(settings) as deps:
        found = get_site(deps, site)
        rules = list_rules(deps, found.site_domain)
    data = {**found.to_dict(), "politeness": effective_politeness(settings, found),
            "rules": [r.to_dict() for r in rules]}
    if as_json:
        _echo_json(data)
        return
    for key, value in data.items():
        if key not in ("rules", "politeness"):
            click.echo(f"{key:<22} {plain(value)}")
    polite = data["politeness"]
    click.echo(f"{'politeness used':<22} delay {polite['delay']:g} s ({polite['delay_source']}), concurrency"
               f" {polite['concurrency']} ({polite['concurrency_source']})")
    for r in rules:
        click.echo(f"rule {r.id}  {r.action:<5} {r.glob}  {r.reason or ''}")


@sites_group.command("remove")
@click.argument("site")
@guard
def sites_remove(site: str) -> None:
    """Forget a site's schedule (its documents, versions, runs and rules stay)."""
    from gleaner.operator.sites import remove_site

    with open_deps(load_settings()) as deps:
        removed = remove_site(deps, site)
    click.echo(f"removed site {removed.site_domain}")


# -- rules ---------------------------------------------------------------------------------------


@main.group("rules")
def rules_group() -> None:
    """Persistent skip (never fetched) and block (fetched, never ingested) rules."""


@rules_group.command("add")
@click.argument("site")
@click.argument("glob")
@click.option("--skip", is_flag=True, help="Gate 1: never fetch matching paths.")
@click.option("--block", is_flag=True, help="Gate 2: fetch and version, never ingest or route.")
@click.option("--include", is_flag=True,
              help="Force matching pages in over every automatic verdict (a section's sample, a near-empty page).")
@click.option("--ignore-text", "pattern", metavar="REGEX",
              help="Leave lines matching REGEX out of change detection for matching pages.")
@click.option("--render", type=click.Choice(["never", "auto", "always"]),
              help="Read matching pages with a headless browser or not, whatever the run says (docs/rendering.md).")
@click.option("--reason", help="Why (shown in the tree and the ledger).")
@click.option("--json", "as_json", is_flag=True)
@guard
def rules_add(site: str, glob: str, skip: bool, block: bool, include: bool, pattern: str | None,
              render: str | None, reason: str | None, as_json: bool) -> None:
    """Add a rule for SITE's paths matching GLOB; it applies at once and to every later run."""
    from gleaner.operator.rules import add_rule

    chosen = [name for name, given in (("--skip", skip), ("--block", block), ("--include", include),
                                       ("--ignore-text", pattern is not None), ("--render", render is not None))
              if given]
    if len(chosen) != 1:
        raise click.UsageError("say one of --skip, --block, --include, --ignore-text REGEX or --render MODE"
                               + (f", not both {' and '.join(chosen)}" if len(chosen) == 2 else
                                  f", not all of {', '.join(chosen)}" if chosen else "")
                               + " (skip: never fetched; block: fetched, never ingested)")
    action = ("skip" if skip else "block" if block else "include" if include
              else "ignore_text" if pattern is not None else f"render_{render}")
    with open_deps(load_settings()) as deps:
        rule, applied = add_rule(deps, site, glob, action, reason, pattern)
        outbox.flush_after_commit(deps)  # document.blocked events
    _show_rule(rule, applied, as_json, f"rule {rule.id}: {rule.action} {rule.glob} on {rule.site_domain}"
               f" ({len(applied.skipped)} skipped, {len(applied.blocked)} blocked, {len(applied.unskipped)} kept now)")


@rules_group.command("list")
@click.argument("site")
@click.option("--json", "as_json", is_flag=True)
@guard
def rules_list(site: str, as_json: bool) -> None:
    """SITE's rules, oldest first (the oldest matching rule of each kind is the one recorded)."""
    from gleaner.operator.rules import list_rules

    with open_deps(load_settings()) as deps:
        rules = list_rules(deps, site)
    echo_listing(rules, as_json, lambda r: f"{r.id}  {r.action:<11} {r.glob:<30}"
                 f"{' /' + r.pattern + '/' if r.pattern is not None else ''} {r.reason or ''}".rstrip())


@rules_group.command("remove")
@click.argument("rule_id")
@click.option("--json", "as_json", is_flag=True)
@guard
def rules_remove(rule_id: str, as_json: bool) -> None:
    """Remove a rule and lift what it did; unblocked pages are ingested now."""
    from gleaner.messages import SnapshotsWritten
    from gleaner.operator.rules import remove_rule

    with open_deps(load_settings()) as deps:
        rule, applied = remove_rule(deps, resolve_id(deps, "rule", rule_id))
        outbox.flush_after_commit(deps)  # document.unblocked events
        if applied.unblocked_snapshots:
            deps.bus.publish(SnapshotsWritten(run_id=None, site_domain=rule.site_domain,
                                              snapshot_ids=applied.unblocked_snapshots), ordering_key=rule.site_domain)
            drain_local(deps)
    _show_rule(rule, applied, as_json,
               f"removed rule {rule.id} ({len(applied.unskipped)} unskipped, {len(applied.unblocked)} unblocked)")


# -- schedule ------------------------------------------------------------------------------------


def _tick_once(deps: Deps, as_json: bool) -> dict[str, Any]:
    """Start every due site's run and drive them all at once in this process (the multi-site engine)."""
    import threading

    from gleaner.operator.schedule import run_upkeep, tick

    if deps.settings.bus != "gcp":  # this process will likely extract: the forkserver imports while the database starts
        deps.extract_pool.prestart()
    report = tick(deps, upkeep=False)
    # Retention beside the runs, not before them: no site's first request waits for it. Ctrl-C leaves it
    # cut short (each part is bounded and marks what it did: the next tick goes on from there).
    try:
        keeping = threading.Thread(target=run_upkeep, args=(deps,), name="gleaner-upkeep", daemon=True)
        keeping.start()
        data = report.to_dict()
        data["runs"] = _drive_started(deps, report)
        keeping.join()
        embed_new_chunks(deps, lambda line: click.echo(line, err=True))
    except KeyboardInterrupt:  # before or after the engine drove them: every run still active is interrupted
        _interrupt_started(deps, report)
        raise SystemExit(130) from None
    if not as_json:
        for run in data["runs"]:
            if run:
                click.echo(f"{run['site_domain']}: run {run['run_id']} {run['status']}"
                           f" (fetched {run['fetched']}, snapshots {plain(run['snapshots'])})", err=True)
        for site in report.still_running:
            click.echo(f"{site}: previous run still going; left due", err=True)
    return data


def _interrupt_started(deps: Deps, report: TickReport) -> None:
    from gleaner import tenancy
    from gleaner.runtime.runner import settle
    from gleaner.store.ledger.runstate import RunStatus

    for started in report.started:
        with tenancy.scope(started.site_domain):
            if settle(deps, started.run_id, RunStatus.INTERRUPTED, "interrupted (Ctrl-C or SIGTERM)"):
                click.echo(f"gleaner: {started.site_domain}: run {started.run_id} interrupted; "
                           f"`gleaner runs resume {started.run_id}` goes on from here", err=True)


def _drive_started(deps: Deps, report: TickReport) -> list[dict[str, Any] | None]:
    """Drive the tick's runs to their ends here (with the in-process bus; Pub/Sub carries them elsewhere)."""
    if deps.local_bus is None:
        return [deps.metadata.run_summary(s.run_id) for s in report.started]
    from gleaner.cli.many import drive_many
    from gleaner.runtime.engine import RunRef

    if not report.started:
        drain_local(deps)
        return []
    return list(drive_many(deps, [RunRef(s.run_id, s.site_domain, "") for s in report.started]))


@main.command("tick")
@click.option("--json", "as_json", is_flag=True, help="Print {started, still_running, runs} as JSON.")
@guard
def tick_cmd(as_json: bool) -> None:
    """Start a crawl of every site that is due (a tick run twice at once starts one run per site)."""
    from gleaner.bus import interrupts

    with open_deps(load_settings()) as deps, interrupts.catching():
        data = _tick_once(deps, as_json)
    if as_json:
        _echo_json(data)
    elif not data["started"]:
        click.echo("no site is due", err=True)


@main.command("watch")
@click.option("--every", "interval", type=click.FloatRange(min=1),
              help="At most this many seconds between ticks (a site falling due sooner starts then).")
@click.option("--rounds", type=click.IntRange(min=1), help="Stop after this many ticks (default: until Ctrl-C).")
@guard
def watch_cmd(interval: float | None, rounds: int | None) -> None:
    """Tick in a loop: keep every registered site current from this machine."""
    from gleaner.changes.sender import DeliverySender
    from gleaner.operator.schedule import watch

    settings = load_settings()
    every = interval or settings.watch_seconds
    with open_deps(settings) as deps, DeliverySender(deps):  # webhooks go out between and during ticks
        if deps.local_bus is not None:  # this process crawls: one engine drives every run as it comes
            from gleaner.cli.many import watch_many

            total = watch_many(deps, every, rounds)
        else:
            total = watch(deps, every=every, rounds=rounds, after_tick=lambda report: _after_tick(deps, report),
                          sleep=time.sleep)
    click.echo(f"watch: started {total} runs", err=True)


def _after_tick(deps: Deps, report: TickReport) -> None:
    _drive_started(deps, report)


# -- review --------------------------------------------------------------------------------------


@main.group("review")
def review_group() -> None:
    """Settle the pages the decider marked needs_review, and keep pages a run excluded."""


@review_group.command("list")
@click.argument("site")
@click.option("--json", "as_json", is_flag=True)
@guard
def review_list_cmd(site: str, as_json: bool) -> None:
    """Pages of SITE's latest run that need review, then those it excluded: `review decide URL include` keeps one."""
    from gleaner.operator.review import review_list

    with open_deps(load_settings()) as deps:
        items = review_list(deps, site)
    echo_listing(items, as_json, lambda i: f"{i.decision:<12} {i.url}  {i.reason or ''}",
                 f"nothing to review for {site}")


@review_group.command("decide")
@click.argument("url")
@click.argument("decision", type=click.Choice(["include", "exclude"]))
@click.option("--site-domain", help="The site, when URL is known under several.")
@click.option("--reason")
@click.option("--json", "as_json", is_flag=True)
@guard
def review_decide(url: str, decision: str, site_domain: str | None, reason: str | None, as_json: bool) -> None:
    """Include or exclude URL from now on (outranks rules and the decider, in every later run)."""
    from gleaner.operator.review import decide

    with open_deps(load_settings()) as deps:
        decided = decide(deps, url, decision, site_domain=site_domain, reason=reason)
    _show(decided, as_json, f"{decided.url}: {decided.decision} (operator)")
