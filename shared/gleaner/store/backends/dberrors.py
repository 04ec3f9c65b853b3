"""The database boundary: SQLAlchemy / DBAPI errors become Gleaner's error tree, once, for every caller.

Every engine Gleaner builds (``db.create_engine``, ``db.cloudsql_engine``, a test's override through
``Deps``) gets :func:`guard_engine`, so a store class, a module function handed ``meta.engine`` and a
migration all raise the same errors, whoever wrote the query::

    what the driver reports                                   becomes
    connection lost / refused, network error (is_disconnect)  RetryableError   the server restarts
    SQLSTATE 08*   connection exception                       RetryableError
    SQLSTATE 40001 serialization failure, 40P01 deadlock      RetryableError   run the transaction again
    SQLSTATE 57P01-57P03 admin / crash shutdown, starting up  RetryableError
    SQLSTATE 53*   insufficient resources (too many conns)    RetryableError
    SQLSTATE 55P03 lock not available, 57014 query canceled   RetryableError
    SQLSTATE 58*   system / I/O error on the server           RetryableError
    SQLSTATE 0A000 "cached plan must not change result type"  RetryableError   a migration changed a table under a
                                                                               statement prepared before it (the
                                                                               driver prepares it afresh)
    anything else (22* data, 23* integrity, 42* a bug, ...)   PermanentError   retrying gives the same answer

Of the permanent ones, SQLSTATE classes 22 (data exception: a value PostgreSQL cannot store) and 54
(program limit: an input too large to index) are the *input's* fault: an HTTP caller gets a 400
for them (:func:`is_permanent`), never a "retry later".

Both keep the original as ``__cause__`` (shown with ``-vv``). A ping before checkout is left alone:
SQLAlchemy answers a failed ping by reconnecting, which is what we want.

Connecting waits out a restart: once the process has reached the database, a refused connection is
retried with backoff for up to ``wait_seconds`` before it is reported, so a restart of a few
seconds costs the callers a pause. A database never reached is reported at once (a wrong URL
should say so immediately).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gleaner.errors import GleanerError, PermanentError, RetryableError
from gleaner.store.backends import outage

log = logging.getLogger(__name__)

T = TypeVar("T")

_RETRYABLE_STATES = ("40001", "40P01", "57P01", "57P02", "57P03", "55P03", "57014")
_RETRYABLE_CLASSES = ("08", "53", "58")


class DatabaseUnavailable(RetryableError):
    """The database could not be reached or gave up on a transaction that may succeed if run again."""


class DatabaseRefused(PermanentError):
    """The database refused the statement for good (bad data, a constraint, a schema mismatch)."""


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a pg8000 error (its first argument is the server's error fields), if any; for a
    translated error (DatabaseRefused / DatabaseUnavailable), that of the driver error it came from."""
    orig = getattr(exc, "orig", exc)
    for arg in getattr(orig, "args", ()):
        if isinstance(arg, dict) and isinstance(arg.get("C"), str):
            return str(arg["C"])
    cause = exc.__cause__
    return sqlstate(cause) if cause is not None and cause is not exc else None


# The SQLSTATE classes in which the input, not the database or the code, is at fault.
PERMANENT_CLASSES = frozenset({"22", "54"})


def is_permanent(exc: BaseException) -> bool:
    """Whether the database refused the input itself (a caller's 400), whatever wraps the driver error."""
    state = sqlstate(exc)
    return state is not None and state[:2] in PERMANENT_CLASSES


def is_transient(exc: BaseException, is_disconnect: bool = False) -> bool:
    if is_disconnect or isinstance(exc, sa.exc.InterfaceError | sa.exc.OperationalError):
        return True
    state = sqlstate(exc)
    if state is None:
        # No server answer at all (pg8000's "network error", a closed socket): the connection is gone.
        return isinstance(exc, sa.exc.DBAPIError) and not isinstance(exc, sa.exc.DatabaseError)
    return state in _RETRYABLE_STATES or state[:2] in _RETRYABLE_CLASSES or (
        state == _FEATURE_NOT_SUPPORTED and _STALE_PLAN in describe(exc))


# pgdriver keeps a statement prepared per connection; after a migration changed the shape of its result,
# PostgreSQL refuses it once with this error, and the driver forgets it: the next attempt prepares it again.
_FEATURE_NOT_SUPPORTED = "0A000"
_STALE_PLAN = "cached plan must not change result type"


def describe(exc: BaseException) -> str:
    """One line: the driver's message without SQLAlchemy's statement and background link."""
    orig = getattr(exc, "orig", None) or exc
    fields = next((a for a in getattr(orig, "args", ()) if isinstance(a, dict)), None)
    text = str(fields.get("M", orig)) if fields else str(orig)
    state = sqlstate(exc)
    first = text.splitlines()[0] if text else type(orig).__name__
    return f"{first[:300]} (SQLSTATE {state})" if state else first[:300]


def translate(exc: BaseException, is_disconnect: bool = False) -> GleanerError:
    if is_transient(exc, is_disconnect):
        return DatabaseUnavailable(f"database error: {describe(exc)}; retrying may help")
    return DatabaseRefused(f"database error: {describe(exc)}")


def quiet_driver_logs() -> None:
    """Silence the database library's own logging: its pool logs a multi-line traceback when it drops a
    connection the server closed (a restart), which Gleaner reports in one line and retries."""
    logging.getLogger("sqlalchemy").setLevel(logging.CRITICAL)


def _translate(context: Any) -> BaseException | None:
    if context.is_pre_ping:  # SQLAlchemy reconnects after a failed ping, unless the error is replaced
        return None
    original = context.sqlalchemy_exception or context.original_exception
    if isinstance(context.original_exception, OSError):  # the driver let a socket error through unwrapped
        outage.unreachable(context.original_exception)
        return DatabaseUnavailable(f"database error: {context.original_exception}; retrying may help")
    if not isinstance(original, sa.exc.DBAPIError | context.dialect.loaded_dbapi.Error):
        return None
    translated = translate(original, context.is_disconnect)
    if isinstance(translated, DatabaseUnavailable) and (context.is_disconnect or sqlstate(original) is None):
        outage.unreachable(original)  # the connection is gone: an outage until a connect succeeds again
    return translated


def _ping_reports_socket_errors(engine: Engine) -> None:
    """A ping that meets a reset socket says "disconnected", so the pool reconnects.

    pg8000 lets a ``ConnectionResetError`` out of a read unwrapped; SQLAlchemy's ping only treats the
    driver's own errors as a lost connection, so a restart's reset would escape the checkout.
    """
    dialect = engine.dialect
    ping = dialect.do_ping

    def do_ping(dbapi_connection: Any) -> bool:
        try:
            return bool(ping(dbapi_connection))
        except OSError as exc:
            raise dialect.loaded_dbapi.InterfaceError(f"network error: {exc}") from exc

    dialect.do_ping = do_ping  # type: ignore[method-assign]


def guard_engine(engine: Engine, wait_seconds: float = 30.0) -> Engine:
    """Install the translation and the patient connect on an engine (once; returns the engine)."""
    if sa.event.contains(engine, "handle_error", _translate):
        return engine
    sa.event.listen(engine, "handle_error", _translate, retval=True)
    _ping_reports_socket_errors(engine)

    reached = threading.Event()

    def connect(dialect: Any, cargs: Any, cparams: Any) -> Any:
        try:
            return dialect.connect(*cargs, **cparams)
        except OSError as exc:
            # pg8000 lets a socket error of its first write out unwrapped (a server going down between
            # accept and startup answers EPIPE). SQLAlchemy translates only the driver's own errors at
            # connect; anything else escaped the retries, and click ends a BrokenPipeError silently.
            raise dialect.loaded_dbapi.InterfaceError(f"network error: {exc}") from exc

    outage.LIMIT[0] = wait_seconds

    def attempt(dialect: Any, cargs: Any, cparams: Any) -> Any:
        try:
            return connect(dialect, cargs, cparams)
        except dialect.loaded_dbapi.Error as exc:
            outage.unreachable(exc)
            raise

    @sa.event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        # The wait is the process's (gleaner.store.backends.outage): a connection made late in an outage waits only
        # what is left of it, so a crawl gives up after about wait_seconds, not that many times over.
        connection = patiently(lambda: attempt(dialect, cargs, cparams), dialect.loaded_dbapi.Error,
                               outage.wait_left(wait_seconds) if reached.is_set() else 0.0)
        outage.reached()
        reached.set()
        return connection

    return engine


def patiently(connect: Callable[[], T], errors: type[BaseException] | tuple[type[BaseException], ...],
              wait_seconds: float) -> T:
    """Call ``connect``; on ``errors`` retry with backoff until ``wait_seconds`` have passed."""
    deadline = time.monotonic() + wait_seconds
    delay = 0.25
    while True:
        try:
            return connect()
        except errors as exc:
            if time.monotonic() + delay > deadline:
                raise
            log.info("database unreachable (%s); trying again in %.2gs", exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 4.0)


def again_on_transient(call: Callable[[], T], attempts: int = 4, first_delay: float = 0.5) -> T:
    """Run one idempotent store call, again after a retryable error (backoff) up to ``attempts`` times.

    For writes that follow work too costly to repeat (a scrape batch's fetches): the bus would
    redeliver the whole message, and the site would be asked for every page again.
    """
    delay = first_delay
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except RetryableError as exc:
            if attempt == attempts:
                raise
            # Quiet while the database is down: the command's one error line says so if it stays down.
            log.log(logging.INFO if outage.down_for() is not None else logging.WARNING,
                    "store call failed (%s); trying again in %.2gs", exc, delay)
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover
