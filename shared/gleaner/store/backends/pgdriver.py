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
- Exchanges. pg8000 waits for the server after each of Parse, Bind and Execute (a Sync each), does
  the same for COMMIT and sends BEGIN on its own: a one-statement transaction is ten round trips.
  :func:`_execute_pipelined` sends a statement's messages with one Sync, as libpq does, and
  :func:`_begin_later` sends BEGIN with the transaction's first statement: three round trips.
- Prepared statements. pg8000 sends every statement unnamed, so PostgreSQL parses, analyses, rewrites
  (row-level security's policies included) and plans it at every execution: in a many-site tick, more
  of the server's CPU than the statements' execution. :func:`_execute_pipelined` prepares a statement
  with values under a name the first time a connection runs its text (Parse, Describe) and afterwards
  only binds and executes it; PostgreSQL then plans it per execution for five runs and keeps a generic
  plan when that is no worse (its ``plan_cache_mode = auto``). Row-level security stays per transaction:
  a cached plan records the role and settings it was made under and is remade when they differ, and the
  policies' ``current_setting`` is evaluated when the plan runs. A statement whose result changed shape
  under it (a migration) is refused once, forgotten and prepared afresh (the error is retryable, see
  :mod:`gleaner.store.backends.dberrors`); names are never reused on a connection, and those forgotten (an error,
  the least recently used past :data:`_STATEMENTS_KEPT`) are closed with the connection's next exchange.
- Cut short. If reading the answers is interrupted (Ctrl-C, a timeout), the server's remaining answers
  are still in the socket, and the next transaction on that connection would read them as its own:
  such a connection is closed (:func:`_cut_short`), and the pool replaces it. A server error read to
  its end leaves the connection in step and usable.

The exchange patches replace pg8000 internals of the 1.31 series (pinned in pyproject.toml); under
another version :func:`install` leaves pg8000's own exchanges in place.
"""

from __future__ import annotations

import contextlib
import re
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pg8000.core
import pg8000.legacy
import sqlalchemy as sa
from pg8000.converters import array_out, make_params
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


_EXECUTE_UNNAMED = pg8000.core.CoreConnection.execute_unnamed
_EXECUTE_SIMPLE = pg8000.core.CoreConnection.execute_simple
_ROLLBACK = pg8000.legacy.Connection.rollback
_BEGIN = "begin transaction"  # what pg8000's cursor sends before a transaction's first statement
_PENDING = "_gleaner_begin_pending"  # on the connection: a BEGIN waiting for the transaction's first statement
_EXECUTE = pg8000.core.EXECUTE_MSG
_SYNC = pg8000.core.SYNC_MSG


def _bind(name: bytes, params: tuple[Any, ...], encoding: str) -> bytes:
    """A Bind message's body for statement ``name`` into the unnamed portal, every value as text (pg8000's own
    layout)."""
    out = bytearray(b"\x00" + name + b"\x00\x00\x00" + len(params).to_bytes(2, "big"))
    for value in params:
        if value is None:
            out += b"\xff\xff\xff\xff"
        else:
            data = value.encode(encoding)
            out += len(data).to_bytes(4, "big") + data
    out += b"\x00\x00"
    return bytes(out)


def _execute_pipelined(self: Any, statement: str, vals: Any = (), oids: Any = (), stream: Any = None) -> Any:
    """pg8000's ``execute_unnamed`` in one exchange, through this connection's prepared statement for the
    text (Bind, Execute, Sync), or preparing it first (Parse, Describe) when the connection has none yet."""
    if stream is not None:  # COPY: pg8000's own exchange, after the transaction's BEGIN if that still waits
        if getattr(self, _PENDING, False):
            setattr(self, _PENDING, False)
            _EXECUTE_SIMPLE(self, _BEGIN)
        return _EXECUTE_UNNAMED(self, statement, vals, oids, stream)
    # Everything that can fail in Python first: nothing half-written is left in the socket's buffer.
    encoding = self._client_encoding
    params = make_params(self.py_types, vals)
    prepared: _Prepared | None = None
    key = (statement, tuple(oids))
    cache = _statements(self) if vals else None  # commit and rollback (no values) stay unnamed
    if cache is not None:
        prepared = cache.get(key)
        if prepared is not None:
            cache.move_to_end(key)
    if prepared is not None:
        name = prepared.name
        context = pg8000.core.Context(statement, columns=prepared.columns, input_funcs=prepared.input_funcs)
    else:
        name = _new_name(self) if cache is not None else b""
        parse = bytearray(name + b"\x00" + statement.encode(encoding) + b"\x00" + len(oids).to_bytes(2, "big"))
        for oid in oids:
            parse += (0 if oid == -1 else oid).to_bytes(4, "big", signed=True)
        context = pg8000.core.Context(statement)
    bind = _bind(name, params, encoding)
    if self._sock is None:
        raise pg8000.core.InterfaceError("connection is closed")
    begin = getattr(self, _PENDING, False)
    setattr(self, _PENDING, False)
    closing = getattr(self, _CLOSING, None)
    try:
        if closing:
            setattr(self, _CLOSING, [])
            for old in closing:
                self._send_message(pg8000.core.CLOSE, pg8000.core.STATEMENT + old + b"\x00")
        if begin:
            self._send_message(pg8000.core.PARSE, _BEGIN_PARSE)
            self._send_message(pg8000.core.BIND, _bind(b"", (), encoding))
            pg8000.core._write(self._sock, _EXECUTE)
        if prepared is None:
            self._send_message(pg8000.core.PARSE, parse)
            self._send_message(pg8000.core.DESCRIBE, pg8000.core.STATEMENT + name + b"\x00")
        self._send_message(pg8000.core.BIND, bind)
        pg8000.core._write(self._sock, _EXECUTE)
        pg8000.core._write(self._sock, _SYNC)
        pg8000.core._flush(self._sock)
        self.handle_messages(context)
    except BaseException as exc:
        if cache is not None:
            # Prepared or not (the error may have come after the Parse), the name is closed with the next
            # exchange and the text is prepared afresh next time: a statement the schema changed under
            # ("cached plan must not change result type") mends itself.
            cache.pop(key, None)
            getattr(self, _CLOSING).append(name)
        _cut_short(self, exc, context)
        raise
    if prepared is None and cache is not None:
        cache[key] = _Prepared(name, context.columns, context.input_funcs)
        if len(cache) > _STATEMENTS_KEPT:
            getattr(self, _CLOSING).append(cache.popitem(last=False)[1].name)
    return context


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A statement prepared on one connection: its name and how its rows read (pg8000's Describe answer)."""

    name: bytes
    columns: Any
    input_funcs: Any


_CACHE = "_gleaner_statements"  # on the connection: statement text and oids -> _Prepared, least recent first
_CLOSING = "_gleaner_closing"  # on the connection: names to close with the next exchange
_SERIAL = "_gleaner_serial"
# More than the parameterised texts one process runs (a tick: about 80); each holds the server process's
# memory for its plan. A text built per call (a literal in it) falls out.
_STATEMENTS_KEPT = 200


def _statements(self: Any) -> OrderedDict[tuple[str, tuple[int, ...]], _Prepared]:
    cache = getattr(self, _CACHE, None)
    if cache is None:
        cache = OrderedDict()
        setattr(self, _CACHE, cache)
        setattr(self, _CLOSING, [])
        setattr(self, _SERIAL, 0)
    return cache


def _new_name(self: Any) -> bytes:
    serial = getattr(self, _SERIAL) + 1
    setattr(self, _SERIAL, serial)
    return b"g%d" % serial  # never reused on a connection: a name that failed halfway may still exist


def _read_answers(self: Any, context: Any) -> None:
    """``handle_messages``, closing the connection if they are not all read (see the module docstring)."""
    try:
        self.handle_messages(context)
    except BaseException as exc:
        _cut_short(self, exc, context)
        raise


def _cut_short(self: Any, exc: BaseException, context: Any) -> None:
    """After an exchange raised: close the connection unless it is in step (see the module docstring)."""
    # handle_messages raises the server's error (context.error) only once it read ReadyForQuery.
    if exc is context.error:
        return
    sock, self._sock, usock, self._usock = self._sock, None, self._usock, None
    for closing in (sock, usock):
        if closing is not None:
            with contextlib.suppress(Exception):
                closing.close()


_BEGIN_PARSE = b"\x00" + _BEGIN.encode("ascii") + b"\x00\x00\x00"


def _begin_later(self: Any, statement: str) -> Any:
    """pg8000's ``execute_simple``, except that its BEGIN waits to go with the transaction's first statement."""
    if statement == _BEGIN and not self.autocommit:
        setattr(self, _PENDING, True)
        return pg8000.core.Context(statement)
    context = pg8000.core.Context(statement)
    if not getattr(self, _PENDING, False):
        try:
            self.send_QUERY(statement)
            pg8000.core._flush(self._sock)
            self.handle_messages(context)
        except BaseException as exc:
            _cut_short(self, exc, context)
            raise
        return context
    setattr(self, _PENDING, False)
    # Two queries in one exchange: both answers are read (or the connection closed), nothing left unread.
    first = pg8000.core.Context(_BEGIN)
    try:
        self.send_QUERY(_BEGIN)
        self.send_QUERY(statement)
        pg8000.core._flush(self._sock)
        self.handle_messages(first)
    except BaseException as exc:
        _cut_short(self, exc, first)
        if self._sock is not None:  # BEGIN refused by the server, in step: the statement's answers follow
            _read_answers(self, context)
        raise
    _read_answers(self, context)
    return context


def _rollback(self: Any) -> None:
    """A rollback of a transaction that sent nothing yet: its BEGIN is forgotten (it was never sent)."""
    setattr(self, _PENDING, False)
    _ROLLBACK(self)


def install(engine: Engine) -> None:
    """Every connection of ``engine`` sends list parameters through :func:`array_literal`; pg8000's
    placeholder rewrite is kept per statement text and its statements go in one exchange each (for the
    process: they are pg8000's module function and connection method)."""
    pg8000.legacy.convert_paramstyle = _convert_paramstyle
    if pg8000.__version__.startswith(_PATCHED_SERIES):
        _pipeline_exchanges()

    @sa.event.listens_for(engine, "connect")
    def _register(dbapi_connection: Any, _record: Any) -> None:
        register = getattr(dbapi_connection, "register_out_adapter", None)
        if register is not None:  # pg8000; another driver keeps its own
            register(list, array_literal)


_PATCHED_SERIES = "1.31."  # the internals the exchange patches replace (see the module docstring)


def _pipeline_exchanges() -> None:
    pg8000.core.CoreConnection.execute_unnamed = _execute_pipelined
    pg8000.core.CoreConnection.execute_simple = _begin_later
    pg8000.legacy.Connection.rollback = _rollback
