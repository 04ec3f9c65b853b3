"""``gleaner search`` (ranked citable chunks) and ``gleaner index`` (embed what is not embedded yet)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import click

from gleaner.app import Deps
from gleaner.cli.base import guard, load_settings, main, open_deps, require_known_site, tenant_key


def embed_new_chunks(deps: Deps, say: Callable[[str], None]) -> int:
    """After a crawl: tidy the word index (gleaner.retrieval.tidy.tidy_words), and embed the chunks it
    added (the model loads only when there are some)."""
    from gleaner.retrieval.index import embed_pending
    from gleaner.retrieval.tidy import tidy_words

    tidy_words(deps.engine)
    index = deps.search_index
    if not deps.settings.embed_after_crawl or not index.has_vectors():
        return 0
    from gleaner.retrieval.references import embed_references

    started = time.monotonic()
    done = embed_pending(index, deps.embedder) + embed_references(deps, deps.embedder)
    if done:
        say(f"indexed {done} new chunks for search in {time.monotonic() - started:.1f} s")
    return done  # fresh: searchable now; the merge into the graph is upkeep, off the run's path


def merge_when_idle(deps: Deps, say: Callable[[str], None]) -> None:
    """``gleaner watch`` between cycles with no run active: nothing waits for the merge then."""
    import sqlalchemy as sa

    from gleaner.retrieval import fresh

    try:
        if fresh.fresh_count(deps.engine, 1):
            _merge(deps, say)
    except sa.exc.SQLAlchemyError as exc:  # the watch goes on: the next idle moment merges
        say(f"merging fresh vectors failed ({exc.__class__.__name__}); retried when idle again")


def _merge(deps: Deps, say: Callable[[str], None]) -> None:
    from gleaner.retrieval.fresh import merge_fresh

    report = merge_fresh(deps.engine)
    if report.merged:
        say(f"moved {report.merged} fresh vectors into the vector index ({report.way}) in {report.seconds:.1f} s")


@main.command("search")
@click.argument("query")
@click.option("--site-domain", callback=tenant_key, help="Only this site's documents.")
@click.option("--limit", type=click.IntRange(1, 100), default=10, show_default=True)
@click.option("--rerank/--no-rerank", default=None,
              help="Look at the first pages again with the transformer (GLEANER_RERANK=minilm; slower, better).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@guard
def search_cmd(query: str, site_domain: str | None, limit: int, rerank: bool | None, as_json: bool) -> None:
    """The best passage of each of the best current documents for QUERY, each a verbatim slice (`gleaner slice`)."""
    from gleaner.retrieval import search

    given = {} if rerank is None else {"rerank": "minilm" if rerank else "none"}
    with open_deps(load_settings(**given)) as deps:
        if site_domain is not None:
            require_known_site(deps, site_domain)
        answer = search(deps, query, site_domain=site_domain, limit=limit)
    if as_json:
        click.echo(json.dumps(answer))
        return
    if not answer["results"]:
        click.echo(f"no results: {answer.get('note', 'nothing matched')}"
                   " (only current documents with an enabled rag routing are searchable)")
    for r in answer["results"]:
        es = "-" if r["embedding_score"] is None else f"{r['embedding_score']:.2f}"
        click.echo(f"{r['page_rank']}. {r['score']:.3f}  {r['url']}  v{r['version']}"
                   f"  (meaning {es}, words {r['fulltext_score']:.2f})\n"
                   f"       {r['preview']}\n"
                   f"       gleaner slice {r['text_hash']} {r['start']} {r['end']}")


@main.command("index")
@click.option("--reembed", is_flag=True,
              help="Drop vectors of any other model first (after a model change): the index never mixes models.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@guard
def index_cmd(reembed: bool, as_json: bool) -> None:
    """Embed every chunk that has no vector of the current model yet, move fresh vectors into the
    vector index; show the index's counts."""
    from gleaner.retrieval.composites import index_unindexed_composites
    from gleaner.retrieval.index import embed_pending
    from gleaner.retrieval.references import embed_references

    with open_deps(load_settings()) as deps:
        index = deps.search_index
        composites = index_unindexed_composites(deps)  # made before search knew composites (migration 0036)
        dropped = index.drop_other_models(deps.embedder.model) if reembed and index.has_vectors() else 0
        started = time.monotonic()
        done = embed_pending(index, deps.embedder)
        from gleaner.retrieval.fresh import merge_fresh

        merge = merge_fresh(deps.engine)
        counts = index.counts()
        counts["references_embedded_now"] = embed_references(deps, deps.embedder)
    counts.update({"embedded_now": done, "dropped": dropped, "composites_indexed_now": composites,
                   "merged_now": merge.merged, "merge": str(merge.way),
                   "seconds": round(time.monotonic() - started, 2)})
    if as_json:
        click.echo(json.dumps(counts))
        return
    if not counts["vectors"]:
        click.echo(f"{counts['chunks']} chunks; this database has no pgvector: search ranks by full text only")
        return
    click.echo(f"embedded {done} chunks and moved {merge.merged} fresh vectors into the vector index"
               f" ({merge.way}) in {counts['seconds']} s; {counts['chunks']} chunks ({counts['fresh']} fresh),"
               " by model: "
               + (", ".join(f"{m} {n}" for m, n in counts["embedded"].items()) or "none"))
