"""Site-bound caller tokens: a bearer that acts for one tenant (the back office's per-site credential).

Revision ID: 0012
Revises: 0013
Create Date: 2026-11-30

- caller_tokens.site_domain: a token bound to one site (``gleaner tokens add --site-domain SITE``);
  a request with it runs under ``tenancy.scope(SITE)``. A token is bound to exactly one workspace
  (the feed webhook's callers) or one site, never both and never neither.
- The table now has a site_domain column, so it joins row-level security like every tenant table:
  a site's transaction sees only its own tokens. The token lookup (authentication, before any
  tenant is known) reads across tenants (``gleaner.store.access.tokens``).
"""

from alembic import op

from gleaner.store.access.rls import tenant_isolation_sql

revision = "0012"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE knowledge.caller_tokens ALTER COLUMN workspace_id DROP NOT NULL")
    op.execute("ALTER TABLE knowledge.caller_tokens ADD COLUMN site_domain text")
    op.execute("ALTER TABLE knowledge.caller_tokens ADD CONSTRAINT caller_tokens_one_binding"
               " CHECK (num_nonnulls(workspace_id, site_domain) = 1)")
    op.execute(tenant_isolation_sql("knowledge.caller_tokens"))


def downgrade() -> None:
    op.execute("DROP POLICY IF EXISTS tenant_isolation ON knowledge.caller_tokens")
    op.execute("ALTER TABLE knowledge.caller_tokens NO FORCE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE knowledge.caller_tokens DISABLE ROW LEVEL SECURITY")
    op.execute("DELETE FROM knowledge.caller_tokens WHERE site_domain IS NOT NULL")
    op.execute("ALTER TABLE knowledge.caller_tokens DROP CONSTRAINT caller_tokens_one_binding")
    op.execute("ALTER TABLE knowledge.caller_tokens DROP COLUMN site_domain")
    op.execute("ALTER TABLE knowledge.caller_tokens ALTER COLUMN workspace_id SET NOT NULL")
