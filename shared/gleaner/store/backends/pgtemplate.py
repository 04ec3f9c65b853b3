"""A new embedded data dir starts as a copy of a migrated cluster, not from initdb.

``initdb`` and the migrations are most of a first command's start on a new data dir (the benchmark's
first crawls, every test that makes a ``GLEANER_HOME``, a user's first ``gleaner crawl``). They give
the same cluster every time for one PostgreSQL build and one set of migrations, so the first new data
dir builds it once into a per-user cache (``GLEANER_PG_TEMPLATE_DIR``; ``off`` turns this off) and
every later one copies it.

What makes this safe:

- the template is keyed by the pgserver build, the migration files' contents and the user the server
  runs as: another version of either builds its own, and a data dir never starts at a schema other
  than its code's head (the schema check upgrades it as before when the code moves on);
- it is built in a directory of its own, stopped cleanly, then renamed into place: a template exists
  whole or not at all, and processes building it at once each keep their own or discard it;
- a data dir is copied into a sibling directory, every file and directory is fsynced (what initdb does
  before it returns), and only then is it renamed onto the empty ``pg`` directory: a crash leaves no
  half-copied cluster that PostgreSQL would be started on;
- whatever fails (no cache dir, a full disk) is logged and the data dir is made by initdb as before.

Copies of one template share PostgreSQL's system identifier (what physical replication and WAL
archives tell clusters apart by); an embedded data dir is neither replicated nor archived.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path

import sqlalchemy as sa

from gleaner.store.backends.db import MIGRATIONS_DIR, _pg8000_url, upgrade

log = logging.getLogger(__name__)

# Left behind by the server that built the template, or per data dir: not copied.
_NOT_COPIED = frozenset({"log", ".handle_pids.json", "postmaster.pid", "postmaster.opts"})
# Templates kept beside the newest (other worktrees, other versions of Gleaner); older ones are deleted.
KEEP_TEMPLATES = 3
_SYNC_THREADS = 8
STALE_BUILD_SECONDS = 3600.0


def template_key() -> str:
    """What the template depends on: the PostgreSQL build (pgserver's version), the migrations, the user."""
    digest = hashlib.sha256()
    for path in sorted((MIGRATIONS_DIR / "versions").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update((MIGRATIONS_DIR / "env.py").read_bytes())
    return f"pgserver-{version('pgserver')}-uid{os.geteuid()}-{digest.hexdigest()[:16]}"


def seed(pgdata: Path, templates: Path) -> bool:
    """Make the empty ``pgdata`` a copy of the migrated template (built first if needed); False if it was not.

    Called before pgserver looks at ``pgdata``; a directory that already holds anything is left to it.
    """
    if _has_entries(pgdata):
        return False
    try:
        template = ensure_template(templates)
        return _copy_into(template, pgdata)
    except Exception as exc:  # any failure: initdb as before
        log.warning("embedded PostgreSQL: could not start %s from a template (%s); running initdb", pgdata, exc)
        log.debug("template failure", exc_info=True)
        return False


def ensure_template(templates: Path) -> Path:
    """The migrated template for this code, built now if the cache has none."""
    template = templates / template_key()
    if (template / "PG_VERSION").exists():
        _touch(template)
        return template
    templates.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".build-", dir=templates))
    try:
        _build(build / "pg")
        try:
            os.rename(build / "pg", template)
        except OSError:
            if not (template / "PG_VERSION").exists():  # not another process's template: a real failure
                raise
    finally:
        shutil.rmtree(build, ignore_errors=True)
    log.info("embedded PostgreSQL: built the template %s", template)
    _forget_old(templates, template)
    return template


def _build(pgdata: Path) -> None:
    """initdb, start, migrate to head and stop a cluster at ``pgdata``, as pgserver and the schema check would."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pgserver

        server = pgserver.get_server(pgdata, cleanup_mode="stop")
    try:
        url, connect_args = _pg8000_url(server.get_uri())
        engine = sa.create_engine(url, connect_args=connect_args, poolclass=sa.pool.NullPool)
        try:
            upgrade(engine)
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("ALTER SYSTEM SET wal_recycle = off")  # see embedded._unlink_spent_wal
        finally:
            engine.dispose()
    finally:
        server.cleanup()  # pg_ctl stop: the cluster is shut down cleanly before it is copied
        atexit.unregister(server._cleanup)
    for name in _NOT_COPIED:
        (pgdata / name).unlink(missing_ok=True)


def _copy_into(template: Path, pgdata: Path) -> bool:
    """Copy the template beside ``pgdata``, fsync it, and rename it onto the empty ``pgdata``.

    Under pgserver's inter-process lock, which it holds around initdb and a server's start: no other
    process is initialising this data dir or starting a server on it meanwhile.
    """
    from pgserver.postgres_server import PostgresServer

    with PostgresServer._lock:
        if _has_entries(pgdata):
            return False
        for stale in pgdata.parent.glob(f".{pgdata.name}.seeding-*"):  # a copy a killed process left
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{pgdata.name}.seeding-", dir=pgdata.parent))
        try:
            _copy_tree(template, staging)
            pgdata.rmdir()  # the empty directory the caller made
            os.rename(staging, pgdata)
            _fsync(pgdata.parent)
            return True
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _copy_tree(template: Path, staging: Path) -> None:
    """Every file and directory of the template, with its mode and owner, each fsynced."""
    owner = _owner(template)
    files: list[tuple[Path, Path]] = []
    directories = [(template, staging)]
    for root, dirs, names in os.walk(template):
        source_dir = Path(root)
        target_dir = staging / source_dir.relative_to(template)
        for name in dirs:
            (target_dir / name).mkdir()
            directories.append((source_dir / name, target_dir / name))
        files.extend((source_dir / name, target_dir / name) for name in names if name not in _NOT_COPIED)
    with ThreadPoolExecutor(_SYNC_THREADS) as pool:  # fsync waits on the disk, not the CPU
        list(pool.map(lambda pair: _copy_file(pair[0], pair[1], owner), files))
    for source, target in reversed(directories):
        shutil.copystat(source, target)
        if owner is not None:
            os.chown(target, *owner)
        _fsync(target)


def _copy_file(source: Path, target: Path, owner: tuple[int, int] | None) -> None:
    shutil.copy2(source, target)
    if owner is not None:
        os.chown(target, *owner)
    _fsync(target)


def _owner(template: Path) -> tuple[int, int] | None:
    """As root, copies belong to the template's owner (pgserver runs the server as another user)."""
    if os.geteuid() != 0:
        return None
    stat = template.stat()
    return stat.st_uid, stat.st_gid


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _has_entries(path: Path) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(True for _ in entries)
    except FileNotFoundError:
        return False


def _touch(template: Path) -> None:
    with contextlib.suppress(OSError):  # a read-only cache still serves
        os.utime(template)


def _forget_old(templates: Path, keep: Path) -> None:
    """Delete all but the newest templates, and builds a killed process left an hour ago or more."""
    found = sorted((p for p in templates.iterdir() if p.is_dir() and p != keep and not p.name.startswith(".")),
                   key=lambda p: p.stat().st_mtime, reverse=True)
    stale_builds = [p for p in templates.glob(".build-*") if time.time() - p.stat().st_mtime > STALE_BUILD_SECONDS]
    for old in [*found[KEEP_TEMPLATES - 1:], *stale_builds]:
        shutil.rmtree(old, ignore_errors=True)
