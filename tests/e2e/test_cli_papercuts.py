"""The command line's small failures, as a new operator met them (issue 30): each says what is wrong, in words."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from gleaner.cli import main
from gleaner.cli.base import plain
from gleaner.cli.progress import Progress
from gleaner.errors import InvalidInput
from gleaner.provenance.slices import slice_text_bytes


@pytest.fixture
def env(tmp_path, database_url) -> dict[str, str]:
    return {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "home"),
            "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8"}


def gleaner(env: dict[str, str], *args: str):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_a_reader_that_leaves_the_pipe_early_ends_the_command_quietly(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env["GLEANER_HOME"] = str(tmp_path / "home")
    proc = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "info"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # `| head -0`: the reader is gone before the first line
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and stderr == ""


def test_runs_help_shows_the_listing_options():
    shown = CliRunner().invoke(main, ["runs", "--help"]).stdout
    for option in ("--urls", "--status", "--limit", "--json", "cancel", "resume"):
        assert option in shown


def test_an_unknown_status_is_an_error_that_names_the_summary_counters(env):
    result = gleaner(env, "runs", "00000000-0000-0000-0000-000000000000", "--urls", "--status", "broken")
    assert result.exit_code == 2
    assert "unknown status 'broken'" in result.stderr and "refused" in result.stderr
    assert "robots-denied" in result.stderr


def test_docs_of_an_unknown_site_fails_with_json_as_without(env):
    for extra in ((), ("--json",)):
        result = gleaner(env, "docs", "nosuch.test", *extra)
        assert result.exit_code == 1 and "no documents for site 'nosuch.test'" in result.stderr
        assert result.stdout == ""


def test_a_rule_cannot_both_skip_and_block(env):
    result = gleaner(env, "rules", "add", "demo.test", "/private/*", "--skip", "--block")
    assert result.exit_code == 2 and "not both" in result.stderr


def test_a_schedule_without_a_unit_is_refused(env):
    result = gleaner(env, "sites", "add", "http://127.0.0.1:9/", "--every", "5")
    assert result.exit_code == 1 and "'5' has no unit: say 5s, 5m, 5h or 5d" in result.stderr
    assert "no sites" in gleaner(env, "sites", "list").output


def test_scrape_of_a_closed_port_says_the_host_did_not_answer(env):
    result = gleaner(env, "scrape", "http://127.0.0.1:1/")
    assert result.exit_code == 1
    assert "the host did not answer" in result.stderr and "robots-unknown" not in result.stderr


def test_a_reversed_slice_says_it_is_reversed():
    with pytest.raises(InvalidInput, match="reversed"):
        slice_text_bytes("h", b"x" * 300, 216, 177, whole_characters=False)


def test_progress_does_not_say_the_same_line_twice(capsys):
    progress = Progress(enabled=True)
    progress.line("mapping: 12 URLs found")
    progress.line("mapping: 12 URLs found")
    assert capsys.readouterr().err.count("URLs found") == 1


def test_values_are_printed_in_words_not_python_reprs():
    assert [plain(v) for v in (None, False, True, (), ("/a/*", "/b/*"), {"new": 0, "changed": 2}, 1.0)] == [
        "-", "no", "yes", "-", "/a/*, /b/*", "new 0, changed 2", "1"]
