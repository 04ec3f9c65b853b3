"""The crawling commands start the embedded database before importing the CLI; nothing else does."""

from __future__ import annotations

from gleaner.earlystart import command_of, is_gleaner, start_database, start_extraction


def test_the_command_is_the_first_word_after_the_root_options():
    assert command_of(["tick", "--json"]) == "tick"
    assert command_of(["-vv", "--tenant", "tick.example", "crawl", "https://a.example/"]) == "crawl"
    assert command_of(["--tenant=a.example", "watch"]) == "watch"
    assert command_of(["--help"]) is None
    assert command_of([]) is None


def test_only_the_gleaner_program_itself_starts_early():
    assert is_gleaner("/venv/bin/gleaner")
    assert is_gleaner("-m")  # python -m gleaner.cli, while the package is imported
    assert not is_gleaner("/venv/bin/pytest")


def test_nothing_starts_for_other_commands_other_databases_or_a_new_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GLEANER_HOME", str(tmp_path))
    monkeypatch.delenv("GLEANER_DATABASE_URL", raising=False)
    assert not start_database(["sites", "list"])
    assert not start_database(["tick", "--help"])
    assert not start_database(["tick"])  # no data dir yet: the command seeds it from the template cache
    (tmp_path / "pg").mkdir()
    (tmp_path / "pg" / "PG_VERSION").write_text("16\n")
    monkeypatch.setenv("GLEANER_DATABASE_URL", "postgresql://u@127.0.0.1:1/db")
    assert not start_database(["tick"])


def test_a_crawling_command_starts_the_extractors_early_and_its_pool_forks_from_them(tmp_path, monkeypatch):
    from multiprocessing import forkserver as stdlib_forkserver

    import psutil

    from gleaner.extract.pool import ExtractPool

    monkeypatch.setenv("GLEANER_HOME", str(tmp_path))
    monkeypatch.setenv("GLEANER_EXTRACT_WORKERS", "2")
    assert not start_extraction(["sites", "list"])
    assert not start_extraction(["tick", "--help"])
    monkeypatch.setenv("GLEANER_EXTRACT_WORKERS", "1")  # extraction runs in the command's own process
    assert not start_extraction(["tick"])
    assert stdlib_forkserver._forkserver._forkserver_pid is None
    monkeypatch.setenv("GLEANER_EXTRACT_WORKERS", "2")
    assert start_extraction(["tick"])
    server = stdlib_forkserver._forkserver._forkserver_pid
    assert server is not None and psutil.pid_exists(server)
    pool = ExtractPool(workers=2)
    try:
        page = (b"<html><head><title>Early</title></head><body><main><h1>Early</h1><p>A page the workers of"
                b" the early forkserver extract, long enough to be the main content of it.</p></main></body></html>")
        extracted = pool.submit([(page, "utf-8", "http://127.0.0.1/early", "text/html")]).result(timeout=120)
        assert extracted[0].title == "Early"
        assert stdlib_forkserver._forkserver._forkserver_pid == server  # its workers came from the early one
    finally:
        pool.close()
    # The pool never asked for it, yet its close stopped it: nothing holds the command's output open after it.
    assert stdlib_forkserver._forkserver._forkserver_pid is None and not psutil.pid_exists(server)


EXIT = """
import sys
from gleaner.earlystart import end_quickly
if sys.argv[1] == "quick":
    end_quickly()
class Cycle:
    def __del__(self):
        sys.stdout.write("collected at exit")
cycle = Cycle()
cycle.me = cycle
del cycle
"""


def test_a_command_ends_without_the_interpreters_last_full_collection():
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    plain = subprocess.run([sys.executable, "-c", EXIT, "plain"], capture_output=True, text=True, env=env, check=True)
    quick = subprocess.run([sys.executable, "-c", EXIT, "quick"], capture_output=True, text=True, env=env, check=True)
    assert plain.stdout == "collected at exit"  # what the last collection costs: every object is looked at
    assert quick.stdout == ""
