"""Alembic environment: runs on the connection (or engine) Gleaner hands it."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

config = context.config


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        engine = config.attributes["engine"]
        with engine.connect().execution_options(gleaner_admin=True) as conn:  # the migration role, not the app's
            _run(conn)
            conn.commit()
        return
    _run(connection)


def _run(connection: Connection) -> None:
    connection.exec_driver_sql("CREATE SCHEMA IF NOT EXISTS knowledge")
    context.configure(connection=connection, version_table_schema="knowledge", transactional_ddl=True)
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
