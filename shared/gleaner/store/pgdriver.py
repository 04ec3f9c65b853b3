"""What pg8000 does in Python for every statement, done cheaper: list parameters and placeholders.

- List parameters. The stores pass ids, hashes and outcomes as ``CAST(:x AS uuid[])``, ``text[]``
  parameters: several lists of a batch's pages in every statement of every stage. pg8000 writes a
  list element by element, and each string element character by character in Python, so a page's id
  costs a loop over its 36 characters in every array it appears in. :func:`array_literal` makes the
  same literal: an element is written as it is when PostgreSQL's array parser would read it back
  unchanged (not empty, not ``NULL`` in any case, no whitespace, braces, comma, quote or backslash),
  else in double quotes with backslash and quote escaped. Elements other than strings, integers and
  None keep pg8000's own conversion.
- Placeholders. pg8000 rewrites a statement's ``%s`` placeholders to ``$1``… with a Python loop over
  every character of its text, at every execution (a quarter of a millisecond for ingest's
  statement). With positional placeholders the rewrite depends on the text alone, so it is kept per
  text (:func:`_positional`); named placeholders go through pg8000 as before.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import pg8000.legacy
import sqlalchemy as sa
from pg8000.converters import array_out
from sqlalchemy.engine import Engine

_CONVERT = pg8000.legacy.convert_paramstyle  # pg8000's own, for named placeholders and the first rewrite
_POSITIONAL = frozenset({"format", "qmark", "numeric"})  # the values go in as given: the text alone decides

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


@lru_cache(maxsize=1024)  # the stores' statements are a few hundred constant texts
def _positional(style: str, query: str) -> str:
    return str(_CONVERT(style, query, ())[0])


def _convert_paramstyle(style: str, query: str, args: Any) -> tuple[str, Any]:
    if style in _POSITIONAL:
        return _positional(style, query), args
    return _CONVERT(style, query, args)


def install(engine: Engine) -> None:
    """Every connection of ``engine`` sends list parameters through :func:`array_literal`; pg8000's
    placeholder rewrite is kept per statement text (for the process: it is pg8000's module function)."""
    pg8000.legacy.convert_paramstyle = _convert_paramstyle

    @sa.event.listens_for(engine, "connect")
    def _register(dbapi_connection: Any, _record: Any) -> None:
        register = getattr(dbapi_connection, "register_out_adapter", None)
        if register is not None:  # pg8000; another driver keeps its own
            register(list, array_literal)
