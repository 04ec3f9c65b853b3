"""What a command starts before it imports the rest: the embedded database, for the crawling commands.

Importing the commands' modules takes most of a second, and starting the embedded PostgreSQL a good
part of another, mostly waiting for ``pg_ctl``: ``tick``, ``watch`` and ``crawl`` (whose users wait
for their first request) start the server on a thread before those imports, and the command's
database engine takes it over (:func:`gleaner.store.embedded.start_early`). Every other command, and
any command run against another database or the cloud's bus, starts it when it first needs it.
The same commands start the extraction processes' forkserver too (its imports of the extractors
overlap this process's own), and every command ends without the interpreter's last garbage
collection (:func:`end_quickly`). Outside :mod:`gleaner.cli`, whose import is what it overlaps.
"""

from __future__ import annotations

import atexit
import gc
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gleaner.config import Settings

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


def crawling_settings(argv: Sequence[str]) -> Settings | None:
    """The settings of a command that will crawl (None: another command, ``--help``, or unreadable settings)."""
    if command_of(argv) not in CRAWLING or "--help" in argv:
        return None
    try:
        from gleaner.config import Settings
        from gleaner.configfile import layered_env

        return Settings.from_env(layered_env(os.environ, Path.cwd()).env)
    except Exception:  # the command meets the same problem where it reports it properly
        return None


def start_database(argv: Sequence[str], settings: Settings | None = None) -> bool:
    """Start the embedded database now if the command will crawl with it; whether it started."""
    settings = settings or crawling_settings(argv)
    if settings is None or settings.database_url or settings.cloudsql_instance or settings.bus == "gcp":
        return False
    try:
        from gleaner.store.embedded import start_early

        return start_early(settings.data_dir)
    except Exception:  # the command meets the same problem where it reports it properly
        return False


def start_extraction(argv: Sequence[str], settings: Settings | None = None) -> bool:
    """Start the extraction forkserver now if the command will crawl on this machine with a pool of
    processes; whether it started. Its imports (the extractors: most of a second of CPU) then run
    beside this process's own and the database's start, instead of after them, where a site's sample
    waited for them. A command that ends without a pool stops it at exit (the pool's close does otherwise)."""
    settings = settings or crawling_settings(argv)
    if settings is None or settings.bus == "gcp" or (settings.extract_workers or os.cpu_count() or 1) <= 1:
        return False
    try:
        from gleaner.extract import forkserver

        forkserver.start(early=True)
    except Exception:  # the pool starts it when it needs it
        return False
    atexit.register(lambda: forkserver.stop() if forkserver.started_early() else None)
    return True


def end_quickly() -> None:
    """Skip the interpreter's last full garbage collection at exit (call first: exit handlers run last
    registered first, so this runs after every other one).

    Everything a command imported and built lives until the process ends; collecting it at exit only
    scans it (hundreds of thousands of objects after SQLAlchemy's and the pipeline's imports) and
    frees memory the process is about to give back whole. That scan was most of the time between a
    command's last exit handler and its end. Frozen objects are left out of it; handlers and the
    standard streams' flushing run as before."""
    atexit.register(gc.freeze)
