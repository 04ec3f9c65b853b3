"""cache_generation: one counter that every write to the site rules, the erasure blocklist or the
notification subscriptions moves.

Revision ID: 0039
Revises: 0038
Create Date: 2026-12-02

Stages read a site's rules, "has this tenant erased anything?" and the active subscriptions many times a
run; each process now keeps them (store/backends/generation.py) as long as this counter has not moved. Every
transaction's tenant guard reads it (rls.py), so a rule, an erasure or a subscription committed by any
process, the back office included, is seen by the next transaction that begins anywhere.
Statement triggers move it, so no writer can forget to: one row, global (a counter tells a tenant
nothing), updated in the writer's transaction so it moves exactly when the change becomes visible.
"""

from alembic import op

revision = "0039"
down_revision = "0038"
branch_labels = None
depends_on = None

_WATCHED = ("site_rules", "erased_digests", "notify_subscriptions")


def upgrade() -> None:
    op.execute("CREATE TABLE knowledge.cache_generation (only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),"
               " value bigint NOT NULL DEFAULT 0)")
    op.execute("INSERT INTO knowledge.cache_generation DEFAULT VALUES")
    op.execute("GRANT SELECT, UPDATE ON knowledge.cache_generation TO gleaner_app")
    op.execute(
        """
        CREATE FUNCTION knowledge.bump_cache_generation() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE knowledge.cache_generation SET value = value + 1;
            RETURN NULL;
        END
        $$
        """
    )
    for table in _WATCHED:
        op.execute(f"CREATE TRIGGER {table}_cache_generation AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE"
                   f" ON knowledge.{table} FOR EACH STATEMENT EXECUTE FUNCTION knowledge.bump_cache_generation()")


def downgrade() -> None:
    for table in _WATCHED:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_cache_generation ON knowledge.{table}")
    op.execute("DROP FUNCTION IF EXISTS knowledge.bump_cache_generation()")
    op.execute("DROP TABLE IF EXISTS knowledge.cache_generation")
