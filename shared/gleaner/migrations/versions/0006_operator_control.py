"""Operator control: sites on a schedule, persistent rules, review decisions, routings and composites.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30

- ``sites``: the registry of crawled sites (one per ``site_domain``), with what a scheduled run asks for
  (start URL, include / exclude globs, limit, depth, budgets) and when: ``every_seconds`` (NULL: only
  on demand), ``adaptive`` (``--every auto``: the interval moves between the bounds with the change
  observed), ``next_run_at`` (``gleaner tick`` claims due rows by moving it). Per-host politeness stays
  on ``source_hosts`` (host_delay_seconds / host_concurrency), which the fetcher already reads.
- ``site_rules``: the operator's glob rules, ``skip`` (gate 1) or ``block`` (gate 2). Documents record
  the rule that skipped / blocked them (``skip_rule_id`` / ``block_rule_id``), so removing a rule lifts
  exactly what it did and nothing an operator or the decider did otherwise.
- ``documents.operator_decision``: ``gleaner review decide`` (include / exclude), kept across runs and
  outranking rules and the decider.
- ``crawl_page_decisions.sitemap_lastmod``: a sitemap's ``<lastmod>`` for the URL, which an ``auto``
  site's scheduled run honours (operator/lastmod.py).
- ``document_routings`` and ``composite_document_sources``: the ADR's tables (seed 003), with the tenant
  key added so row-level security can scope them like every other table. A routing has exactly one
  owner (a document or a composite); (owner, destination, target_ref) is unique, as the ADR's key says.
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TYPE knowledge.rule_action AS ENUM ('skip', 'block');
CREATE TYPE knowledge.routing_destination AS ENUM ('rag', 'skill', 'config');

CREATE TABLE knowledge.sites (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    site_domain text NOT NULL UNIQUE,
    target_url text NOT NULL,
    source_host_id uuid REFERENCES knowledge.source_hosts(id),
    every_seconds integer CHECK (every_seconds > 0),
    adaptive boolean NOT NULL DEFAULT false,
    min_interval_seconds integer CHECK (min_interval_seconds > 0),
    max_interval_seconds integer CHECK (max_interval_seconds > 0),
    include jsonb NOT NULL DEFAULT '[]'::jsonb,
    exclude jsonb NOT NULL DEFAULT '[]'::jsonb,
    url_limit integer CHECK (url_limit >= 1),
    max_depth integer CHECK (max_depth >= 0),
    run_max_requests integer CHECK (run_max_requests >= 0),
    run_max_bytes bigint CHECK (run_max_bytes >= 0),
    run_max_seconds double precision CHECK (run_max_seconds >= 0),
    next_run_at timestamptz,
    last_run_id uuid,
    last_run_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK (NOT adaptive OR every_seconds IS NOT NULL)
);
CREATE INDEX sites_due ON knowledge.sites (next_run_at) WHERE next_run_at IS NOT NULL;

CREATE TABLE knowledge.site_rules (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    site_domain text NOT NULL,
    glob text NOT NULL,
    action knowledge.rule_action NOT NULL,
    reason text,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (site_domain, glob, action)
);

ALTER TABLE knowledge.documents
    ADD COLUMN skip_rule_id uuid REFERENCES knowledge.site_rules(id),
    ADD COLUMN block_rule_id uuid REFERENCES knowledge.site_rules(id),
    ADD COLUMN operator_decision knowledge.page_decision
        CHECK (operator_decision IS NULL OR operator_decision IN ('include', 'exclude')),
    ADD COLUMN operator_reason text,
    ADD COLUMN operator_decided_at timestamptz;

-- what the run's sitemap said of the URL's last change (operator/lastmod.py)
ALTER TABLE knowledge.crawl_page_decisions ADD COLUMN sitemap_lastmod timestamptz;

CREATE TABLE knowledge.document_routings (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    site_domain text NOT NULL,
    document_id uuid REFERENCES knowledge.documents(id) ON DELETE CASCADE,
    composite_document_id uuid REFERENCES knowledge.composite_documents(id) ON DELETE CASCADE,
    destination knowledge.routing_destination NOT NULL,
    target_ref text,
    priority integer,
    enabled boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT document_routings_one_owner CHECK (num_nonnulls(document_id, composite_document_id) = 1)
);
CREATE UNIQUE INDEX document_routings_owner_destination ON knowledge.document_routings
    (COALESCE(document_id, composite_document_id), destination, COALESCE(target_ref, ''));
CREATE INDEX document_routings_site ON knowledge.document_routings (site_domain, destination);

CREATE TABLE knowledge.composite_document_sources (
    composite_document_id uuid NOT NULL REFERENCES knowledge.composite_documents(id) ON DELETE CASCADE,
    document_id uuid NOT NULL REFERENCES knowledge.documents(id) ON DELETE CASCADE,
    source_snapshot_id uuid REFERENCES knowledge.document_snapshots(id),
    site_domain text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (composite_document_id, document_id)
);
CREATE INDEX composite_document_sources_document ON knowledge.composite_document_sources (document_id);
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS knowledge.composite_document_sources")
    op.execute("DROP TABLE IF EXISTS knowledge.document_routings")
    op.execute(
        "ALTER TABLE knowledge.documents DROP COLUMN IF EXISTS skip_rule_id, DROP COLUMN IF EXISTS block_rule_id,"
        " DROP COLUMN IF EXISTS operator_decision, DROP COLUMN IF EXISTS operator_reason,"
        " DROP COLUMN IF EXISTS operator_decided_at"
    )
    op.execute("ALTER TABLE knowledge.crawl_page_decisions DROP COLUMN IF EXISTS sitemap_lastmod")
    op.execute("DROP TABLE IF EXISTS knowledge.site_rules")
    op.execute("DROP TABLE IF EXISTS knowledge.sites")
    op.execute("DROP TYPE IF EXISTS knowledge.routing_destination")
    op.execute("DROP TYPE IF EXISTS knowledge.rule_action")
