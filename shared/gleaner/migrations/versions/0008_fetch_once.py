"""Fetch once per run: bodies map and sample fetched, the links a page held, the summary's new counters.

Revision ID: 0008
Revises: 0004
Create Date: 2026-11-30

- crawl_page_decisions.prefetched: what map's link walk or sample's section sample already asked the
  site for this page in this run (outcome, status, validators, the run artefact holding the body), so
  scrape uses it instead of asking again (DESIGN.md "Run control": a URL is fetched at most once per run).
- page_links: the links and feeds of a page's body as last read, with the validators that body came
  with; a recrawl's walk asks conditionally and, on 304, follows these links without the body.
- crawl_runs.urls_refused / urls_limited / urls_beyond_limit: the summary's "refused" and "limited"
  (DESIGN.md "Document lifecycle"); urls_beyond_limit is what discovery found past the run's limit.
"""

from alembic import op

from gleaner.store.access.rls import tenant_isolation_sql

revision = "0008"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE knowledge.crawl_page_decisions ADD COLUMN prefetched jsonb")
    op.execute(
        """
        ALTER TABLE knowledge.crawl_runs
            ADD COLUMN urls_refused integer NOT NULL DEFAULT 0,
            ADD COLUMN urls_limited integer NOT NULL DEFAULT 0,
            ADD COLUMN urls_beyond_limit integer NOT NULL DEFAULT 0
        """
    )
    op.execute(
        """
        CREATE TABLE knowledge.page_links (
            document_id uuid PRIMARY KEY REFERENCES knowledge.documents(id) ON DELETE CASCADE,
            site_domain text NOT NULL,
            etag text,
            last_modified text,
            links jsonb NOT NULL,
            feeds jsonb NOT NULL DEFAULT '[]'::jsonb,
            run_id uuid,
            updated_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    # Tenant-scoped like every table with a site_domain (migration 0011): the app role sees one tenant.
    op.execute(tenant_isolation_sql("knowledge.page_links"))


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS knowledge.page_links")
    op.execute(
        "ALTER TABLE knowledge.crawl_runs DROP COLUMN IF EXISTS urls_refused,"
        " DROP COLUMN IF EXISTS urls_limited, DROP COLUMN IF EXISTS urls_beyond_limit"
    )
    op.execute("ALTER TABLE knowledge.crawl_page_decisions DROP COLUMN IF EXISTS prefetched")
