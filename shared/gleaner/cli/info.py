"""``gleaner info``: where this Gleaner keeps its data, and which schema and version it runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import click

from gleaner import __version__
from gleaner.cli.base import guard, main
from gleaner.settings.config import Settings

_SECRET_PARAMS = ("password", "secret", "token", "key")


def mask_url(url: str) -> str:
    """The URL with any password (userinfo or query parameter) replaced by ``***``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}:***@{host}"
    query = urlencode([(k, "***" if any(s in k.lower() for s in _SECRET_PARAMS) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="/*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def describe(settings: Settings, files: tuple[Path, ...]) -> dict[str, Any]:
    from gleaner.store.backends import db

    if settings.cloudsql_instance:
        database = f"cloudsql://{settings.cloudsql_instance}/{settings.cloudsql_database}"
    elif settings.database_url:
        database = mask_url(settings.database_url)
    else:
        database = mask_url(db.embedded_url(settings.data_dir, settings.pg_template_dir))
    engine = db.create_engine(settings)
    try:
        revision = db.current_revision(engine)
        search = _search_mode(engine, settings.embed_model)
        if settings.rerank == "minilm":
            search += "; each answer's first pages looked at again by all-MiniLM-L6-v2 (GLEANER_RERANK)"
    finally:
        engine.dispose()
    return {
        "version": __version__,
        "home": str(settings.data_dir),
        "config_files": [str(f) for f in files],
        "database_url": database,
        "database_embedded": not (settings.cloudsql_instance or settings.database_url),
        "blob_url": mask_url(settings.blob_url) if settings.blob_url else (settings.data_dir / "blobs").as_uri(),
        "schema_revision": revision,
        "schema_head": db.head_revision(),
        "bus": settings.bus,
        "search": search,
    }


def _search_mode(engine: Any, embed_model: str) -> str:
    """How search ranks here: by meaning and words (pgvector) or by words alone (a server without it).

    Says too when the index holds vectors of another model than the configured one: search by meaning
    compares only vectors of the query's model, so those chunks are found by their words alone until
    they are embedded again.
    """
    import sqlalchemy as sa

    from gleaner.retrieval.embedder import EmbedModel, model_name

    with engine.connect() as conn:
        chunks, vectors = conn.execute(sa.text(
            "SELECT to_regclass('knowledge.text_chunks') IS NOT NULL, EXISTS (SELECT 1 FROM"
            " information_schema.columns WHERE table_schema = 'knowledge' AND table_name = 'text_chunks'"
            " AND column_name = 'embedding')")).one()
        by_model = dict(conn.execute(sa.text(
            # embedding_model is set exactly while a vector is held, indexed or fresh (migration 0037).
            "SELECT embedding_model, count(*) FROM knowledge.text_chunks WHERE embedding_model IS NOT NULL"
            " GROUP BY embedding_model")).all()) if vectors else {}
    if not chunks:
        return "not set up yet (the next command migrates the schema)"
    if not vectors:
        return "full text only: this PostgreSQL has no pgvector extension"
    model = model_name(EmbedModel(embed_model))
    mode = f"hybrid: {model} embeddings in pgvector (HNSW) + full text"
    others = {m: n for m, n in by_model.items() if m != model}
    if others:
        held = ", ".join(f"{n} by {m}" for m, n in sorted(others.items()))
        mode += (f"; the index holds chunks embedded by another model ({held}), found by their words"
                 " only until `gleaner index --reembed` embeds them with this one")
    return mode


@main.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@guard
def info_cmd(as_json: bool) -> None:
    """Where the data lives (GLEANER_HOME, database, blobs), the schema revision and the version."""
    from gleaner.settings.configfile import layered_env

    layered = layered_env(os.environ, Path.cwd())
    info = describe(Settings.from_env(layered.env), layered.files)
    if as_json:
        click.echo(json.dumps(info))
        return
    schema = info["schema_revision"] or "none yet"
    if info["schema_revision"] != info["schema_head"]:
        schema += f" (this version brings {info['schema_head']}; the next command applies it)"
    click.echo(f"gleaner {info['version']}\n"
               f"  home      {info['home']}  (GLEANER_HOME)\n"
               f"  config    {', '.join(info['config_files']) or 'no gleaner.toml found'}\n"
               f"  database  {info['database_url']}" + ("  (embedded)" if info["database_embedded"] else "") + "\n"
               f"  blobs     {info['blob_url']}\n"
               f"  schema    {schema}\n"
               f"  bus       {info['bus']}\n"
               f"  search    {info['search']}")
