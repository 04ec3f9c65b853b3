"""Database maintenance: ``gleaner db``."""

from __future__ import annotations

import click

from gleaner.cli.base import guard, load_settings, main


@main.group("db")
def db_group() -> None:
    """Database maintenance."""


@db_group.command("upgrade")
@guard
def db_upgrade() -> None:
    """Apply schema migrations (every command also does this when needed)."""
    from gleaner.store.backends import db

    settings = load_settings()
    engine = db.create_engine(settings)
    db.upgrade(engine)
    click.echo(f"schema at revision {db.current_revision(engine)}")
    engine.dispose()
