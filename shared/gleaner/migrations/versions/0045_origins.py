"""Uploads, feedback and the contradiction detector (DESIGN.md "Origins" and "Conflicts").

Revision ID: 0045
Revises: 0044
Create Date: 2026-12-05

- ingest_jobs: one row per ``POST /v1/ingest`` / ``gleaner ingest``: what was sent (its format, path,
  the original's blob key), its status and what it produced (document, version, conflicts opened),
  or why it failed. Tenant-scoped like every table.
- document_conflicts gains both sides' byte ranges in canonical text (text hash, start, end): a
  contradiction names the two passages, not only the two documents.
- conflict_detector gains ``rules``: the deterministic judge (numbers, dates, prices, negations).
- documents gains ``created_by`` (who uploaded or wrote it: the credential), for uploads and feedback.
"""

from alembic import op

from gleaner.store.access.rls import tenant_isolation_sql

revision = "0045"
down_revision = "0044"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TYPE knowledge.conflict_detector ADD VALUE IF NOT EXISTS 'rules'")
    op.execute("""
CREATE TYPE knowledge.ingest_job_status AS ENUM ('queued', 'running', 'succeeded', 'failed');
CREATE TABLE knowledge.ingest_jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    site_domain text NOT NULL,
    status knowledge.ingest_job_status NOT NULL DEFAULT 'queued',
    format text NOT NULL,
    path text NOT NULL,
    source_name text,
    original_ref text,
    byte_size bigint NOT NULL DEFAULT 0,
    requested_by text NOT NULL,
    document_id uuid REFERENCES knowledge.documents(id) ON DELETE SET NULL,
    version integer,
    outcome text,
    conflicts jsonb NOT NULL DEFAULT '[]'::jsonb,
    error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE INDEX ingest_jobs_site ON knowledge.ingest_jobs (site_domain, created_at DESC);

ALTER TABLE knowledge.document_conflicts
    ADD COLUMN a_text_hash text, ADD COLUMN a_start integer, ADD COLUMN a_end integer,
    ADD COLUMN b_text_hash text, ADD COLUMN b_start integer, ADD COLUMN b_end integer;
ALTER TABLE knowledge.documents ADD COLUMN created_by text;
""")
    op.execute(tenant_isolation_sql("knowledge.ingest_jobs"))


def downgrade() -> None:
    op.execute("""
ALTER TABLE knowledge.documents DROP COLUMN IF EXISTS created_by;
ALTER TABLE knowledge.document_conflicts
    DROP COLUMN IF EXISTS a_text_hash, DROP COLUMN IF EXISTS a_start, DROP COLUMN IF EXISTS a_end,
    DROP COLUMN IF EXISTS b_text_hash, DROP COLUMN IF EXISTS b_start, DROP COLUMN IF EXISTS b_end;
DROP TABLE IF EXISTS knowledge.ingest_jobs;
DROP TYPE IF EXISTS knowledge.ingest_job_status;
""")
