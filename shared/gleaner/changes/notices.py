"""Human-readable notification messages for channels (Slack, e-mail …): a title and a Markdown body.

A document event reads: site, what happened (event type, URL, title), the changed lines of its diff
(at most :data:`EXCERPT_LINES`, each cut at :data:`LINE_CHARS`), and a link to the back office's
page of the document when ``GLEANER_PUBLIC_URL`` is set. A run event reads: run id, site, status
and counts. A digest lists its period's events per site, one line each.

:func:`render` works on a delivery's stored body (the webhook JSON) and the :class:`Facts` gathered
for its documents (:func:`gather` reads them: title, versions' bodies); webhooks send the JSON itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gleaner.changes.diff import diff_versions
from gleaner.changes.digest import DIGEST_TYPE
from gleaner.errors import GleanerError

if TYPE_CHECKING:
    from gleaner.app import Deps

log = logging.getLogger(__name__)

EXCERPT_LINES = 12
LINE_CHARS = 200
# A digest names this many events per site, then counts the rest.
DIGEST_EVENTS_PER_SITE = 50

_VERBS = {"document.new": "New page", "document.changed": "Changed", "document.removed": "Removed",
          "document.restored": "Restored", "document.stale": "Stale", "document.blocked": "Blocked",
          "document.unblocked": "Unblocked", "conflict.opened": "Conflict found", "routing.handover": "Handed over"}


@dataclass(frozen=True, slots=True)
class Facts:
    """What a message says about one document event beyond the event itself."""

    title: str | None = None
    excerpt: tuple[str, ...] = ()  # changed lines, "+ added" / "- removed"
    more: int = 0  # changed lines left out of the excerpt
    link: str | None = None  # the back office's page of the document


@dataclass(frozen=True, slots=True)
class Notice:
    title: str
    body: str


def _run_line(data: dict[str, Any]) -> str:
    counts = data.get("summary") or {}
    snaps = counts.get("snapshots") or {}
    return (f"run {data.get('run_id')} of {data.get('site_domain')} {data.get('status')}:"
            f" {counts.get('fetched', 0)} fetched, {snaps.get('new', 0)} new, {snaps.get('changed', 0)} changed,"
            f" {counts.get('failed', 0)} failed")


def _doc_line(data: dict[str, Any], facts: Facts) -> str:
    verb = _VERBS.get(str(data.get("type")), str(data.get("type")))
    version = f" (v{data['previous_version']} → v{data['version']})" if data.get("previous_version") else (
        f" (v{data['version']})" if data.get("version") else "")
    name = f"{facts.title} — {data.get('url')}" if facts.title else str(data.get("url"))
    link = f" [open]({facts.link})" if facts.link else ""
    return f"{verb}: {name}{version}{link}"


def _event_notice(data: dict[str, Any], facts: Facts) -> Notice:
    if str(data.get("type", "")).startswith("run."):
        return Notice(f"Gleaner: {data.get('site_domain')} run {data.get('status')}", "Gleaner " + _run_line(data))
    lines = [f"**{data.get('site_domain')}** · {data.get('type')}", _doc_line(data, facts)]
    if facts.excerpt:
        lines += ["", "```", *facts.excerpt, "```"]
        if facts.more:
            lines.append(f"… and {facts.more} more changed lines")
    verb = _VERBS.get(str(data.get("type")), str(data.get("type")))
    return Notice(f"Gleaner: {verb.lower()} on {data.get('site_domain')}", "\n".join(lines))


def _digest_notice(data: dict[str, Any], facts_for: Callable[[dict[str, Any]], Facts]) -> Notice:
    events: list[dict[str, Any]] = data.get("events") or []
    by_site: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_site.setdefault(str(event.get("site_domain")), []).append(event)
    lines = [f"{len(events)} change{'s' if len(events) != 1 else ''} from {data.get('period_start')}"
             f" to {data.get('period_end')}"]
    for site, items in sorted(by_site.items()):
        lines += ["", f"**{site}** ({len(items)})"]
        for event in items[:DIGEST_EVENTS_PER_SITE]:
            is_run = str(event.get("type", "")).startswith("run.")
            lines.append("- " + (_run_line(event) if is_run else _doc_line(event, facts_for(event))))
        if len(items) > DIGEST_EVENTS_PER_SITE:
            lines.append(f"- … and {len(items) - DIGEST_EVENTS_PER_SITE} more")
    sites = ", ".join(sorted(by_site)) or "no site"
    return Notice(f"Gleaner digest: {len(events)} changes on {sites}", "\n".join(lines))


def render(body: str, facts_for: Callable[[dict[str, Any]], Facts]) -> Notice:
    """The message for a delivery's stored body (one event, a digest, or a ``webhook.test``)."""
    message = json.loads(body)
    data = message.get("data") or {}
    if message.get("type") == DIGEST_TYPE:
        return _digest_notice(data, facts_for)
    if message.get("type") == "webhook.test":
        return Notice("Gleaner: test message", str(data.get("message", "a test from gleaner notify test")))
    return _event_notice(data, facts_for(data))


def excerpt(url: str, old: str, new: str) -> tuple[tuple[str, ...], int]:
    """The changed lines of a diff, bounded, and how many were left out."""
    text = diff_versions(url, old, new, 1, 2).diff
    changed = [line.rstrip("\n") for line in text.splitlines(keepends=True)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    cut = [(line[:1] + " " + line[1:].strip())[:LINE_CHARS] for line in changed[:EXCERPT_LINES]]
    return tuple(cut), max(len(changed) - EXCERPT_LINES, 0)


def gather(deps: Deps, data: dict[str, Any], *, with_excerpt: bool = True) -> Facts:
    """Title, diff excerpt and back-office link of a document event; what cannot be read is left out."""
    document_id = data.get("document_id")
    if not document_id:
        return Facts()
    base = deps.settings.public_url
    link = f"{base.rstrip('/')}/ui/documents/{document_id}" if base else None
    title: str | None = None
    lines: tuple[str, ...] = ()
    more = 0
    try:
        doc = deps.browse.document(str(document_id))
        title = (doc or {}).get("title") or None
        version, previous = data.get("version"), data.get("previous_version")
        if with_excerpt and data.get("type") == "document.changed" and version and previous:
            refs = {v["version"]: v["content_ref"] for v in deps.metadata.snapshots_of(str(document_id))}
            old, new = (deps.blobs.get(refs[previous]).decode("utf-8", "replace"),
                        deps.blobs.get(refs[version]).decode("utf-8", "replace"))
            lines, more = excerpt(str(data.get("url")), old, new)
    except (LookupError, OSError, ValueError, GleanerError) as exc:  # pruned, erased: the message goes without
        log.info("notification for %s without its excerpt: %s", document_id, exc)
    return Facts(title, lines, more, link)
