"""A client's validation (seed 003's "comment / flag / edit"): remarks on documents, edited composites.

Revision ID: 0047
Revises: 0046
Create Date: 2026-12-05

- document_remarks: a comment or a flag on a document, kept with who made it (the credential) and
  when, and the version it was made on. Tenant-scoped like every table; erasure deletes a document's
  remarks (they may quote it).
- composite_status gains ``edited``: a client's edit of a composite is its next version, in this
  state until validated (the ADR's CK lifecycle: in validation -> edited -> validated).
- document_conflicts: a contradiction is kept once per pair of passages, not once per pair of
  documents. The unique key (two entities, detector version) gains the two quoted passages for rows
  that carry byte ranges (the contradiction detector's): two contradictions between the same two
  documents are two rows, and the same two passages found again (a re-ingest) are none. Rows without
  ranges (the duplicate detector's) keep one per pair of documents.
"""

from alembic import op

from gleaner.store.access.rls import tenant_isolation_sql

revision = "0047"
down_revision = "0046"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TYPE knowledge.composite_status ADD VALUE IF NOT EXISTS 'edited' AFTER 'in_validation'")
    op.execute("""
CREATE TYPE knowledge.remark_kind AS ENUM ('comment', 'flag');
CREATE TABLE knowledge.document_remarks (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    site_domain text NOT NULL,
    document_id uuid NOT NULL REFERENCES knowledge.documents(id) ON DELETE CASCADE,
    snapshot_id uuid REFERENCES knowledge.document_snapshots(id) ON DELETE SET NULL,
    version integer,
    kind knowledge.remark_kind NOT NULL,
    body text NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX document_remarks_document ON knowledge.document_remarks (document_id, created_at);
CREATE INDEX document_remarks_flags ON knowledge.document_remarks (site_domain, created_at) WHERE kind = 'flag';
""")
    op.execute(tenant_isolation_sql("knowledge.document_remarks"))
    op.execute(f"""
{_DROP_PAIR_KEY}
CREATE UNIQUE INDEX document_conflicts_passages ON knowledge.document_conflicts (site_domain, entity_a_type,
    entity_a_key, entity_b_type, entity_b_key, detector_version, {_PASSAGE_A}, {_PASSAGE_B});
""")


def downgrade() -> None:
    # PostgreSQL cannot drop an enum value: ``edited`` stays (no row of an older release uses it).
    op.execute("DROP TABLE IF EXISTS knowledge.document_remarks; DROP TYPE IF EXISTS knowledge.remark_kind;")
    # Back to one row per pair of documents: the earliest of each pair's passages stays.
    op.execute("""
DELETE FROM knowledge.document_conflicts c USING knowledge.document_conflicts k
 WHERE (c.site_domain, c.entity_a_type, c.entity_a_key, c.entity_b_type, c.entity_b_key, c.detector_version)
     = (k.site_domain, k.entity_a_type, k.entity_a_key, k.entity_b_type, k.entity_b_key, k.detector_version)
   AND (k.created_at, k.id) < (c.created_at, c.id);
DROP INDEX IF EXISTS knowledge.document_conflicts_passages;
ALTER TABLE knowledge.document_conflicts ADD UNIQUE (site_domain, entity_a_type, entity_a_key, entity_b_type,
    entity_b_key, detector_version);
""")


# The passages in the key: their hash where the row has byte ranges, else one value for all.
_PASSAGE_A = "(CASE WHEN a_start IS NULL THEN '' ELSE md5(COALESCE(evidence_a, '')) END)"
_PASSAGE_B = "(CASE WHEN b_start IS NULL THEN '' ELSE md5(COALESCE(evidence_b, '')) END)"
# The pair-of-documents key was created unnamed (0007): found by what it is.
_DROP_PAIR_KEY = """
DO $$ DECLARE k text; BEGIN
  SELECT conname INTO k FROM pg_constraint
   WHERE conrelid = 'knowledge.document_conflicts'::regclass AND contype = 'u';
  IF k IS NOT NULL THEN EXECUTE format('ALTER TABLE knowledge.document_conflicts DROP CONSTRAINT %I', k); END IF;
END $$;"""
