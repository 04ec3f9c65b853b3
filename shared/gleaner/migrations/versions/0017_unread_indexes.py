"""Indexes a crawl writes for every page and no query reads: dropped, or narrowed to the rows they serve.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-30

- ``documents_site_url_hash``: no statement looks a document up by its URL hash (by URL it is
  ``documents_site_canonical_url``, by id the primary key); every new document and every update that
  cannot stay on its page wrote an entry into it.
- ``document_snapshots``' three indexes on ``composite_document_id`` (its two UNIQUE constraints and
  ``document_snapshots_composite_version``) indexed every page version too, under a NULL key that no
  lookup asks for. They now hold composite versions only: partial unique indexes keep the same
  uniqueness (NULLs never conflicted), and a lookup by a composite's id implies the predicate.
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

COMPOSITE = "composite_document_id IS NOT NULL"


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS knowledge.documents_site_url_hash")
    op.execute(f"""
ALTER TABLE knowledge.document_snapshots
    DROP CONSTRAINT document_snapshots_composite_document_id_content_hash_key,
    DROP CONSTRAINT document_snapshots_composite_document_id_version_key;
CREATE UNIQUE INDEX document_snapshots_composite_content_hash
    ON knowledge.document_snapshots (composite_document_id, content_hash) WHERE {COMPOSITE};
CREATE UNIQUE INDEX document_snapshots_composite_version_unique
    ON knowledge.document_snapshots (composite_document_id, version) WHERE {COMPOSITE};
DROP INDEX knowledge.document_snapshots_composite_version;
CREATE INDEX document_snapshots_composite_version
    ON knowledge.document_snapshots (composite_document_id, version DESC) WHERE {COMPOSITE};
""")


def downgrade() -> None:
    op.execute("""
DROP INDEX knowledge.document_snapshots_composite_version;
CREATE INDEX document_snapshots_composite_version ON knowledge.document_snapshots (composite_document_id, version DESC);
DROP INDEX knowledge.document_snapshots_composite_version_unique;
DROP INDEX knowledge.document_snapshots_composite_content_hash;
ALTER TABLE knowledge.document_snapshots
    ADD CONSTRAINT document_snapshots_composite_document_id_content_hash_key
        UNIQUE (composite_document_id, content_hash),
    ADD CONSTRAINT document_snapshots_composite_document_id_version_key UNIQUE (composite_document_id, version);
CREATE INDEX documents_site_url_hash ON knowledge.documents (site_domain, url_hash);
""")
