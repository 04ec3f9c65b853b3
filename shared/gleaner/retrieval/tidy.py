"""The word index tidied off the search's path: its pending list merged, its statistics and dead rows.

The word index (GIN over ``text_chunks.tsv``) takes ingest's new entries into a pending list, which
every word search reads whole until it is merged into the index (at 4 MB, by the insert that fills
it, or by VACUUM): right after a first crawl, searches were several times slower than once it was
merged (docs/retrieval.md has the figures). :func:`tidy_words` merges it, and takes ``tsv``'s
statistics again once the table has grown by a tenth since they were taken (the word function reads
common words' counts from them): ``gleaner crawl``, ``demo`` and ``tick`` call it when their runs
end, and the idle merger and the cloud's job too.

A merge (gleaner.retrieval.fresh) rewrites every row it moves: each leaves a dead version, and the
word index a new entry, until VACUUM, and searches are slower until then. Autovacuum gets there on a
server that stays up, but the embedded server stops with each command: :func:`vacuum_chunks` runs
after every merge that moved rows.

Both need the table's owner (the migration role): where the login role is not the owner (a Cloud SQL
IAM user beside the migrating role) they are left to autovacuum. A failure is logged, never raised:
the index is correct either way.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.errors import GleanerError
from gleaner.store.access.rls import ADMIN_OPTION

log = logging.getLogger(__name__)

_CLEAN_PENDING = sa.text("SELECT gin_clean_pending_list(CAST('knowledge.text_chunks_tsv' AS regclass))")
_OWNER = sa.text("SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c"
                 " WHERE c.oid = CAST('knowledge.text_chunks_tsv' AS regclass)")
# As autovacuum's own threshold (50 rows and a tenth of the table); a never analysed table counts as grown.
_STALE_STATISTICS = sa.text(
    "SELECT s.n_mod_since_analyze > 50 + 0.1 * GREATEST(c.reltuples, 0)"
    " OR (s.last_analyze IS NULL AND s.last_autoanalyze IS NULL) FROM pg_stat_user_tables s"
    " JOIN pg_class c ON c.oid = s.relid WHERE s.relid = CAST('knowledge.text_chunks' AS regclass)")


def tidy_words(engine: Engine) -> None:
    """Merge the word index's pending entries and, when ``text_chunks`` grew by a tenth, analyse its
    words. As the tables' owner (the migration role; where the login role is not the owner, nothing):
    neither is the application role's to do; no tenant's rows are read. A failure is logged, never
    raised: the index is correct either way."""
    try:
        with engine.execution_options(**{ADMIN_OPTION: True}).begin() as conn:
            if not conn.execute(_OWNER).scalar():
                return
            conn.execute(_CLEAN_PENDING)
            if conn.execute(_STALE_STATISTICS).scalar():
                conn.execute(sa.text("ANALYZE knowledge.text_chunks (tsv)"))
    except (sa.exc.SQLAlchemyError, GleanerError) as exc:
        log.warning("tidying the word index failed (%s); searches read its pending entries until it is", exc)


def vacuum_chunks(engine: Engine) -> None:
    """VACUUM ``text_chunks`` as its owner (nothing where the login role is not): after a merge. Not
    ANALYZE: a merge changes no word, and new statistics would change the word side's numbers."""
    try:
        with engine.connect().execution_options(**{ADMIN_OPTION: True}) as conn:
            owner = conn.execute(_OWNER).scalar()
            conn.commit()
            if owner:
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM knowledge.text_chunks")
    except (sa.exc.SQLAlchemyError, GleanerError) as exc:
        log.warning("vacuuming the chunks after a merge failed (%s); autovacuum will", exc)
