"""Row-level security: every tenant-scoped table shows a transaction only its tenant's rows.

A table is tenant-scoped when it has a ``site_domain`` column; its migration calls
:func:`tenant_isolation_sql` (one line). The policy compares each row with the
transaction's setting ``app.site_domain``; ``FORCE`` subjects the table's owner too.

Who runs as what::

    role                 used by                           row-level security
    gleaner_app          every application transaction     enforced: one tenant, or all when
                         (SET LOCAL ROLE at BEGIN)         app.all_tenants = 'on'
    the login role /     migrations (upgrade), and the     owner: bypasses only as a superuser;
    GLEANER_DATABASE_ROLE  operator's database console     migrations set app.all_tenants

At the start of every transaction :func:`install_tenant_guard`'s listener switches
to ``gleaner_app`` and sets ``app.site_domain`` / ``app.all_tenants`` from
:mod:`gleaner.tenancy`'s current scope, all transaction-local (``set_config(…,
true)``), so nothing outlives the transaction on a pooled connection. With no
scope, tenant-scoped rows are invisible and cannot be written (fail closed).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner import tenancy
from gleaner.store.dberrors import DatabaseUnavailable

APP_ROLE = "gleaner_app"
ADMIN_OPTION = "gleaner_admin"  # execution option: this connection runs as the login role (migrations)
POLICY = "tenant_isolation"
_TABLE = re.compile(r"knowledge\.[a-z_][a-z0-9_]*")
_MATCH = ("(site_domain = NULLIF(current_setting('app.site_domain', true), '')"
          " OR current_setting('app.all_tenants', true) = 'on')")


def tenant_isolation_sql(table: str) -> str:
    """The statements that put ``table`` (``knowledge.name``, with a site_domain column) under the policy."""
    if not _TABLE.fullmatch(table):
        raise ValueError(f"expected knowledge.<table>, got {table!r}")
    return (f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY;\n"
            f"DROP POLICY IF EXISTS {POLICY} ON {table};\n"
            f"CREATE POLICY {POLICY} ON {table} USING {_MATCH} WITH CHECK {_MATCH};")


APP_ROLE_SQL = f"""
DO $$
BEGIN
    -- Where the migrating role may not create roles (Cloud SQL), terraform's db_bootstrap_sql has
    -- created it and made the migrating role a member already (it could not grant itself the role).
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        CREATE ROLE {APP_ROLE} NOLOGIN NOBYPASSRLS;
    END IF;
    IF NOT pg_has_role(current_user, '{APP_ROLE}', 'MEMBER') THEN
        EXECUTE format('GRANT {APP_ROLE} TO %I', current_user);
    END IF;
END
$$;
GRANT USAGE ON SCHEMA knowledge TO {APP_ROLE};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA knowledge TO {APP_ROLE};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA knowledge TO {APP_ROLE};
ALTER DEFAULT PRIVILEGES IN SCHEMA knowledge GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {APP_ROLE};
ALTER DEFAULT PRIVILEGES IN SCHEMA knowledge GRANT USAGE, SELECT ON SEQUENCES TO {APP_ROLE};
"""

_GUARD = ("SELECT set_config('role', %s, true), set_config('app.site_domain', %s, true),"
          " set_config('app.all_tenants', %s, true)")


def install_tenant_guard(engine: Engine) -> None:
    """Every transaction on engine runs as the application role for the current tenant scope."""

    @sa.event.listens_for(engine, "begin")
    def _guard(conn: Connection) -> None:
        if conn.get_execution_options().get(ADMIN_OPTION):
            return
        scope = tenancy.current()
        cursor: Any = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(_GUARD, (APP_ROLE, scope.site_domain or "", "on" if scope.all_tenants else ""))
        except (OSError, conn.dialect.loaded_dbapi.Error) as exc:
            # A raw statement bypasses the engine's error translation: a connection lost here (a restart)
            # is dropped from the pool and reported like any lost connection, so the caller retries.
            conn.invalidate(exc)
            raise DatabaseUnavailable(f"database error: {exc}; retrying may help") from exc
        finally:
            with contextlib.suppress(Exception):  # closing a cursor of a dead connection may fail too
                cursor.close()


def tenant_tables(conn: Connection) -> list[tuple[str, bool, bool]]:
    """Every ``knowledge`` table with a site_domain column: (name, RLS enabled, RLS forced)."""
    rows = conn.execute(sa.text(
        "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'site_domain' AND NOT a.attisdropped"
        " WHERE n.nspname = 'knowledge' AND c.relkind IN ('r', 'p') ORDER BY c.relname")).all()
    return [(r[0], bool(r[1]), bool(r[2])) for r in rows]
