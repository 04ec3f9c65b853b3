"""knowledge schema: the ADR's tables (seed 003) plus the run ledger's fetch facts and the span ledger.

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Additions to the ADR, each for a contract in DESIGN.md:
- crawl_status gains sampling / scraping / finished / partial: a run is marked finished exactly once.
- crawl_runs gains counters for excluded, not-modified and snapshot outcomes (the CLI's --json).
- crawl_page_decisions gains the fetch outcome and facts for every URL ("a status for every URL"),
  depth and how it was discovered.
- documents gains http_etag / http_last_modified for conditional GETs.
- canonical_texts / text_spans / snapshot_texts: the ingest stage's canonical text by BLAKE3 and its span
  ledger (seed 004), kept in PostgreSQL so verification does not depend on the blob store.
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ENUMS = {
    "source_host_kind": ("own_site", "external_reference"),
    "document_kind": ("page", "file"),
    "document_origin": ("scrape", "upload", "feedback", "unknown"),
    "knowledge_type": ("generic", "faq"),
    "scrape_policy": ("scrape", "skip"),
    "document_status": ("discovered", "active", "blocked", "stale", "failed", "superseded"),
    "composite_status": ("generated", "in_validation", "validated", "staged", "prod", "stale", "superseded"),
    "render_mode": ("plain_fetch", "browser", "sandbox"),
    "change_signal": ("etag_changed", "lastmod_changed", "hash_changed", "jsonld_changed", "forced"),
    "crawl_mode": ("website_mapping", "incremental", "reprocess_from_snapshot", "manual"),
    "crawl_trigger": ("cron", "webhook", "backoffice", "api"),
    "crawl_status": ("queued", "mapping", "mapped", "sampling", "scraping", "finished", "partial", "failed"),
    "page_decision": ("unlabeled", "include", "exclude", "needs_review"),
    "decision_source": ("system", "operator", "rule"),
    "fetch_outcome": (
        "fetched",
        "not-modified",
        "robots-denied",
        "robots-unknown",
        "refused-size",
        "refused-content",
        "redirect-refused",
        "denied",
        "unavailable",
        "exhausted",
    ),
    "snapshot_outcome": ("new", "changed", "unchanged"),
}

TABLES = """
CREATE TABLE knowledge.source_hosts (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    site_domain text NOT NULL,
    client_id uuid,
    host text NOT NULL,
    kind knowledge.source_host_kind NOT NULL DEFAULT 'external_reference',
    -- per-host politeness overrides (NULL: the global setting)
    host_delay_seconds double precision,
    host_concurrency integer,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (site_domain, host)
);

CREATE TABLE knowledge.crawl_runs (
    id uuid PRIMARY KEY,
    site_domain text NOT NULL,
    source_host_id uuid REFERENCES knowledge.source_hosts(id),
    target_url text NOT NULL,
    raw_map_uri text,
    options jsonb NOT NULL DEFAULT '{}'::jsonb,
    mode knowledge.crawl_mode NOT NULL DEFAULT 'website_mapping',
    triggered_by knowledge.crawl_trigger NOT NULL DEFAULT 'api',
    status knowledge.crawl_status NOT NULL DEFAULT 'queued',
    started_at timestamptz,
    finished_at timestamptz,
    urls_discovered integer NOT NULL DEFAULT 0,
    urls_included integer NOT NULL DEFAULT 0,
    urls_excluded integer NOT NULL DEFAULT 0,
    urls_scraped integer NOT NULL DEFAULT 0,
    urls_not_modified integer NOT NULL DEFAULT 0,
    urls_failed integer NOT NULL DEFAULT 0,
    snapshots_new integer NOT NULL DEFAULT 0,
    snapshots_changed integer NOT NULL DEFAULT 0,
    snapshots_unchanged integer NOT NULL DEFAULT 0,
    batches_total integer,
    error text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX crawl_runs_site_started ON knowledge.crawl_runs (site_domain, created_at DESC);

CREATE TABLE knowledge.documents (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    site_domain text NOT NULL,
    client_id uuid,
    source_host_id uuid REFERENCES knowledge.source_hosts(id),
    kind knowledge.document_kind NOT NULL DEFAULT 'page',
    path text NOT NULL,
    origin knowledge.document_origin NOT NULL DEFAULT 'scrape',
    knowledge_type knowledge.knowledge_type NOT NULL DEFAULT 'generic',
    source_url text,
    canonical_url text,
    url_hash text,
    title text,
    scrape_policy knowledge.scrape_policy NOT NULL DEFAULT 'scrape',
    current_snapshot_id uuid,
    status knowledge.document_status NOT NULL DEFAULT 'discovered',
    blocked_reason text,
    skip_reason text,
    last_seen_at timestamptz,
    last_fetched_at timestamptz,
    last_processed_at timestamptz,
    kb_indexed boolean NOT NULL DEFAULT false,
    tags text[] NOT NULL DEFAULT '{}',
    is_deleted boolean NOT NULL DEFAULT false,
    http_etag text,
    http_last_modified text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK (origin <> 'scrape' OR (canonical_url IS NOT NULL AND url_hash IS NOT NULL))
);
CREATE UNIQUE INDEX documents_site_canonical_url ON knowledge.documents (site_domain, canonical_url)
    WHERE canonical_url IS NOT NULL;
CREATE INDEX documents_site_url_hash ON knowledge.documents (site_domain, url_hash);
CREATE INDEX documents_site_path ON knowledge.documents (site_domain, path text_pattern_ops);

CREATE TABLE knowledge.composite_documents (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    site_domain text NOT NULL,
    client_id uuid,
    title text,
    composite_kind text,
    current_snapshot_id uuid,
    status knowledge.composite_status NOT NULL DEFAULT 'generated',
    validated_by_user_id uuid,
    validated_at timestamptz,
    is_deleted boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE knowledge.document_snapshots (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    document_id uuid REFERENCES knowledge.documents(id) ON DELETE CASCADE,
    composite_document_id uuid REFERENCES knowledge.composite_documents(id) ON DELETE CASCADE,
    version integer NOT NULL CHECK (version >= 1),
    content_hash text NOT NULL,
    processed_markdown_ref text NOT NULL,
    extraction_metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    superseded_by uuid REFERENCES knowledge.document_snapshots(id),
    created_at timestamptz NOT NULL DEFAULT now(),
    raw_markdown_ref text,
    original_ref text,
    render_mode knowledge.render_mode,
    fetch_status integer,
    fetch_time_ms integer,
    byte_size integer,
    change_signal knowledge.change_signal,
    produced_by_run_id uuid REFERENCES knowledge.crawl_runs(id),
    CONSTRAINT document_snapshots_one_owner CHECK (num_nonnulls(document_id, composite_document_id) = 1),
    CONSTRAINT document_snapshots_scrape_only CHECK (
        composite_document_id IS NULL OR (
            raw_markdown_ref IS NULL AND original_ref IS NULL AND render_mode IS NULL
            AND fetch_status IS NULL AND fetch_time_ms IS NULL AND byte_size IS NULL
            AND change_signal IS NULL AND produced_by_run_id IS NULL
        )
    ),
    UNIQUE (document_id, content_hash),
    UNIQUE (composite_document_id, content_hash),
    UNIQUE (document_id, version),
    UNIQUE (composite_document_id, version)
);
CREATE INDEX document_snapshots_document_version ON knowledge.document_snapshots (document_id, version DESC);
CREATE INDEX document_snapshots_composite_version
    ON knowledge.document_snapshots (composite_document_id, version DESC);

ALTER TABLE knowledge.documents ADD CONSTRAINT documents_current_snapshot_fk
    FOREIGN KEY (current_snapshot_id) REFERENCES knowledge.document_snapshots(id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE knowledge.composite_documents ADD CONSTRAINT composite_documents_current_snapshot_fk
    FOREIGN KEY (current_snapshot_id) REFERENCES knowledge.document_snapshots(id) DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE knowledge.crawl_page_decisions (
    run_id uuid NOT NULL REFERENCES knowledge.crawl_runs(id) ON DELETE CASCADE,
    document_id uuid NOT NULL REFERENCES knowledge.documents(id) ON DELETE CASCADE,
    decision knowledge.page_decision NOT NULL DEFAULT 'unlabeled',
    decision_source knowledge.decision_source,
    decision_reason text,
    decision_confidence double precision CHECK (decision_confidence BETWEEN 0 AND 1),
    decision_metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    sample_uri text,
    sampled_at timestamptz,
    sample_error text,
    produced_snapshot_id uuid REFERENCES knowledge.document_snapshots(id),
    depth integer NOT NULL DEFAULT 0,
    discovered_via text NOT NULL DEFAULT 'link',
    batch_no integer,
    fetch_outcome knowledge.fetch_outcome,
    fetch_reason text,
    fetch_status integer,
    fetch_time_ms integer,
    byte_size integer,
    fetched_at timestamptz,
    -- what this run's fetch produced (SHA1 of content.md / raw.md): lets a redelivered scrape task
    -- re-announce pages whose hand-off to snapshot was lost, without fetching them again
    fetched_content_hash text,
    fetched_raw_hash text,
    extractor text,
    snapshot_outcome knowledge.snapshot_outcome,
    PRIMARY KEY (run_id, document_id)
);
CREATE INDEX crawl_page_decisions_document ON knowledge.crawl_page_decisions (document_id);

CREATE TABLE knowledge.canonical_texts (
    text_hash text PRIMARY KEY,
    body text NOT NULL,
    byte_length integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE knowledge.text_spans (
    text_hash text NOT NULL REFERENCES knowledge.canonical_texts(text_hash) ON DELETE CASCADE,
    ordinal integer NOT NULL,
    span_start integer NOT NULL,
    span_end integer NOT NULL,
    kind text NOT NULL,
    PRIMARY KEY (text_hash, ordinal),
    CHECK (0 <= span_start AND span_start < span_end)
);

CREATE TABLE knowledge.snapshot_texts (
    snapshot_id uuid PRIMARY KEY REFERENCES knowledge.document_snapshots(id) ON DELETE CASCADE,
    text_hash text NOT NULL REFERENCES knowledge.canonical_texts(text_hash),
    source_blake3 text NOT NULL,
    ingested_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX snapshot_texts_text_hash ON knowledge.snapshot_texts (text_hash);
"""


def upgrade() -> None:
    op.execute("CREATE SCHEMA IF NOT EXISTS knowledge")
    for name, values in ENUMS.items():
        labels = ", ".join(f"'{v}'" for v in values)
        op.execute(f"CREATE TYPE knowledge.{name} AS ENUM ({labels})")
    op.execute(TABLES)


def downgrade() -> None:
    for table in (
        "snapshot_texts",
        "text_spans",
        "canonical_texts",
        "crawl_page_decisions",
        "document_snapshots",
        "composite_documents",
        "documents",
        "crawl_runs",
        "source_hosts",
    ):
        op.execute(f"DROP TABLE IF EXISTS knowledge.{table} CASCADE")
    for name in ENUMS:
        op.execute(f"DROP TYPE IF EXISTS knowledge.{name}")
