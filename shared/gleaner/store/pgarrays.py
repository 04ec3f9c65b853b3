"""List parameters as PostgreSQL array literals, escaped by C string methods rather than a loop per character.

The stores pass ids, hashes and outcomes as ``CAST(:x AS uuid[])``, ``text[]`` parameters: several
lists of a batch's pages in every statement of every stage. pg8000 writes a list element by element,
and each string element character by character in Python, so a page's id costs a loop over its 36
characters in every array it appears in. This writer makes the same literal: an element is written
as it is when PostgreSQL's array parser would read it back unchanged (not empty, not ``NULL`` in any
case, no whitespace, braces, comma, quote or backslash), else in double quotes with backslash and
quote escaped. Elements other than strings, integers and None keep pg8000's own conversion.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from pg8000.converters import array_out
from sqlalchemy.engine import Engine

# What makes an unquoted array element mean something else (str.isspace's whitespace, a superset of
# PostgreSQL's, is quoted too: quoting is always safe).
_NEEDS_QUOTES = re.compile(r'[\s{}",\\]')


def _element(value: Any) -> str:
    kind = type(value)
    if kind is str:
        if value and not _NEEDS_QUOTES.search(value) and value.upper() != "NULL":
            return value
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if value is None:
        return "NULL"
    if kind is int:  # not bool, whose type is its own
        return str(value)
    if kind is list:
        return array_literal(value)
    return str(array_out(value))


def array_literal(values: list[Any]) -> str:
    """A list as PostgreSQL's array input syntax (what pg8000 sends for it, made faster)."""
    return "{" + ",".join([_element(v) for v in values]) + "}"


def install_array_writer(engine: Engine) -> None:
    """Every connection of ``engine`` sends list parameters through :func:`array_literal`."""

    @sa.event.listens_for(engine, "connect")
    def _register(dbapi_connection: Any, _record: Any) -> None:
        register = getattr(dbapi_connection, "register_out_adapter", None)
        if register is not None:  # pg8000; another driver keeps its own
            register(list, array_literal)
