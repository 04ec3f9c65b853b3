"""The crawling commands start the embedded database before importing the CLI; nothing else does."""

from __future__ import annotations

from gleaner.runtime.earlystart import command_of, is_gleaner, start_database


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


EXIT = """
import sys
from gleaner.runtime.earlystart import end_quickly
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
    assert plain.stdout == "collected at exit"  # the last collection looks at every object the process made
    assert quick.stdout == ""
