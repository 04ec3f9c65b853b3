"""The embedded PostgreSQL (pgserver) under the data dir: started or joined, and stopped by its last holder.

Apart from :mod:`gleaner.store.backends.db` so that a command can start the server while it imports the rest
(:func:`start_early`): nothing here imports SQLAlchemy.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import time
import warnings
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from gleaner.errors import ConfigError, RetryableError

log = logging.getLogger(__name__)
# platformdirs warns when XDG_RUNTIME_DIR is unset (pgserver asks it for its lock's place). Filtered for
# the process, not only around the start: start_early's thread would race the main thread's own
# catch_warnings blocks, whose exits restore the filters they found.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")

# Servers being started by start_early's thread, by pgdata: embedded_url takes the result over.
_EARLY: dict[Path, Future[str]] = {}
_EARLY_LOCK = threading.Lock()


def start_early(data_dir: Path) -> bool:
    """Start (or join) the embedded server of an existing data dir on a thread of its own, now: the
    command imports its modules meanwhile, and its :func:`embedded_url` takes the result. A new data
    dir is left to embedded_url (it is seeded from the template cache first). Whether it started."""
    pgdata = (data_dir / "pg").resolve()
    if not (pgdata / "PG_VERSION").exists():
        return False
    with _EARLY_LOCK:
        if pgdata in _EARLY:
            return False
        future: Future[str] = Future()
        _EARLY[pgdata] = future

    def start() -> None:
        try:
            future.set_result(_start(pgdata))
        except BaseException as exc:  # embedded_url raises it on the command's own thread
            future.set_exception(exc)

    threading.Thread(target=start, name="gleaner-db-start", daemon=True).start()
    return True


def embedded_url(data_dir: Path, templates: Path | None = None) -> str:
    """Start (or join) the embedded PostgreSQL under data_dir and return its URL.

    A new data dir starts as a copy of the migrated cluster cached under ``templates`` when given
    (:mod:`gleaner.store.backends.pgtemplate`), else pgserver runs initdb.
    """
    pgdata = (data_dir / "pg").resolve()
    with _EARLY_LOCK:
        early = _EARLY.pop(pgdata, None)
    if early is not None:
        try:
            return early.result()
        except Exception:  # started again here: a retry of the caller's is a new attempt, not the same failure
            log.debug("the early start of the embedded PostgreSQL failed; starting it again", exc_info=True)
    pgdata.mkdir(parents=True, exist_ok=True)
    if templates is not None:
        from gleaner.store.backends.pgtemplate import seed

        seed(pgdata, templates)
    return _start(pgdata)


def _start(pgdata: Path) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            import pgserver
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ConfigError("the embedded database needs the 'pgserver' package") from exc
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            wait_while_stopping(pgdata)
            forget_dead_handles(pgdata)
            server = pgserver.get_server(pgdata)
    except Exception as exc:  # pgserver raises bare exceptions from subprocesses
        raise RetryableError(f"embedded PostgreSQL did not start under {pgdata}: {exc}") from exc
    if pgdata not in _STOPPING:
        _STOPPING.add(pgdata)
        atexit.register(stop_if_last, server)  # after pgserver's own handler, so it runs before it
    _unlink_spent_wal(pgdata, server)
    uri: str = server.get_uri()
    return uri


def _unlink_spent_wal(pgdata: Path, server: Any) -> None:
    """Set ``wal_recycle = off`` on the cluster once (kept in ``postgresql.auto.conf``): a WAL segment no
    longer needed is then unlinked rather than renamed ahead for reuse with its old bytes, which no erasure
    scrub (store/scrub.py) could reach. A cluster seeded from a template has it already."""
    try:
        if "wal_recycle" in (pgdata / "postgresql.auto.conf").read_text(encoding="utf-8"):
            return
    except OSError:
        pass
    try:
        server.psql("ALTER SYSTEM SET wal_recycle = off;\nSELECT pg_reload_conf();\n")
    except Exception:  # the scrub sets it too; a start never fails for it
        log.warning("embedded PostgreSQL under %s: wal_recycle not turned off", pgdata, exc_info=True)


# The embedded servers this process stops at exit when it is their last holder (see stop_if_last).
_STOPPING: set[Path] = set()
# How long a fast shutdown may take to begin (at exit) or to end (at the next start).
STOP_SECONDS = 60.0
STOP_POLL_SECONDS = 0.005


def stop_if_last(server: Any) -> None:
    """At exit, stop the embedded server if this process is its last holder, without waiting for it.

    pgserver's handler stops it with ``pg_ctl -w stop``, which waits for the shutdown checkpoint (every
    page the command dirtied written out) and looks for the stopped server only every 100 ms: most of
    the end of a command that wrote much. This sends the same fast shutdown (SIGINT to the postmaster)
    under pgserver's inter-process lock, waits only until the postmaster says it is stopping (its pid
    file's status line, written as it takes the signal), and forgets this process as pgserver would;
    pgserver's handler, which runs next, then has nothing left to do. The postmaster finishes its
    checkpoint on its own (pg_ctl started it detached from this process); a command that starts
    meanwhile waits for it to be gone (:func:`wait_while_stopping`) and starts a new one. Nothing
    committed depends on that checkpoint: it is in the write-ahead log already. Whatever fails here is
    left to pgserver's handler.
    """
    from pgserver.postgres_server import PostgresServer

    try:
        with PostgresServer._lock:  # the lock a joining process takes to add itself
            if server.global_process_id_list.get() != [os.getpid()]:
                return
            process = server.get_postmaster_info().process
            if not process.is_running():
                return
            process.send_signal(signal.SIGINT)
            pid_file = Path(server.pgdata) / "postmaster.pid"
            deadline = time.monotonic() + STOP_SECONDS
            while _status(pid_file) not in (None, STOPPING) and time.monotonic() < deadline:
                time.sleep(STOP_POLL_SECONDS)
            if _status(pid_file) in (None, STOPPING):
                # Forgotten as pgserver's handler would; that handler then leaves the server alone.
                server.global_process_id_list.get_and_remove(os.getpid())
    except Exception:  # pgserver's handler stops it the usual way
        log.debug("stopping the embedded PostgreSQL at exit failed; pgserver's handler stops it", exc_info=True)


# The postmaster's status in its pid file (the 8th line) from its shutdown request until it is gone.
STOPPING = "stopping"


def _status(pid_file: Path) -> str | None:
    """The status line of a postmaster pid file (None: no pid file, so no server)."""
    try:
        lines = pid_file.read_text(encoding="utf-8", errors="replace").split("\n")
    except FileNotFoundError:
        return None
    return lines[7].strip() if len(lines) > 7 else ""


def wait_while_stopping(pgdata: Path) -> bool:
    """Wait for a server that is shutting down (the last command's, :func:`stop_if_last`) to be gone:
    joined, it would refuse every connection. Whether there was one."""
    pid_file = pgdata / "postmaster.pid"
    if _status(pid_file) != STOPPING:
        return False
    try:
        pid = int(pid_file.read_text(encoding="utf-8").split("\n", 1)[0])
    except (OSError, ValueError):
        return False
    deadline = time.monotonic() + STOP_SECONDS
    while _alive(pid) and _status(pid_file) == STOPPING and time.monotonic() < deadline:
        time.sleep(STOP_POLL_SECONDS)
    return True


def forget_dead_handles(pgdata: Path) -> list[int]:
    """Drop the processes that died holding the embedded server from its handle list; their pids.

    pgserver stops the postmaster when the last process holding it exits, counting holders in
    ``pgdata/.handle_pids.json``. A holder killed with SIGKILL never removes itself, so every later
    process sees one holder left, and the postmaster was never stopped again. Pruning dead pids first
    makes this process join the orphan (the running server is reused) and stop it as the last holder.
    """
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList

    handles = DiskList(pgdata / ".handle_pids.json")
    with PostgresServer._lock:  # pgserver's own inter-process lock around the same list
        try:
            pids = handles.get()
        except ValueError:  # a holder killed mid-write: nobody live can be counted on it
            pids = [0]
        dead = [pid for pid in pids if not _alive(pid)]
        if dead:
            handles.put([pid for pid in pids if pid not in dead])
            log.info("embedded PostgreSQL under %s: forgot %d dead holder(s) %s", pgdata, len(dead), dead)
    return dead


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed child its parent has not reaped yet is dead for this purpose."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def restart_if_stopped(data_dir: Path) -> bool:
    """Start this process's embedded server again if it stopped under it (stopped by hand, crashed, killed
    by the OOM killer): a long-lived command (``gleaner serve``) then recovers without another command.
    Whether it was started again. Waits for pgserver's inter-process lock, as every start does."""
    pgdata = (data_dir / "pg").resolve()
    try:
        from pgserver.postgres_server import PostgresServer
    except ImportError:  # pragma: no cover - a dependency of the package
        return False
    server = PostgresServer._instances.get(pgdata)
    if server is None or _postmaster_up(pgdata):
        return False
    with PostgresServer._lock:
        if _postmaster_up(pgdata):  # another command started it meanwhile
            return False
        wait_while_stopping(pgdata)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server.ensure_postgres_running()
        except Exception as exc:  # pgserver raises bare exceptions from subprocesses
            raise RetryableError(f"embedded PostgreSQL did not start again under {pgdata}: {exc}") from exc
        if os.getpid() not in server.global_process_id_list.get():
            server.global_process_id_list.get_and_add(os.getpid())
    log.warning("the embedded PostgreSQL under %s had stopped; started it again", pgdata)
    return True


def _postmaster_up(pgdata: Path) -> bool:
    pid_file = pgdata / "postmaster.pid"
    if _status(pid_file) in (None, STOPPING):
        return False
    try:
        pid = int(pid_file.read_text(encoding="utf-8").split("\n", 1)[0])
    except (OSError, ValueError):
        return False
    return _alive(pid)
