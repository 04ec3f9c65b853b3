"""The metadata database: engine construction and migrations.

Three ways to reach PostgreSQL, chosen by settings:

- ``GLEANER_DATABASE_URL=postgresql://…``: any PostgreSQL, through pg8000;
- ``GLEANER_CLOUDSQL_INSTANCE=project:region:instance``: Cloud SQL through the
  cloud-sql-python-connector with IAM database authentication;
- neither: an embedded PostgreSQL started by ``pgserver`` under the data dir (:mod:`gleaner.store.backends.embedded`).

An engine is created once per process by the composition root and reused
(Cloud Functions keep it across invocations). Migrations are Alembic revisions
in ``gleaner/migrations``; :func:`upgrade` applies them under an advisory lock,
so concurrent cold starts do not race. In the cloud the deploy applies them (a Cloud Build step
as the migrator identity) and functions only check the revision (:func:`require_schema`).
"""

from __future__ import annotations

import ast
import logging
import os
import re
import time
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.errors import ConfigError, RetryableError
from gleaner.settings.config import Settings
from gleaner.store.access.rls import ADMIN_OPTION, install_tenant_guard
from gleaner.store.backends import pgdriver
from gleaner.store.backends.dberrors import DatabaseRefused, guard_engine, patiently
from gleaner.store.backends.embedded import embedded_url, forget_dead_handles, stop_if_last  # noqa: F401  (their home was here)

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
# The pool of a laptop's engine (the embedded server or GLEANER_DATABASE_URL): kept and extra connections.
# All kept: an extra connection, closed when given back, was a server process to start and every statement
# of the crawl to prepare again (store/backends/pgdriver.py) on the next one. The bound follows the cores the server
# shares with this process: more connections than it can run at once only add server processes that each
# plan every statement again, and contend for the same cores. The most recently given back is taken first,
# so the busiest connections, whose statements are planned already, do most of the work.
LOCAL_POOL_SIZE = max(8, 4 * (os.cpu_count() or 2))
LOCAL_MAX_OVERFLOW = 0
# A local connection given back this recently is not pinged when taken again (see ping_when_idle).
PING_AFTER_IDLE_SECONDS = 1.0
# Any constant works; it only has to be the same in every process.
_MIGRATION_LOCK = 0x61EA4E5


def _pg8000_url(url: str) -> tuple[str, dict[str, Any]]:
    """Translate a libpq-style URL into a SQLAlchemy pg8000 URL plus connect args."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres", "postgresql+pg8000"):
        raise ConfigError(f"GLEANER_DATABASE_URL must be a postgresql:// URL, got scheme {parts.scheme!r}")
    query = parse_qs(parts.query)
    connect_args: dict[str, Any] = {}
    host = query.pop("host", [None])[0]
    if host and host.startswith("/"):
        port = parts.port or 5432
        connect_args["unix_sock"] = f"{host}/.s.PGSQL.{port}"
        # A Unix socket carries no TLS (the server answers pg8000's SSL request with "no"), but pg8000 builds
        # a default TLS context first, loading the CA bundle: CPU paid by every new connection.
        connect_args["ssl_context"] = False
    rest = "&".join(f"{k}={v[0]}" for k, v in query.items() if k not in ("sslmode",))
    netloc = parts.netloc
    new = f"postgresql+pg8000://{netloc}{parts.path}" + (f"?{rest}" if rest else "")
    return new, connect_args


def create_engine(settings: Settings) -> Engine:
    """One pooled engine per process."""
    if settings.cloudsql_instance:
        engine = cloudsql_engine(settings)
    else:
        url = settings.database_url or embedded_url(settings.data_dir, settings.pg_template_dir)
        sa_url, connect_args = _pg8000_url(url)
        # Kept connections for the many threads of a multi-site run (the engine's bus).
        engine = sa.create_engine(sa_url, connect_args=connect_args, pool_size=LOCAL_POOL_SIZE,
                                  max_overflow=LOCAL_MAX_OVERFLOW, pool_use_lifo=True,
                                  future=True)
        ping_when_idle(engine)
    if settings.database_role:
        _set_role_on_connect(engine, settings.database_role)
    discard_broken_connections(engine)
    pgdriver.install(engine)
    install_tenant_guard(engine)
    return guard_engine(engine, settings.database_wait_seconds)


def ping_when_idle(engine: Engine) -> None:
    """Ping a pooled connection at checkout only when it was idle for a while: SQLAlchemy's
    pre-ping at every checkout was a round trip per transaction, as many as the statements of a busy
    multi-site crawl. A connection lost since its last use (a restart) then fails its first statement:
    that is a disconnect like any other (the pool is emptied, :mod:`gleaner.store.backends.dberrors` reports it
    as retryable and the stages retry), not a crash."""

    @sa.event.listens_for(engine.pool, "checkin")
    def _given_back(dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @sa.event.listens_for(engine.pool, "checkout")
    def _taken(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if getattr(dbapi_connection, "_usock", True) is None:  # closed by pgdriver: an exchange was cut short
            raise sa.exc.DisconnectionError("connection closed after an exchange was cut short")
        idle_since = record.info.get("idle_since")
        if idle_since is not None and time.monotonic() - idle_since < PING_AFTER_IDLE_SECONDS:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:  # the pool reconnects (up to three times) on DisconnectionError
            raise sa.exc.DisconnectionError(f"connection lost while idle: {exc}") from exc
        if not alive:
            raise sa.exc.DisconnectionError("connection lost while idle")


def discard_broken_connections(engine: Engine) -> None:
    """A connection on which the driver failed outside the server's protocol is closed, not pooled.

    pg8000 encodes parameters while it writes a statement: a value it cannot encode (a lone
    surrogate) raises a plain Python error midway, leaving the connection out of step with the
    server, and every later statement on it fails. A server-side error (a DBAPIError) leaves the
    protocol in step, and the rollback that follows makes the connection clean again.
    """

    @sa.event.listens_for(engine, "handle_error")
    def _discard(context: Any) -> None:
        error = context.original_exception
        if isinstance(error, Exception) and not isinstance(error, engine.dialect.loaded_dbapi.Error):
            context.is_disconnect = True
            context.invalidate_pool_on_disconnect = False  # only this connection is broken, not the pool


def _set_role_on_connect(engine: Engine, role: str) -> None:
    """Every pooled connection acts as the shared role (objects it creates belong to that role)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", role):
        raise ConfigError(f"GLEANER_DATABASE_ROLE must be a plain identifier, got {role!r}")

    @sa.event.listens_for(engine, "connect")
    def _set_role(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f'SET ROLE "{role}"')
        cursor.close()
        dbapi_connection.commit()


def cloudsql_engine(settings: Settings, connector: Any = None) -> Engine:
    """A pooled engine over the Cloud SQL connector (IAM database authentication, pg8000).

    The connector (built here unless given: tests point one at a recording Admin API) is created
    once with the engine, so certificates and tokens are refreshed once per instance, not per call.
    """
    try:
        from google.cloud.sql.connector import Connector, IPTypes
    except ImportError as exc:
        raise ConfigError("Cloud SQL needs the 'cloud' extra (cloud-sql-python-connector)") from exc
    instance = settings.cloudsql_instance
    if not instance or not settings.cloudsql_user:
        raise ConfigError("GLEANER_CLOUDSQL_USER is required with GLEANER_CLOUDSQL_INSTANCE")
    if connector is None:
        connector = Connector(refresh_strategy="lazy")  # lazy refresh suits instances that idle between calls

    def connect() -> Any:
        # The connector path has its own creator, which do_connect does not see: wait out restarts here.
        return patiently(lambda: _connector_connect(), Exception, wait_seconds if reached else 0.0)

    reached: list[bool] = []
    wait_seconds = settings.database_wait_seconds

    def _connector_connect() -> Any:
        connection = connector.connect(
            instance,
            "pg8000",
            user=settings.cloudsql_user,
            db=settings.cloudsql_database,
            enable_iam_auth=True,
            ip_type=IPTypes.PRIVATE if settings.cloudsql_private_ip else IPTypes.PUBLIC,
        )
        if not reached:
            reached.append(True)
        return connection

    # The pool bounds this process's connections: docs/deployment.md multiplies it by max instances
    # to stay inside the instance's max_connections.
    return guard_engine(sa.create_engine("postgresql+pg8000://", creator=connect, pool_size=settings.db_pool_size,
                                         max_overflow=settings.db_max_overflow, pool_pre_ping=True,
                                         pool_recycle=1800, future=True), settings.database_wait_seconds)


def earlier_migration(file_name: str) -> ModuleType:
    """An earlier migration's module (``versions/FILE_NAME``): a migration that builds on another's SQL
    text reads it there rather than copying it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_gleaner_migration_{file_name[:4]}",
                                                  MIGRATIONS_DIR / "versions" / file_name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def alembic_config(engine: Engine) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply migrations up to revision; safe to call from many processes at once."""
    from alembic import command

    # Migrations run as the login (or GLEANER_DATABASE_ROLE) role, not the application role, and see
    # every tenant's rows: a data migration must not be filtered by row-level security.
    with engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(:k), set_config('app.all_tenants', 'on', false)"),
                     {"k": _MIGRATION_LOCK})
        try:
            cfg = alembic_config(engine)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            conn.commit()
        except BaseException:
            # The failed migration's transaction is aborted: without a rollback the unlock below fails
            # too and its "transaction is aborted" error hides the cause (the session lock survives it).
            conn.rollback()
            raise
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(:k), set_config('app.all_tenants', '', false)"),
                         {"k": _MIGRATION_LOCK})
            conn.commit()


def current_revision(engine: Engine) -> str | None:
    """The revision the database's schema is at (None: not migrated yet), read with one plain query.

    What alembic's MigrationContext reads, without importing alembic (every command checks this at start).
    """
    with engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
        if conn.execute(sa.text("SELECT to_regclass('knowledge.alembic_version')")).scalar() is None:
            return None
        revisions = sorted(str(r) for r in conn.execute(sa.text(
            "SELECT version_num FROM knowledge.alembic_version")).scalars())
    # One row on a single chain; several (branches) never equal the one head, so ensure_schema lets alembic decide.
    return ",".join(revisions) or None


_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=]*)?=\s*(.+?)\s*$", re.MULTILINE)


def head_revision() -> str | None:
    """The code's newest migration: read from the version files' ``revision`` / ``down_revision`` lines.

    Loading every migration script through alembic (what a command did at start to check the schema) costs
    more than the rest of the check; alembic decides where the files do not name exactly one head.
    """
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        found = {m[1]: m[2] for m in _REVISION_LINE.finditer(path.read_text(encoding="utf-8"))}
        try:
            revision = ast.literal_eval(found["revision"])
            down = ast.literal_eval(found.get("down_revision", "None"))
        except (KeyError, ValueError, SyntaxError):
            return alembic_head_revision()
        revisions.add(str(revision))
        parents.update([down] if isinstance(down, str) else down or ())
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else alembic_head_revision()


def alembic_head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


def require_schema(engine: Engine) -> None:
    """Refuse to work on a schema other than the code's (the deploy's migrate step has not run yet).

    Retryable: Pub/Sub and Cloud Tasks deliver again, and the deliveries succeed once it has run.
    """
    try:
        current = current_revision(engine)
    except sa.exc.DBAPIError as exc:
        raise RetryableError(f"cannot read the schema revision: {exc}") from exc
    head = head_revision()
    if current != head:
        raise RetryableError(f"the database schema is at revision {current}, this code needs {head}: "
                             "run the deploy's migrate step (gleaner db upgrade)")


def ensure_schema(engine: Engine) -> None:
    """Every command applies migrations when needed; a current schema costs one query."""
    try:
        if current_revision(engine) == head_revision():
            return
    except DatabaseRefused:  # no version table yet: a new database
        pass
    upgrade(engine)
