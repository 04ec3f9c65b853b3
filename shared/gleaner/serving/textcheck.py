"""Whether outside text can be stored: the one check every parser of HTTP input runs before SQL sees it.

PostgreSQL's text type refuses a NUL (SQLSTATE 22P05 / a driver error), and a lone surrogate is no
Unicode at all (JSON may escape one, ``"\\ud800"``; bytes that are not UTF-8 decoded with
``surrogateescape`` become one): both are the caller's bad input, refused as a 400 where the query,
the form or the body is parsed, never a 500 halfway through a transaction.
"""

from __future__ import annotations


def text_problem(value: object) -> str | None:
    """Why a parsed value (JSON, or a query's keys and values) cannot be stored as text, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "contains a NUL character"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "contains a lone surrogate or bytes that are not UTF-8 (not valid Unicode text)"
    return None
