"""Tenant isolation: row-level security on every tenant-scoped table, the application role, caller tokens.

Revision ID: 0011
Revises: 0009
Create Date: 2026-11-30

A token is 32 random bytes (``glt_`` + base64url), so a SHA-256 digest is enough to store it: no
salt or slow hash is needed against guessing, and the lookup is one index probe. The plaintext is
printed once by ``gleaner tokens add`` and never stored. Revoked tokens stay listed (who had access
when), ``revoked_at`` set.

Row-level security (gleaner.store.access.rls): the ``gleaner_app`` role every application transaction runs
as, its grants (and default grants for tables later migrations create), and the tenant policy on
every table with a ``site_domain`` column. A later migration adding such a table adds one line:
``op.execute(tenant_isolation_sql("knowledge.new_table"))``.
"""

from alembic import op

from gleaner.store.access.rls import APP_ROLE_SQL, tenant_isolation_sql

TENANT_TABLES = ("knowledge.source_hosts", "knowledge.crawl_runs", "knowledge.documents",
                 "knowledge.composite_documents", "knowledge.document_events", "knowledge.notify_subscriptions",
                 "knowledge.sites", "knowledge.site_rules", "knowledge.document_routings",
                 "knowledge.composite_document_sources", "knowledge.citations", "knowledge.document_conflicts",
                 "knowledge.erasures", "knowledge.erased_digests")

revision = "0011"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE knowledge.caller_tokens (
            id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            workspace_id text NOT NULL CHECK (length(workspace_id) BETWEEN 1 AND 200),
            token_sha256 bytea NOT NULL UNIQUE CHECK (length(token_sha256) = 32),
            label text NOT NULL DEFAULT '',
            created_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz
        )
        """
    )
    op.execute(APP_ROLE_SQL)
    for table in TENANT_TABLES:
        op.execute(tenant_isolation_sql(table))


def downgrade() -> None:
    for table in TENANT_TABLES:
        op.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute("DROP TABLE IF EXISTS knowledge.caller_tokens")
