"""What changed and who is told: ``gleaner changes``, ``gleaner notify …`` and ``gleaner deliver``."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from gleaner.cli.base import (
    echo_listing,
    fail,
    guard,
    load_settings,
    main,
    open_deps,
    require_known_site,
    resolve_id,
)

if TYPE_CHECKING:
    from gleaner.changes.events import ChangeEvent


@main.command("changes")
@click.argument("site", required=False)
@click.option("--since", help="An ISO 8601 time, or a run id (that run's changes and later ones).")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True,
              help="At most this many events: the newest ones (with --oldest-first: the oldest ones).")
@click.option("--oldest-first", is_flag=True, help="List the oldest first (as a log reads).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array of events (in the same order).")
@guard
def changes_cmd(site: str | None, since: str | None, limit: int, oldest_first: bool, as_json: bool) -> None:
    """Change events (new, changed, removed, restored, stale, blocked, unblocked; run ends), newest first."""
    since_time: datetime | None = None
    since_run: str | None = None
    if since:
        try:
            since_time = datetime.fromisoformat(since.replace("Z", "+00:00"))
        except ValueError:
            since_run = since
    with open_deps(load_settings()) as deps:
        if since_run is not None:
            from gleaner.display import idprefix

            try:
                since_run = resolve_id(deps, "run", since_run)
            except idprefix.UnknownId as exc:
                fail(f"--since takes an ISO 8601 time or a run id: {exc}", 2)
        if site is not None:
            require_known_site(deps, site)
        events = deps.metadata.list_events(site=site, since=since_time, since_run=since_run, limit=limit,
                                           newest_first=not oldest_first)

    def line(e: ChangeEvent) -> str:
        if e.is_run_event:
            counts = e.summary or {}
            snaps = counts.get("snapshots") or {}
            done = "replayed" if counts.get("replay_of") else "fetched"  # a replay fetches nothing
            return (f"{e.occurred_at[:19]}  {words(e.type):<15} {'-':<8} run {e.run_id} of {e.site_domain}:"
                    f" {counts.get('fetched', 0)} {done}, {snaps.get('new', 0)} new,"
                    f" {snaps.get('changed', 0)} changed, {counts.get('failed', 0)} failed")
        version = f"v{e.version}" if e.version is not None else "-"
        if e.previous_version is not None:
            version = f"v{e.previous_version}->{version}"
        return f"{e.occurred_at[:19]}  {words(e.type):<15} {version:<8} {page_url(e.url)}"

    from gleaner.display.vocabulary import page_url, words

    echo_listing(events, as_json, line, "no changes" + (f" for {site}" if site else ""))


@main.group("notify")
def notify() -> None:
    """Change events to signed webhooks (Standard Webhooks) or channels (Slack, e-mail … through Apprise)."""


@notify.command("add")
@click.argument("url")
@click.option("--site", help="Only this site's events (default: every site).")
@click.option("--types", help="Comma-separated event types, e.g. document.changed,document.removed, or \"all\""
                              " for every type including the run events run.finished, run.partial and run.failed"
                              " (default: every type except the run events).")
@click.option("--digest", type=click.Choice(["1h", "1d"]),
              help="One message per hour or day listing its changes, instead of one per event.")
@guard
def notify_add(url: str, site: str | None, types: str | None, digest: str | None) -> None:
    """Subscribe URL: an http(s) webhook, or an Apprise URL (slack://, mailto://, discord://, json:// …).

    Prints the subscription id, and a webhook's signing secret (shown once)."""
    from gleaner.changes import channels, subscriptions

    settings = load_settings()
    with open_deps(settings) as deps:
        if site is not None:
            require_known_site(deps, site)
        sub = subscriptions.add(deps.metadata, url, site=site, types=subscriptions.parse_types(types),
                                allow=settings.allow_networks, digest_seconds=subscriptions.parse_digest(digest))
    if channels.is_channel(url):
        click.echo(f"id      {sub.id}\nchannel {channels.masked(url)}")
        click.echo("Events from now on are sent to this channel" + (f", one digest per {digest}." if digest else "."),
                   err=True)
        return
    click.echo(f"id      {sub.id}\nsecret  {sub.secret}")
    click.echo("Keep the secret: receivers verify webhook-signature with it. Events from now on are delivered"
               + (f", one digest per {digest}." if digest else "."), err=True)


@notify.command("list")
@click.option("--json", "as_json", is_flag=True)
@guard
def notify_list(as_json: bool) -> None:
    """Subscriptions, their URLs masked (never their secrets)."""
    with open_deps(load_settings()) as deps:
        subs = [s.public() for s in deps.metadata.listed_subscriptions()]
    echo_listing(subs, as_json,
                 lambda s: (f"{s['id']}  {s['url']}  site={s['site'] or '*'}  types={','.join(s['types']) or '*'}"
                            + (f"  digest={s['digest']}" if s["digest"] else "")
                            + ("  (disabled)" if s["status"] == "disabled" else "")),
                 "no subscriptions: try `gleaner notify add URL`")


@notify.command("remove")
@click.argument("subscription_id")
@guard
def notify_remove(subscription_id: str) -> None:
    """Stop delivering to a subscription (its delivery log is kept)."""
    with open_deps(load_settings()) as deps:
        subscription_id = resolve_id(deps, "subscription", subscription_id)
        if not deps.metadata.remove_subscription(subscription_id):
            fail(f"no subscription {subscription_id}")
    click.echo(f"removed {subscription_id}", err=True)


@notify.command("disable")
@click.argument("subscription_id")
@guard
def notify_disable(subscription_id: str) -> None:
    """Stop delivering to a subscription for now: its pending deliveries are cancelled, it is kept."""
    _set_status(subscription_id, "disabled")


@notify.command("enable")
@click.argument("subscription_id")
@guard
def notify_enable(subscription_id: str) -> None:
    """Deliver to a disabled subscription again, from the events that happen from now on."""
    _set_status(subscription_id, "active")


def _set_status(subscription_id: str, status: str) -> None:
    from gleaner.changes.subscriptions import SubscriptionStatus

    with open_deps(load_settings()) as deps:
        subscription_id = resolve_id(deps, "subscription", subscription_id)
        changed = deps.metadata.set_subscription_status(subscription_id, SubscriptionStatus(status))
    if changed is None:
        fail(f"no subscription {subscription_id} (see `gleaner notify list`)")
    click.echo(f"{subscription_id}: {'enabled' if status == 'active' else 'disabled'}", err=True)


@notify.command("retry")
@click.argument("delivery_id")
@guard
def notify_retry(delivery_id: str) -> None:
    """Attempt a pending or failed delivery now (refused when its subscription was removed or disabled)."""
    from gleaner.changes import delivery
    from gleaner.store.notifications.deliveries import Requeue

    with open_deps(load_settings()) as deps:
        delivery_id = resolve_id(deps, "delivery", delivery_id)
        requeued = deps.metadata.requeue_delivery(delivery_id)
        if requeued is Requeue.SUBSCRIPTION_REMOVED:
            fail(f"delivery {delivery_id}: its subscription was removed, so nothing is sent to it any more")
        if requeued is Requeue.SUBSCRIPTION_DISABLED:
            fail(f"delivery {delivery_id}: its subscription is disabled (`gleaner notify enable` it first)")
        if requeued is not Requeue.REQUEUED:
            fail(f"no pending or failed delivery {delivery_id} (see `gleaner notify deliveries`)")
        result = delivery.attempt(deps, delivery_id, due_only=False)
    click.echo(f"{delivery_id}: {result}")


@notify.command("test")
@click.argument("subscription_id")
@guard
def notify_test(subscription_id: str) -> None:
    """Send a test message now (a signed webhook.test, or a channel message) and print the answer."""
    from gleaner.changes import delivery

    with open_deps(load_settings()) as deps:
        response = delivery.send_test(deps, resolve_id(deps, "subscription", subscription_id))
    if response.ok:
        click.echo(f"delivered: {f'HTTP {response.status}' if response.status else 'sent'} in {response.ms} ms")
        return
    fail(f"not delivered: {response.error or f'HTTP {response.status}'}")


@notify.command("deliveries")
@click.argument("subscription_id", required=False)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@guard
def notify_deliveries(subscription_id: str | None, limit: int, as_json: bool) -> None:
    """The delivery log, newest first: each delivery's state and every attempt."""
    from gleaner.display.vocabulary import words

    with open_deps(load_settings()) as deps:
        if subscription_id is not None:
            subscription_id = resolve_id(deps, "subscription", subscription_id)
        rows = deps.metadata.delivery_log(subscription_id, limit)

    def line(d: dict[str, Any]) -> str:
        # A channel (Apprise) answers no HTTP status: an attempt with neither status nor error was sent.
        tries = " ".join(str(a["status"] or ("failed" if a["error"] else "sent")) for a in d["log"])
        return (f"{d['created_at'][:19]}  {words(d['state']):<9} {words(d['type']):<15} to {d['subscription_id'][:8]}"
                f"  {d['url'] or ''}"
                f"  webhook-id {d['event_id']}  attempts: {tries or '-'}")

    echo_listing(rows, as_json, line, "no deliveries yet")


@main.command("deliver")
@click.option("--wait", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Keep retrying deliveries that come due within this many seconds.")
@guard
def deliver_cmd(wait: float) -> None:
    """Publish unpublished change events and attempt every webhook delivery that is due."""
    from gleaner.changes import delivery, outbox

    with open_deps(load_settings()) as deps:
        published = outbox.flush(deps)
        counts = delivery.deliver_due(deps, wait_seconds=wait)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing due"
    click.echo(f"published {published} events; deliveries: {summary}")
