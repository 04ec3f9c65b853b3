"""An operator's day on the command line (issue 44): short ids everywhere, notifications that say what
happened and never blame a plain webhook, unknown sites named, newest changes first, erase that asks."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gleaner.cli import main
from gleaner.runtime.runner import crawl, new_request
from tests.integration.sites import demo_site
from tests.integration.test_notify_channels import Receiver

SITE = "demo.test"


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "home"),
            "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8"}


def gleaner(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


@pytest.fixture
def crawled(make_deps: Any) -> dict[str, Any]:
    """One finished run of the demo site; its page kept for erase."""
    deps = make_deps()
    with demo_site() as site:
        summary = crawl(deps, new_request(site.url + "/", site_domain=SITE))
    return {"summary": summary, "url": site.url}


def test_every_command_takes_the_eight_characters_the_listings_show(env, crawled):
    run_id = crawled["summary"]["run_id"]
    shown = gleaner(env, "runs", run_id[:8], "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["run_id"] == run_id
    since = gleaner(env, "changes", "--since", run_id[:8], "--json")
    assert since.exit_code == 0 and json.loads(since.stdout), since.output
    cancel = gleaner(env, "runs", "cancel", run_id[:8])
    assert cancel.exit_code == 1 and f"run {run_id} already ended finished" in cancel.stderr
    unknown = gleaner(env, "runs", "ffffffff")
    assert unknown.exit_code == 1 and "no run ffffffff" in unknown.stderr and "gleaner runs" in unknown.stderr


def test_a_short_id_of_several_subscriptions_is_refused_naming_them(env, make_deps):
    deps = make_deps()
    ids = ["abcd1234-0000-4000-8000-000000000001", "abcd5678-0000-4000-8000-000000000002"]
    with deps.engine.begin() as conn:
        import sqlalchemy as sa

        for i in ids:
            conn.execute(sa.text("INSERT INTO knowledge.notify_subscriptions (id, url, secret)"
                                 " VALUES (CAST(:i AS uuid), 'http://127.0.0.1:9/hook', 'whsec_x')"), {"i": i})
    refused = gleaner(env, "notify", "disable", "abcd")
    assert refused.exit_code == 1 and ids[0] in refused.stderr and ids[1] in refused.stderr
    assert "give more characters" in refused.stderr
    assert gleaner(env, "notify", "disable", "abcd5").exit_code == 0
    assert [s["status"] for s in json.loads(gleaner(env, "notify", "list", "--json").stdout)] == ["active", "disabled"]


def test_a_plain_webhook_never_goes_through_apprise(env, caplog):
    caplog.set_level(logging.INFO, logger="apprise")
    added = gleaner(env, "notify", "add", "http://127.0.0.1:9/hook")
    assert added.exit_code == 0 and "secret" in added.stdout  # a signed webhook, not a channel
    listed = gleaner(env, "notify", "list")
    assert listed.exit_code == 0 and "http://127.0.0.1:9/hook" in listed.stdout
    assert not [r for r in caplog.records if r.name.startswith("apprise")], caplog.text
    assert "Unparseable" not in added.output + listed.output


def test_a_delivered_channel_message_reads_sent_and_names_its_subscription(env):
    receiver = Receiver()
    receiver.thread.start()
    try:
        added = gleaner(env, "notify", "add", receiver.url())
        sub_id = dict(line.split(None, 1) for line in added.stdout.splitlines())["id"]
        tested = gleaner(env, "notify", "test", sub_id[:8])
        assert tested.exit_code == 0 and tested.stdout.startswith("delivered"), tested.output
    finally:
        receiver.deadline = 0
        receiver.thread.join(timeout=5)
        receiver.server.server_close()
    log = gleaner(env, "notify", "deliveries", sub_id[:8]).stdout
    assert "attempts: sent" in log and "error" not in log and f"to {sub_id[:8]}" in log


def test_an_unknown_site_is_named_and_refused(env, crawled):
    for args in (("notify", "add", "http://127.0.0.1:9/hook", "--site", "nosuch.example"),
                 ("changes", "nosuch.example"), ("search", "install", "--site-domain", "nosuch.example")):
        result = gleaner(env, *args)
        assert result.exit_code == 2, (args, result.output)
        assert "unknown site 'nosuch.example'" in result.stderr
    assert json.loads(gleaner(env, "notify", "list", "--json").stdout) == []


def test_types_all_means_run_events_too(env):
    added = gleaner(env, "notify", "add", "http://127.0.0.1:9/hook", "--types", "all")
    assert added.exit_code == 0, added.output
    types = json.loads(gleaner(env, "notify", "list", "--json").stdout)[0]["types"]
    assert {"run.finished", "run.failed", "document.changed"} <= set(types)
    assert "except the run events" in gleaner(env, "notify", "add", "--help").stdout


def test_changes_lists_the_newest_first_and_limit_keeps_the_newest(env, crawled):
    everything = json.loads(gleaner(env, "changes", SITE, "--oldest-first", "--json").stdout)
    newest = json.loads(gleaner(env, "changes", SITE, "--limit", "2", "--json").stdout)
    assert newest == list(reversed(everything))[:2]
    assert newest[0]["type"] == "run.finished"


def test_erase_off_a_terminal_without_yes_refuses_and_names_what_would_go(env, crawled):
    url = crawled["url"] + "/about"
    refused = gleaner(env, "erase", url)
    assert refused.exit_code == 2, refused.output
    assert url in refused.stderr and "1 stored version" in refused.stderr and "--yes" in refused.stderr
    assert json.loads(gleaner(env, "docs", SITE, "--json").stdout)  # nothing went
    erased = gleaner(env, "erase", url, "--yes", "--reason", "takedown", "--json")
    assert erased.exit_code == 0 and json.loads(erased.stdout)["versions_removed"] == 1


def test_a_mistyped_host_is_explained_in_words(env):
    failed = gleaner(env, "crawl", "http://nosuch.invalid/")
    assert failed.exit_code == 1
    assert "the host name could not be found (is it spelled right?)" in failed.stderr


def test_a_replay_says_replayed_not_fetched(env, crawled):
    run_id = crawled["summary"]["run_id"]
    replayed = gleaner(env, "runs", "replay", run_id[:8])
    assert replayed.exit_code == 0 and f"pages of run {run_id}" in replayed.stdout, replayed.output
    listing = gleaner(env, "runs").stdout
    assert f"replay of {run_id[:8]}: pages from the store" in listing
    new_run = json.loads(gleaner(env, "runs", "--json").stdout)[0]["run_id"]
    shown = gleaner(env, "runs", new_run[:8]).stdout
    assert "from the store (nothing fetched)" in shown and "\n  fetched " not in shown
    assert "replayed," in gleaner(env, "changes", SITE, "--limit", "1").stdout
