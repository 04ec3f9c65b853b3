"""The README's everyday loop, run as written (issue 44): each `gleaner` line of its first block, in
a real process, in order, up to the lines that reach outside this machine (Slack, search's model,
other sites). Only the demo's port is a free one instead of 8471 (tests run side by side).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from .test_first_hour import clean_env, free_port, gleaner

README = Path(__file__).resolve().parents[2] / "README.md"
# Where the loop reaches outside this machine: the lines from here on are not run.
STOP = re.compile(r"^gleaner (notify add 'slack|search |crawl https://)")


def loop_lines() -> list[str]:
    blocks = [b.split("```", 1)[0] for b in README.read_text().split("```sh\n")[1:]]
    block = next(b for b in blocks if b.startswith("gleaner demo"))
    lines = []
    for raw in block.splitlines():
        line = raw.split("  #", 1)[0].strip()
        if not line.startswith("gleaner "):
            continue
        if STOP.match(line):
            break
        lines.append(line)
    return lines


def test_the_readme_loop_runs_as_written_and_its_diff_shows_a_change(tmp_path, database_url):
    env = clean_env(GLEANER_DATABASE_URL=database_url, GLEANER_HOME=str(tmp_path / "home"),
                    GLEANER_EXTRACT_WORKERS="1")
    port = str(free_port())
    lines = loop_lines()
    assert lines[0] == "gleaner demo" and any(line.startswith("gleaner diff") for line in lines)
    outputs: dict[str, str] = {}
    for line in lines:
        args = shlex.split(line.replace("8471", port))[1:]
        if args[0] == "demo":
            args += ["--port", port]
        if "RUN_ID" in args:
            run_id = json.loads(gleaner(env, "runs", "--json", cwd=tmp_path).stdout)[0]["run_id"]
            args = [run_id if a == "RUN_ID" else a for a in args]
        done = gleaner(env, *args, cwd=tmp_path)
        assert done.returncode == 0, (line, done.stderr)
        outputs[line] = done.stdout + done.stderr
    assert "2 changed, 11 unchanged" in outputs["gleaner demo --changed"]
    diff = next(out for line, out in outputs.items() if line.startswith("gleaner diff"))
    assert "first version" not in diff and "v1" in diff and "v2" in diff, diff
    assert (tmp_path / "demo-copy" / "manifest.jsonl").exists() and (tmp_path / "out").exists()
