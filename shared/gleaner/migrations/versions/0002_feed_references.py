"""feed articles and reference items: the feed-poller ledger, the reference layer, the quality log.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29

Seed 000 (ID-75) in the ``knowledge`` schema, adapted to Gleaner:

- ``feed_articles``: the poller's ledger, one row per (workspace, normalised URL); ``external_url`` is
  kept exactly as the poller sent it, ``normalised_url`` is :func:`gleaner.urls.normalise_url` of it.
  ``ingested_at`` is when the row entered the ledger (the seed's content epoch); ``reference_item_id``
  is the backlink set when the URL lands.
- ``reference_items``: one row per normalised URL, id = uuid5(REFERENCES_NS, "ri:" + url) minted by
  the landing (deliberately no default). NO workspace column and no path into client knowledge: workspace
  provenance is recovered through the ledger backlink. The body's provenance is the document snapshot it
  was read from (``source_document_id`` RESTRICT, ``source_snapshot_id``). No embedding column yet: the
  search answers an embedding score of null until one exists.
- ``ingestion_quality_log``: the operator-visible record of URLs that were refused (``ssrf_rejected``),
  refused by the fetcher for good (``fetch_refused``) or yielded no text (``extraction_empty``);
  ``dedup_key`` makes a repeated walk write the same finding once.
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLES = """
CREATE TABLE knowledge.reference_items (
    id uuid PRIMARY KEY,
    title text NOT NULL,
    body text NOT NULL,
    summary text,
    source_url text NOT NULL,
    published_at timestamptz,
    primary_domain text,
    primary_subtopic text,
    layer text,
    source_document_id uuid NOT NULL REFERENCES knowledge.documents(id) ON DELETE RESTRICT,
    source_snapshot_id uuid REFERENCES knowledge.document_snapshots(id) ON DELETE RESTRICT,
    ingestion_source text NOT NULL CHECK (ingestion_source IN ('rss_feed', 'url_import')),
    extraction_method text NOT NULL,
    mime_type text NOT NULL,
    content_epoch timestamptz,
    search_vector tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(title, '')), 'A')
        || setweight(to_tsvector('english', coalesce(summary, '')), 'B')
        || setweight(to_tsvector('english', coalesce(body, '')), 'C')
    ) STORED,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT reference_items_source_url_key UNIQUE (source_url)
);
CREATE INDEX reference_items_search ON knowledge.reference_items USING gin (search_vector);
CREATE INDEX reference_items_published_at ON knowledge.reference_items (published_at DESC);
CREATE INDEX reference_items_source_document ON knowledge.reference_items (source_document_id);
COMMENT ON TABLE knowledge.reference_items IS
    'Workspace-less external references (seed 000, ID-75): one row per normalised URL. Never promoted '
    'into client knowledge automatically.';

CREATE TABLE knowledge.feed_articles (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id text NOT NULL,
    feed_source text,
    external_url text NOT NULL,
    normalised_url text NOT NULL,
    title text NOT NULL,
    summary text,
    published_at timestamptz,
    passed boolean NOT NULL DEFAULT true,
    ingested_at timestamptz NOT NULL DEFAULT now(),
    reference_item_id uuid REFERENCES knowledge.reference_items(id) ON DELETE SET NULL,
    CONSTRAINT feed_articles_workspace_url_key UNIQUE (workspace_id, normalised_url)
);
CREATE INDEX feed_articles_normalised_url ON knowledge.feed_articles (normalised_url);
CREATE INDEX feed_articles_pending ON knowledge.feed_articles (normalised_url)
    WHERE passed AND reference_item_id IS NULL;
CREATE INDEX feed_articles_reference_item ON knowledge.feed_articles (reference_item_id)
    WHERE reference_item_id IS NOT NULL;

CREATE TABLE knowledge.ingestion_quality_log (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    flag_type text NOT NULL CHECK (flag_type IN ('ssrf_rejected', 'fetch_refused', 'extraction_empty')),
    severity text NOT NULL DEFAULT 'error' CHECK (severity IN ('info', 'warning', 'error')),
    source_url text NOT NULL,
    reason text NOT NULL,
    feed_article_ids uuid[] NOT NULL DEFAULT '{}',
    details jsonb NOT NULL DEFAULT '{}'::jsonb,
    dedup_key text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ingestion_quality_log_url ON knowledge.ingestion_quality_log (source_url, flag_type);
"""


def upgrade() -> None:
    op.execute(TABLES)


def downgrade() -> None:
    for table in ("ingestion_quality_log", "feed_articles", "reference_items"):
        op.execute(f"DROP TABLE IF EXISTS knowledge.{table} CASCADE")
