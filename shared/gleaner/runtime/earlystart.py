"""What a command starts before it imports the rest: the embedded database, for the crawling commands.

Importing the commands' modules takes most of a second, and starting the embedded PostgreSQL a good
part of another, mostly waiting for ``pg_ctl``: ``tick``, ``watch`` and ``crawl`` (whose users wait
for their first request) start the server on a thread before those imports, and the command's
database engine takes it over (:func:`gleaner.store.backends.embedded.start_early`). Every other command, and
any command run against another database or the cloud's bus, starts it when it first needs it.
Every command also ends without the interpreter's last garbage collection (:func:`end_quickly`).
Outside :mod:`gleaner.cli`, whose import is what it overlaps.
"""

from __future__ import annotations

import atexit
import gc
import os
from collections.abc import Sequence
from pathlib import Path

CRAWLING = frozenset({"tick", "watch", "crawl"})
# The root group's options that take a value (cli/base.py's main): the command name comes after it.
VALUED = frozenset({"--tenant"})


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named on a ``gleaner`` command line (None: none, or only ``--help``)."""
    args = iter(argv)
    for arg in args:
        if arg in VALUED:
            next(args, None)
        elif arg == "--help":
            return None
        elif not arg.startswith("-"):
            return arg
    return None


def is_gleaner(program: str) -> bool:
    """Whether this process is the ``gleaner`` command (its script, or ``python -m gleaner.cli`` while the
    package is imported), not a program that imports the CLI (a test runner: its arguments are its own)."""
    return Path(program).name in ("gleaner", "-m")


def start_database(argv: Sequence[str]) -> bool:
    """Start the embedded database now if the command will crawl with it; whether it started."""
    if command_of(argv) not in CRAWLING or "--help" in argv:
        return False
    try:
        from gleaner.settings.config import Settings
        from gleaner.settings.configfile import layered_env

        settings = Settings.from_env(layered_env(os.environ, Path.cwd()).env)
        if settings.database_url or settings.cloudsql_instance or settings.bus == "gcp":
            return False
        from gleaner.store.backends.embedded import start_early

        return start_early(settings.data_dir)
    except Exception:  # the command meets the same problem where it reports it properly
        return False


def end_quickly() -> None:
    """Skip the interpreter's last full garbage collection at exit (call it first: exit handlers run
    last registered first, so this one runs after every other).

    Everything a command imported and built lives until the process ends; collecting it at exit only
    scans it (hundreds of thousands of objects after SQLAlchemy's and the pipeline's imports) to free
    memory the process is about to give back whole, and that scan was most of the time between a
    command's last exit handler and its end. Frozen objects are left out of it; the exit handlers
    and the flushing of the standard streams run as before."""
    atexit.register(gc.freeze)
