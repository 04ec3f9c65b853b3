"""Row-level security policies read the tenant settings once per statement, not once per row.

Revision ID: 0040
Revises: 0039
Create Date: 2026-12-02

Every policy compared each row with ``current_setting('app.site_domain', true)`` and
``current_setting('app.all_tenants', true)``, and PostgreSQL called both again for every row a scan
looked at: a version's policy reads its documents through a hashed subplan, so each statement on
versions, texts or the ledger called them for every tenant's document. As scalar subqueries
(gleaner.store.access.rls) they are init plans, evaluated once per statement; what a transaction sees is
unchanged. Every existing policy is made again from gleaner.store.access.rls.
"""

import sqlalchemy as sa
from alembic import op

from gleaner.store.access.rls import PARENT_POLICIES, POLICY, parent_isolation_sql, tenant_isolation_sql

revision = "0040"
down_revision = "0039"
branch_labels = None
depends_on = None

# The expressions before this revision, for the downgrade.
_BEFORE = {
    "(SELECT NULLIF(current_setting('app.site_domain', true), ''))":
        "NULLIF(current_setting('app.site_domain', true), '')",
    "(SELECT current_setting('app.all_tenants', true) = 'on')": "current_setting('app.all_tenants', true) = 'on'",
}


def _policies() -> list[str]:
    """Each table's policies made again, as gleaner.store.access.rls makes them now, each table's FORCE as it was
    (search's chunks are read whole by their owner's functions, migration 0031)."""
    rows = op.get_bind().execute(sa.text(
        "SELECT DISTINCT n.nspname || '.' || c.relname, p.polname = :own, c.relforcerowsecurity"
        " FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'knowledge' AND p.polname IN (:own, 'tenant_read') ORDER BY 1"), {"own": POLICY}).all()
    return [(tenant_isolation_sql(table) if own else parent_isolation_sql(table))
            + ("" if forced else f"\nALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;")
            for table, own, forced in rows if own or table in PARENT_POLICIES]


def upgrade() -> None:
    for sql in _policies():
        op.execute(sql)


def downgrade() -> None:
    for sql in _policies():
        for now, before in _BEFORE.items():
            sql = sql.replace(now, before)
        op.execute(sql)
