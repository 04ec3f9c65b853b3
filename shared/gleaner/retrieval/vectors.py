"""Vectors into PostgreSQL in binary: a COPY into a temporary table the chunk rows are joined to.

pgvector reads a vector's text form float by float, and the JSON that carried it is parsed first;
its binary form (gleaner.retrieval.prepare.vector_rows) is read as it is. COPY is the one statement
that takes rows in binary through pg8000 (our driver sends parameters as text), so a batch's vectors
go to ``pg_temp.gleaner_new_vectors`` (its session's own: no tenant sees another's), and the
statement that writes the chunks joins them by (text hash, ordinal). The table is created once per
session (IF NOT EXISTS: a transaction that rolled its creation back creates it again) and empties
itself at every commit (ON COMMIT DELETE ROWS), so a pooled connection never carries a batch's
vectors into another transaction. It is created under whichever role the transaction runs as (the
application role, under row-level security); PostgreSQL grants every role temporary tables by
default (PUBLIC's TEMPORARY privilege).
"""

from __future__ import annotations

import struct

import sqlalchemy as sa
from sqlalchemy.engine import Connection

TABLE = "pg_temp.gleaner_new_vectors"
_CREATE = sa.text(f"CREATE TEMPORARY TABLE IF NOT EXISTS {TABLE.split('.')[1]}"
                  " (h text NOT NULL, o int NOT NULL, v public.vector NOT NULL) ON COMMIT DELETE ROWS")
_COPY = f"COPY {TABLE} (h, o, v) FROM STDIN (FORMAT binary)"
# A binary COPY's header (signature, flags, no extension) and trailer (a field count of -1).
_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_TRAILER = struct.pack(">h", -1)


def copy_vectors(conn: Connection, rows: bytes) -> None:
    """Put binary COPY rows (``vector_rows``) in :data:`TABLE`, inside ``conn``'s transaction."""
    conn.execute(_CREATE)
    cursor = conn.connection.cursor()  # the driver's own: COPY needs its stream
    try:
        # One iterable item is one CopyData message: the batch goes in one write.
        cursor.execute(_COPY, stream=[_HEADER + rows + _TRAILER])
    finally:
        cursor.close()
