"""Reference items and the local HTTP surface: ``gleaner serve`` and ``gleaner refs``."""

from __future__ import annotations

import json
import sys

import click

from gleaner.cli.base import fail, guard, load_settings, main, open_deps, resolve_id


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=8080, show_default=True,
              help="Port to listen on (0: any free port).")
@guard
def serve_cmd(host: str, port: int) -> None:
    """Run the ingest function's HTTP surface locally: the webhook, /refs, and the back office at /ui/.

    Needs GLEANER_WEBHOOK_SECRET (callers send it as a bearer token). Accepted articles land in the
    background on the in-process bus. Stops on Ctrl-C.
    """
    import signal
    import threading

    from gleaner.serving.serve import WebhookServer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open_deps(load_settings()) as deps, WebhookServer(deps, host, port) as server:
        click.echo(f"gleaner: serving the ingest webhook on {server.url}/ (refs at {server.url}/refs)", err=True)
        click.echo(f"gleaner: back office at {server.url}/ui/ (JSON API under {server.url}/v1/)", err=True)
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
@guard
def refs_search(query: str, limit: int, as_json: bool) -> None:
    """Ranked previews of the reference items for QUERY (by meaning and words: 0.6 / 0.4)."""
    from gleaner.retrieval.references import search_references

    with open_deps(load_settings()) as deps:
        results = search_references(deps, query, limit)
    if as_json:
        click.echo(json.dumps({"query": query, "results": results}))
        return
    if not results:
        click.echo(f"no reference items match {query!r}", err=True)
        sys.exit(1)
    for r in results:
        # One line per field: a title or preview spanning lines would break the listing's layout.
        click.echo(f"{r['score']:.4f}  {r['reference_id']}  {_one_line(r['title'])}\n"
                   f"        {r['source_url']}  published {r['published_at'] or 'unknown'}\n"
                   f"        {_one_line(r['body_preview'])}")


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


@refs_group.command("show")
@click.argument("reference_id")
@click.option("--json", "as_json", is_flag=True, help="Print the whole item as one JSON object.")
@guard
def refs_show(reference_id: str, as_json: bool) -> None:
    """One reference item verbatim: its body on stdout, its provenance on stderr."""
    with open_deps(load_settings()) as deps:
        reference_id = resolve_id(deps, "reference", reference_id)
        item = deps.references.get(reference_id)
    if item is None:
        fail(f"no reference item {reference_id}")
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
@guard
def refs_walk(full_reprocess: bool, as_json: bool) -> None:
    """Land every passed feed article not yet landed, now, in this process (what the walk nudge does)."""
    from gleaner.messages import ArticlesAccepted
    from gleaner.stages import dispatch

    with open_deps(load_settings()) as deps:
        local = deps.local_bus
        report = dispatch(ArticlesAccepted(walk=True, full_reprocess=full_reprocess), deps)
        if local is not None:
            local.drain()
    counts = report.to_dict()
    if as_json:
        click.echo(json.dumps(counts))
    else:
        click.echo(", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items()))
