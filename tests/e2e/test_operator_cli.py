"""`gleaner sites|rules|tick|review|composite` as a user runs them: a real process, PostgreSQL, a loopback site."""

from __future__ import annotations

import json

from ..integration.sites import demo_site
from . import test_cli
from .test_cli import gleaner

cli_env = test_cli.cli_env  # the same environment fixture as the other CLI tests


def ok(env, *args):
    result = gleaner(env, *args)
    assert result.returncode == 0, result.stderr
    return result


def test_a_site_added_with_a_skip_rule_is_crawled_by_tick_without_the_skipped_paths(cli_env):
    with demo_site() as site:
        added = json.loads(ok(cli_env, "sites", "add", site.url + "/", "--site-domain", "demo.test", "--every", "auto",
                              "--delay", "0", "--concurrency", "4", "--json").stdout)
        assert (added["every"], added["site_domain"], added["concurrency"]) == ("auto", "demo.test", 4)
        rule = json.loads(ok(cli_env, "rules", "add", "demo.test", "/blog/*", "--skip", "--reason", "noise",
                             "--json").stdout)["rule"]
        ticked = json.loads(ok(cli_env, "tick", "--json").stdout)
        assert [r["status"] for r in ticked["runs"]] == ["finished"]
        assert not [p for p in site.paths() if p.startswith("/blog")]
        assert json.loads(ok(cli_env, "tick", "--json").stdout)["started"] == []  # not due again yet
        composite = json.loads(ok(cli_env, "composite", "create", "demo.test", "Install guide", "--from",
                                  site.url + "/docs/install", "--from", site.url + "/docs/api", "--json").stdout)
    assert len(composite["sources"]) == 2
    listed = json.loads(ok(cli_env, "rules", "list", "demo.test", "--json").stdout)
    assert [(r["id"], r["action"], r["glob"], r["reason"]) for r in listed] == [
        (rule["id"], "skip", "/blog/*", "noise")]
    shown = json.loads(ok(cli_env, "sites", "show", "demo.test", "--json").stdout)
    assert shown["last_run_id"] == ticked["started"][0]["run_id"] and len(shown["rules"]) == 1
    # Nothing waits for a decision; the pages the decider excluded are listed with their reason.
    review = json.loads(ok(cli_env, "review", "list", "demo.test", "--json").stdout)
    assert review and {item["decision"] for item in review} == {"exclude"} and all(item["reason"] for item in review)
    assert [c["status"] for c in json.loads(ok(cli_env, "composite", "list", "demo.test", "--json").stdout)] == [
        "generated"]
    illegal = gleaner(cli_env, "composite", "move", composite["id"], "prod")
    assert illegal.returncode == 3 and "cannot go to prod" in illegal.stderr and "in_validation" in illegal.stderr
    ok(cli_env, "composite", "move", composite["id"], "in_validation")
    moved = json.loads(ok(cli_env, "composite", "move", composite["id"], "validated", "--note", "read it",
                          "--json").stdout)
    assert moved["status"] == "validated" and moved["validated_by"].startswith("cli")
    history = json.loads(ok(cli_env, "composite", "history", composite["id"], "--json").stdout)
    assert [(h["from_status"], h["to_status"]) for h in history] == [
        (None, "generated"), ("generated", "in_validation"), ("in_validation", "validated")]
    assert history[-1]["note"] == "read it"
    ok(cli_env, "rules", "remove", rule["id"])
    ok(cli_env, "sites", "remove", "demo.test")
    assert json.loads(ok(cli_env, "sites", "list", "--json").stdout) == []


def test_bad_operator_input_is_one_line_and_a_non_zero_exit(cli_env):
    for args in (("sites", "add", "https://example.com/", "--every", "soon"),
                 ("rules", "add", "example.com", "blog/*", "--skip"),
                 ("rules", "remove", "not-a-rule"),
                 ("sites", "show", "nowhere.example")):
        result = gleaner(cli_env, *args)
        assert result.returncode != 0, args
        assert result.stderr.startswith("gleaner: error:") and "Traceback" not in result.stderr, result.stderr
