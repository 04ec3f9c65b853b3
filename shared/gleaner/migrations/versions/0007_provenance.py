"""Provenance you can cite: canonicaliser versions, SimHash bands, citations, conflicts, erasure.

Revision ID: 0007
Revises: 0005
Create Date: 2026-11-30

- canonical_texts gains the canonicaliser version that made each text (existing texts were made by
  version 1 and stay valid for it) and its 64-bit SimHash, cut into four indexed 16-bit bands: two
  fingerprints within Hamming distance 3 share a band, so near-duplicates are found without a scan.
- document_snapshots gains source_blake3, the BLAKE3 of the bytes as fetched (seed 004's content hash);
  snapshot_texts.source_blake3 takes it and may be unknown for versions fetched before.
- citations: a quote bound to (document, snapshot, text hash, byte offsets); erasure clears its quote.
- document_conflicts as in the ADR (seed 003), with detectors for exact and near-duplicate content and
  idempotent on (a, b, detector_version).
- erasures and erased_digests: who erased what, when and why, and the per-tenant blocklist of keyed
  HMAC-BLAKE3 digests every path that could bring the content back checks first.
- fetch_outcome gains refused-erased; document_event_type gains conflict.opened (an event per conflict
  opened, through the change-event outbox).
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

ENUMS = {
    "conflict_entity_type": ("document", "composite_document", "knowledge_faq", "skill", "config_value"),
    "conflict_type": ("factual_contradiction", "stale_info", "duplicate", "policy_mismatch"),
    "conflict_severity": ("info", "warn", "error"),
    "conflict_status": ("open", "acknowledged", "resolved", "false_positive"),
    "conflict_detector": ("embedding_diff", "llm_judge", "manual", "content_hash", "simhash"),
}

DDL = """
ALTER TABLE knowledge.canonical_texts
    ADD COLUMN canonicaliser_version smallint NOT NULL DEFAULT 1,
    ADD COLUMN simhash bigint,
    ADD COLUMN simhash_b0 integer,
    ADD COLUMN simhash_b1 integer,
    ADD COLUMN simhash_b2 integer,
    ADD COLUMN simhash_b3 integer;
CREATE INDEX canonical_texts_simhash_b0 ON knowledge.canonical_texts (simhash_b0) WHERE simhash_b0 IS NOT NULL;
CREATE INDEX canonical_texts_simhash_b1 ON knowledge.canonical_texts (simhash_b1) WHERE simhash_b1 IS NOT NULL;
CREATE INDEX canonical_texts_simhash_b2 ON knowledge.canonical_texts (simhash_b2) WHERE simhash_b2 IS NOT NULL;
CREATE INDEX canonical_texts_simhash_b3 ON knowledge.canonical_texts (simhash_b3) WHERE simhash_b3 IS NOT NULL;

ALTER TABLE knowledge.document_snapshots ADD COLUMN source_blake3 text;
ALTER TABLE knowledge.snapshot_texts ALTER COLUMN source_blake3 DROP NOT NULL;

CREATE TABLE knowledge.citations (
    id uuid PRIMARY KEY,
    site_domain text NOT NULL,
    document_id uuid NOT NULL REFERENCES knowledge.documents(id) ON DELETE CASCADE,
    -- RESTRICT: a cited version is pinned (retention never removes it)
    snapshot_id uuid REFERENCES knowledge.document_snapshots(id) ON DELETE RESTRICT,
    version integer NOT NULL,
    text_hash text,
    span_start integer NOT NULL,
    span_end integer NOT NULL,
    quote text,
    created_at timestamptz NOT NULL DEFAULT now(),
    erased_at timestamptz,
    CHECK (0 <= span_start AND span_start < span_end),
    CHECK (erased_at IS NOT NULL OR (snapshot_id IS NOT NULL AND text_hash IS NOT NULL AND quote IS NOT NULL))
);
CREATE INDEX citations_snapshot ON knowledge.citations (snapshot_id);
CREATE INDEX citations_document ON knowledge.citations (document_id);

CREATE TABLE knowledge.document_conflicts (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    site_domain text NOT NULL,
    entity_a_type knowledge.conflict_entity_type NOT NULL,
    entity_a_id uuid,
    entity_a_ref text,
    entity_b_type knowledge.conflict_entity_type NOT NULL,
    entity_b_id uuid,
    entity_b_ref text,
    entity_a_key text GENERATED ALWAYS AS (COALESCE(entity_a_id::text, entity_a_ref)) STORED,
    entity_b_key text GENERATED ALWAYS AS (COALESCE(entity_b_id::text, entity_b_ref)) STORED,
    conflict_type knowledge.conflict_type NOT NULL,
    severity knowledge.conflict_severity NOT NULL DEFAULT 'info',
    evidence_a text,
    evidence_b text,
    details jsonb NOT NULL DEFAULT '{}'::jsonb,
    detected_by knowledge.conflict_detector NOT NULL,
    detector_version text NOT NULL,
    status knowledge.conflict_status NOT NULL DEFAULT 'open',
    resolved_by_user_id uuid,
    resolved_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK (num_nonnulls(entity_a_id, entity_a_ref) = 1),
    CHECK (num_nonnulls(entity_b_id, entity_b_ref) = 1),
    UNIQUE (site_domain, entity_a_type, entity_a_key, entity_b_type, entity_b_key, detector_version)
);
CREATE INDEX document_conflicts_site_status ON knowledge.document_conflicts (site_domain, status, severity);

CREATE TABLE knowledge.erasures (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    site_domain text NOT NULL,
    document_id uuid REFERENCES knowledge.documents(id) ON DELETE SET NULL,
    url_digest text NOT NULL,
    reason text,
    requested_by text NOT NULL,
    erased_at timestamptz NOT NULL DEFAULT now(),
    digest_scheme text NOT NULL,
    digests jsonb NOT NULL,
    removed jsonb NOT NULL
);
CREATE INDEX erasures_site ON knowledge.erasures (site_domain, erased_at DESC);

CREATE TABLE knowledge.erased_digests (
    site_domain text NOT NULL,
    digest text NOT NULL,
    kind text NOT NULL,
    erasure_id uuid NOT NULL REFERENCES knowledge.erasures(id),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (site_domain, digest)
);
"""


def upgrade() -> None:
    for name, values in ENUMS.items():
        labels = ", ".join(f"'{v}'" for v in values)
        op.execute(f"CREATE TYPE knowledge.{name} AS ENUM ({labels})")
    op.execute(DDL)
    op.execute("ALTER TYPE knowledge.fetch_outcome ADD VALUE IF NOT EXISTS 'refused-erased'")
    op.execute("ALTER TYPE knowledge.document_event_type ADD VALUE IF NOT EXISTS 'conflict.opened'")


def downgrade() -> None:
    for table in ("erased_digests", "erasures", "document_conflicts", "citations"):
        op.execute(f"DROP TABLE IF EXISTS knowledge.{table} CASCADE")
    for name in ENUMS:
        op.execute(f"DROP TYPE IF EXISTS knowledge.{name}")
    op.execute("ALTER TABLE knowledge.document_snapshots DROP COLUMN IF EXISTS source_blake3")
    op.execute("ALTER TABLE knowledge.canonical_texts DROP COLUMN IF EXISTS canonicaliser_version,"
               " DROP COLUMN IF EXISTS simhash, DROP COLUMN IF EXISTS simhash_b0, DROP COLUMN IF EXISTS simhash_b1,"
               " DROP COLUMN IF EXISTS simhash_b2, DROP COLUMN IF EXISTS simhash_b3")

