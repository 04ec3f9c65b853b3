"""Which database errors are the input's fault (permanent) and which are worth a retry.

::

    SQLSTATE class                         meaning here                      verdict
    22 data exception                      a value PostgreSQL cannot store   permanent (400 / ack)
       (22021 invalid byte sequence, 22P05 untranslatable character, 22001 too long, ...)
    54 program limit exceeded              an input too large to index       permanent
    anything else (08 connection,          the database, not the input      retryable (503 / redeliver)
    40 serialization / deadlock, 53 ...)
"""

from __future__ import annotations

from typing import Any

PERMANENT_CLASSES = frozenset({"22", "54"})


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a driver error (pg8000 puts the server's fields in args[0]), wrapped or not."""
    orig: Any = getattr(exc, "orig", exc)
    fields = orig.args[0] if getattr(orig, "args", None) else None
    if isinstance(fields, dict):
        code = fields.get("C")
        return str(code) if code else None
    return None


def is_permanent(exc: BaseException) -> bool:
    code = sqlstate(exc)
    return code is not None and code[:2] in PERMANENT_CLASSES
