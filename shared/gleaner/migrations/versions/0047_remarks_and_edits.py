"""A client's validation (seed 003's "comment / flag / edit"): remarks on documents, edited composites.

Revision ID: 0047
Revises: 0046
Create Date: 2026-12-05

- document_remarks: a comment or a flag on a document, kept with who made it (the credential) and
  when, and the version it was made on. Tenant-scoped like every table; erasure deletes a document's
  remarks (they may quote it).
- composite_status gains ``edited``: a client's edit of a composite is its next version, in this
  state until validated (the ADR's CK lifecycle: in validation -> edited -> validated).
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


def downgrade() -> None:
    # PostgreSQL cannot drop an enum value: ``edited`` stays (no row of an older release uses it).
    op.execute("DROP TABLE IF EXISTS knowledge.document_remarks; DROP TYPE IF EXISTS knowledge.remark_kind;")
