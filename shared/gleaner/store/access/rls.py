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
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gleaner import tenancy
from gleaner.store.backends import generation
from gleaner.store.backends.dberrors import DatabaseUnavailable

APP_ROLE = "gleaner_app"
ADMIN_OPTION = "gleaner_admin"  # execution option: this connection runs as the login role (migrations)
POLICY = "tenant_isolation"
_TABLE = re.compile(r"knowledge\.[a-z_][a-z0-9_]*")
# The transaction's tenant and its all-tenants switch, each read once per statement: as scalar subqueries
# the planner makes them init plans, where a bare current_setting() in a policy was called again for every
# row a scan looked at (a version's policy reads its documents through a hashed subplan: every tenant's).
_SITE = "(SELECT NULLIF(current_setting('app.site_domain', true), ''))"
_ALL = "(SELECT current_setting('app.all_tenants', true) = 'on')"
_MATCH = f"(site_domain = {_SITE} OR {_ALL})"


def tenant_isolation_sql(table: str) -> str:
    """The statements that put ``table`` (``knowledge.name``, with a site_domain column) under the policy."""
    if not _TABLE.fullmatch(table):
        raise ValueError(f"expected knowledge.<table>, got {table!r}")
    return (f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY;\n"
            f"DROP POLICY IF EXISTS {POLICY} ON {table};\n"
            f"CREATE POLICY {POLICY} ON {table} USING {_MATCH} WITH CHECK {_MATCH};")


_REFERENCES = f"{_SITE} = '_references'"

# Tables without a site_domain column: a row is the tenant's when its parent row is. Each expression
# reads the parent table, whose own policy (applied to the subquery too) decides the tenant; the
# second is the INSERT check. Canonical texts are content-addressed and shared across tenants: a text
# (and its spans) is visible to a tenant exactly when one of the tenant's versions uses it
# (snapshot_texts), and anyone may insert one (its links decide who reads it; a conflict tells a
# writer only that a text it holds in full exists). Spans are inserted in the statement that
# inserts their text, before the text could be visible, hence their open insert too.
PARENT_POLICIES: dict[str, tuple[str, str]] = {
    "knowledge.document_snapshots": (
        "EXISTS (SELECT 1 FROM knowledge.documents p WHERE p.id = document_snapshots.document_id)"
        " OR EXISTS (SELECT 1 FROM knowledge.composite_documents p"
        " WHERE p.id = document_snapshots.composite_document_id)", ""),
    "knowledge.snapshot_texts": (
        "EXISTS (SELECT 1 FROM knowledge.document_snapshots p WHERE p.id = snapshot_texts.snapshot_id)", ""),
    "knowledge.canonical_texts": (
        "EXISTS (SELECT 1 FROM knowledge.snapshot_texts p WHERE p.text_hash = canonical_texts.text_hash)", "true"),
    "knowledge.text_spans": (
        "EXISTS (SELECT 1 FROM knowledge.canonical_texts p WHERE p.text_hash = text_spans.text_hash)", "true"),
    # Retrieval chunks are content-addressed like the spans they are cut along (migration 0020).
    "knowledge.text_chunks": (
        "EXISTS (SELECT 1 FROM knowledge.canonical_texts p WHERE p.text_hash = text_chunks.text_hash)", "true"),
    "knowledge.crawl_page_decisions": (
        "EXISTS (SELECT 1 FROM knowledge.crawl_runs p WHERE p.id = crawl_page_decisions.run_id)", ""),
    "knowledge.crawl_run_robots": (
        "EXISTS (SELECT 1 FROM knowledge.crawl_runs p WHERE p.id = crawl_run_robots.run_id)", ""),
    # Feed articles, their reference items and the quality log belong to Gleaner's own references
    # tenant (gleaner.references: REFERENCES_SITE).
    "knowledge.reference_items": (
        f"EXISTS (SELECT 1 FROM knowledge.documents p WHERE p.id = reference_items.source_document_id)"
        f" OR (reference_items.source_document_id IS NULL AND {_REFERENCES})", ""),
    "knowledge.feed_articles": (_REFERENCES, ""),
    "knowledge.ingestion_quality_log": (_REFERENCES, ""),
    "knowledge.notify_deliveries": (
        "EXISTS (SELECT 1 FROM knowledge.notify_subscriptions p WHERE p.id = notify_deliveries.subscription_id)",
        ""),
    "knowledge.notify_attempts": (
        "EXISTS (SELECT 1 FROM knowledge.notify_deliveries p WHERE p.id = notify_attempts.delivery_id)", ""),
}

# Tables under their policy for every reader but their owner (no FORCE): search's candidate functions,
# owned by the table's owner, read them whole through their indexes and return keys only, which search
# joins back through tenant-filtered tables (migration 0031: under the policy the GIN index is unusable).
OWNER_READ_TABLES = frozenset({"knowledge.text_chunks"})
# Tables that hold no tenant's data: the schema version, the per-host politeness turns every
# tenant's crawls share (a host, a slot number and a lease), the scrape batches a site may run at once
# (a site key, a slot and a lease: the same politeness, one level up) and the batches waiting for them
# (a task: run and document ids, no content, read only by scrape), and the back office's failed
# logins per peer address (throttling happens before anyone is known, so before any tenant), the
# fresh vectors' sign bits by chunk key (no text: search's scan ranks them, then keeps only the keys the
# caller's row-level security lets through, as with the candidate functions' answers; migration 0042).
# The language model's answers are content-addressed (reached only by hashing the same sample, like
# canonical texts) and its per-run usage is counters by run id (migration 0044).
GLOBAL_TABLES = frozenset({"knowledge.alembic_version", "knowledge.host_slots", "knowledge.site_leases",
                           "knowledge.site_waiters", "knowledge.backoffice_login_failures",
                           "knowledge.cache_generation", "knowledge.fresh_segments", "knowledge.llm_answers",
                           "knowledge.llm_run_usage"})


def parent_isolation_sql(table: str) -> str:
    """The statements that put ``table`` (a key of PARENT_POLICIES) under its parent's tenancy."""
    visible, insert = PARENT_POLICIES[table]
    check = insert or visible
    return (f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY;\n"
            + "".join(f"DROP POLICY IF EXISTS {name} ON {table};\n"
                      for name in (POLICY, "tenant_read", "tenant_insert", "tenant_update", "tenant_delete"))
            + f"CREATE POLICY tenant_read ON {table} FOR SELECT USING ({_ALL} OR ({visible}));\n"
            f"CREATE POLICY tenant_insert ON {table} FOR INSERT WITH CHECK ({_ALL} OR ({check}));\n"
            f"CREATE POLICY tenant_update ON {table} FOR UPDATE USING ({_ALL} OR ({visible}))"
            f" WITH CHECK ({_ALL} OR ({visible}));\n"
            f"CREATE POLICY tenant_delete ON {table} FOR DELETE USING ({_ALL} OR ({visible}));")


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
# The same, also reading the counter the per-process caches are labelled with (store/backends/generation.py).
# (Last in the row: the generic-plans setting below may come before it.)
_COUNTING = ", (SELECT value FROM knowledge.cache_generation)"
_COUNTER_KEY = "gleaner.has_cache_generation"


def _counts(conn: Connection, cursor: Any) -> bool:
    """Whether this connection's database has the counter (migration 0039); asked once per connection,
    so a database not yet migrated keeps working, with its caches off."""
    known = conn.info.get(_COUNTER_KEY)
    if known is None:
        cursor.execute("SELECT to_regclass('knowledge.cache_generation') IS NOT NULL")
        known = conn.info[_COUNTER_KEY] = bool(cursor.fetchone()[0])
    return known


# Execution option: the transaction's prepared statements use their generic plan from the first run on.
# The crawl's stages run a few dozen statement texts thousands of times, over a pool of connections that
# each prepare them (store/backends/pgdriver.py); PostgreSQL's default plans a statement per execution for its first
# five runs on a connection, and the RLS policies' subqueries make planning cost more than running. Their
# plans do not depend on the values (ids and JSON batches), unlike search's (a LIMIT, an optional filter),
# which keeps the default.
GENERIC_PLANS = "gleaner_generic_plans"
_GUARD_GENERIC = _GUARD + ", set_config('plan_cache_mode', 'force_generic_plan', true)"


@contextlib.contextmanager
def generic_plans(engine: Engine) -> Iterator[None]:
    """While inside, every transaction of ``engine`` runs with :data:`GENERIC_PLANS` (the crawl engine's)."""
    before = engine.get_execution_options().get(GENERIC_PLANS, False)
    engine.update_execution_options(**{GENERIC_PLANS: True})
    try:
        yield
    finally:
        engine.update_execution_options(**{GENERIC_PLANS: before})


@contextlib.contextmanager
def across_tenants(conn: Connection) -> Iterator[Connection]:
    """Inside, the transaction's statements see every tenant's rows; the transaction's own setting after.
    For a question about content-addressed rows every tenant shares (a canonical text, its chunks):
    whether any other tenant's row still uses one, never what that row says."""
    prior = conn.execute(sa.text("SELECT current_setting('app.all_tenants', true)")).scalar()
    conn.execute(sa.text("SELECT set_config('app.all_tenants', 'on', true)"))
    try:
        yield conn
    finally:
        conn.execute(sa.text("SELECT set_config('app.all_tenants', :p, true)"), {"p": prior or ""})


def install_tenant_guard(engine: Engine) -> None:
    """Every transaction on engine runs as the application role for the current tenant scope."""

    @sa.event.listens_for(engine, "begin")
    def _guard(conn: Connection) -> None:
        options = conn.get_execution_options()
        if options.get(ADMIN_OPTION):
            return
        scope = tenancy.current()
        cursor: Any = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            params = (APP_ROLE, scope.site_domain or "", "on" if scope.all_tenants else "")
            guard = _GUARD_GENERIC if options.get(GENERIC_PLANS) else _GUARD
            if _counts(conn, cursor):
                cursor.execute(guard + _COUNTING, params)
                generation.observe(engine, conn, cursor.fetchone()[-1])
            else:
                cursor.execute(guard, params)
                generation.observe(engine, conn, None)
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
