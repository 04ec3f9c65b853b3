"""Back-office sessions kept server-side: one random id per login, stored as its SHA-256, with an expiry.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-01

Before, the login cookie was an HMAC of a constant (the same value at every login, never expiring,
no logout). Now each login mints a random id; the cookie carries it, the table its digest, the time
it ends and, for a site token's session, the token and its site. Logging out, the expiry and
revoking the token each end it. Operator sessions have no site; site sessions are under row-level
security on site_domain like every tenant table (the lookup, being the authentication, runs
across tenants). Failed logins are counted per peer address for the login's delay.
"""

from alembic import op

from gleaner.store.access.rls import tenant_isolation_sql

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE knowledge.backoffice_sessions (
            id_sha256 bytea PRIMARY KEY,
            site_domain text,
            site_token_id uuid REFERENCES knowledge.caller_tokens (id) ON DELETE CASCADE,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            ended_at timestamptz,
            CONSTRAINT backoffice_sessions_site_and_token CHECK ((site_domain IS NULL) = (site_token_id IS NULL))
        )""")
    op.execute("CREATE INDEX backoffice_sessions_expires ON knowledge.backoffice_sessions (expires_at)")
    op.execute(tenant_isolation_sql("knowledge.backoffice_sessions"))
    op.execute("""
        CREATE TABLE knowledge.backoffice_login_failures (
            peer text PRIMARY KEY,
            failures integer NOT NULL,
            last_failed_at timestamptz NOT NULL
        )""")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS knowledge.backoffice_login_failures")
    op.execute("DROP TABLE IF EXISTS knowledge.backoffice_sessions")
