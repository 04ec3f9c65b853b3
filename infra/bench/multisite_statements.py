"""``gleaner tick --json`` with every SQL statement and transaction counted (``multisite.py --statements``).

Runs the CLI in this process after hooking SQLAlchemy's engine events, and writes to the JSON file named
by ``MULTISITE_STATEMENTS``: statements and transactions in all, and per stage (the topic of the bus message
the thread was handling, or ``-`` outside one) each statement's calls, keyed by its first 90 characters with
literals folded. The tenant guard's statement at each transaction's start (a raw cursor) is not counted: it
is one per transaction.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
import threading
from collections import Counter
from typing import Any

COUNTS: Counter[tuple[str, str]] = Counter()
TRANSACTIONS: Counter[str] = Counter()
LOCK = threading.Lock()
STAGE = threading.local()
_LITERALS = re.compile(r"'[^']*'|\b\d+\b|\(\s*%s(?:\s*,\s*%s)*\s*\)|\s+")


def _key(statement: str) -> str:
    return _LITERALS.sub(lambda m: " " if m.group().isspace() else "?", statement)[:90]


def install() -> None:
    import sqlalchemy as sa
    from sqlalchemy.engine import Engine

    from gleaner.bus.local import LocalBus

    def executed(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        stage = getattr(STAGE, "topic", "-")
        with LOCK:
            COUNTS[(stage, _key(statement))] += 1

    def began(conn: Any) -> None:
        with LOCK:
            TRANSACTIONS[getattr(STAGE, "topic", "-")] += 1

    sa.event.listen(Engine, "before_cursor_execute", executed)
    sa.event.listen(Engine, "begin", began)
    dispatch = LocalBus._dispatch

    def traced(self: LocalBus, message: Any, attempts: int) -> None:
        STAGE.topic = message.topic
        try:
            dispatch(self, message, attempts)
        finally:
            STAGE.topic = "-"

    LocalBus._dispatch = traced  # type: ignore[method-assign]


def dump() -> None:
    stages: dict[str, Any] = {}
    for (stage, key), n in COUNTS.most_common():
        stages.setdefault(stage, {})[key] = n
    with open(os.environ["MULTISITE_STATEMENTS"], "w") as out:
        json.dump({"statements": sum(COUNTS.values()), "transactions": sum(TRANSACTIONS.values()),
                   "transactions_by_stage": dict(TRANSACTIONS), "by_stage": stages}, out)


def main() -> None:
    atexit.register(dump)
    try:
        from gleaner.runtime.earlystart import start_database
    except ImportError:
        pass
    else:
        start_database(sys.argv[1:])
    from gleaner.cli import main as cli

    install()
    cli.main(sys.argv[1:], prog_name="gleaner")


if __name__ == "__main__":
    main()
