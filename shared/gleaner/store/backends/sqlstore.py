"""What every part of the metadata repository shares: the engine, one transaction a call, JSON parameters.

``MetadataStore`` (metadata.py) is composed of classes over this base, one module
per concern; each method opens its own short transaction through ``_tx``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine


def json_value(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


T = TypeVar("T")

# Rows per statement where a run's rows (one per URL) go in as one JSON parameter: the rows, their JSON
# and the driver's copy of it are held at once, so a large run is written in slices (one transaction).
ROWS_PER_STATEMENT = 5000


def statement_slices(rows: Iterable[T]) -> Iterator[list[T]]:
    """``rows`` a statement's worth (:data:`ROWS_PER_STATEMENT`) at a time; a caller may make them as they
    are written."""
    rows = iter(rows)
    while chunk := list(islice(rows, ROWS_PER_STATEMENT)):
        yield chunk


def json_rows(rows: list[dict[str, Any]]) -> str:
    """Rows for ``json_to_recordset``: one parameter however many rows, encoded in C."""
    return json.dumps(rows, separators=(",", ":"), ensure_ascii=False)


# The helpers' statements are a few hundred constant strings: building a TextClause parses its bind
# parameters with a regular expression each time, so each string's clause is built once (they are immutable).
text = functools.lru_cache(maxsize=1024)(sa.text)


class SqlStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _tx(self) -> Any:
        return self.engine.begin()

    def _run(self, sql: str, params: Mapping[str, Any] | None = None) -> int:
        """One write in a transaction of its own; the rows it touched."""
        with self.engine.begin() as conn:
            return int(conn.execute(text(sql), dict(params or {})).rowcount or 0)

    def _all(self, sql: str, params: Mapping[str, Any] | None = None) -> Sequence[Any]:
        """Every row of one read, on a connection of its own."""
        with self.engine.connect() as conn:
            return conn.execute(text(sql), dict(params or {})).all()

    def _each(self, sql: str, params: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """The rows of one read one at a time, on a connection of its own: a caller that turns each row
        into something else does not hold every row and every result at once."""
        with self.engine.connect() as conn:
            yield from conn.execute(text(sql), dict(params or {}))

    def _first(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        """The first row of one read (None if there is none), on a connection of its own.

        Rows are typed Any: the statements are text, so SQLAlchemy knows no column types anyway."""
        with self.engine.connect() as conn:
            return conn.execute(text(sql), dict(params or {})).first()

    def _scalar(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        """The first column of the first row of one read (None if there is none)."""
        with self.engine.connect() as conn:
            return conn.execute(text(sql), dict(params or {})).scalar()

    def _write_first(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        """One statement in a transaction of its own; the first row it returns (None if none)."""
        with self._tx() as conn:
            return conn.execute(text(sql), dict(params or {})).first()

    def _write_all(self, sql: str, params: Mapping[str, Any] | None = None) -> Sequence[Any]:
        """One statement in a transaction of its own; every row it returns."""
        with self._tx() as conn:
            return conn.execute(text(sql), dict(params or {})).all()

    def _write_scalar(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        """One statement in a transaction of its own; the first column of its first row (None if none)."""
        with self._tx() as conn:
            return conn.execute(text(sql), dict(params or {})).scalar()
