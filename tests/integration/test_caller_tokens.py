"""Per-caller credentials: a token acts as its workspace; the shared secret stays the admin."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from gleaner.cli import main
from gleaner.demosite.testsite import TestSite
from gleaner.references.identity import reference_item_id
from gleaner.serving.serve import WebhookServer
from gleaner.urls import canonicalize
from tests.feed_site import ARTICLES, feed_site

SECRET = "admin-secret"
ADMIN = {"Authorization": f"Bearer {SECRET}"}


@pytest.fixture
def site() -> Iterator[TestSite]:
    with feed_site() as test_site:
        yield test_site


@pytest.fixture
def cli_env(database_url: str, tmp_path: Any) -> dict[str, str]:
    return {"GLEANER_DATABASE_URL": database_url, "GLEANER_HOME": str(tmp_path / "gleaner")}


def add_token(cli_env: dict[str, str], workspace: str) -> dict[str, str]:
    result = CliRunner().invoke(main, ["tokens", "add", "--workspace", workspace, "--json"], env=cli_env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def article(site: TestSite, workspace: str, path: str = "/articles/sea-ice") -> dict[str, Any]:
    return {"url": site.url + path, "title": ARTICLES[path][0], "workspace_id": workspace,
            "feed_source": site.url + f"/private-feeds/{workspace}.xml"}


def test_tokens_are_printed_once_listed_without_the_secret_and_revoked(cli_env):
    created = add_token(cli_env, "ws-1")
    assert created["token"].startswith("glt_") and len(created["token"]) > 40
    listed = CliRunner().invoke(main, ["tokens", "list", "--json"], env=cli_env)
    (row,) = json.loads(listed.stdout)
    assert row["workspace_id"] == "ws-1" and row["revoked_at"] is None
    assert created["token"] not in listed.stdout
    revoked = CliRunner().invoke(main, ["tokens", "revoke", created["id"]], env=cli_env)
    assert revoked.exit_code == 0
    again = CliRunner().invoke(main, ["tokens", "revoke", created["id"]], env=cli_env)
    assert again.exit_code == 1 and "no live token" in again.stderr


def test_a_token_acts_as_its_workspace_and_sees_others_only_as_counts(make_deps, cli_env, site):
    mine, theirs = add_token(cli_env, "ws-1"), add_token(cli_env, "ws-2")
    revoked = add_token(cli_env, "ws-1")
    CliRunner().invoke(main, ["tokens", "revoke", revoked["id"]], env=cli_env)
    deps = make_deps(webhook_secret=SECRET)
    with WebhookServer(deps, port=0) as server:
        url = server.url + "/"
        forged = httpx.post(url, json={"articles": [article(site, "ws-1"), article(site, "ws-2")]},
                            headers=bearer(mine["token"]))
        assert forged.status_code == 202
        assert forged.json()["accepted"] == 1
        (rejected,) = forged.json()["rejected"]
        assert rejected == {"index": 1, "reason": "'workspace_id' is not the workspace of this token"}
        only_forged = httpx.post(url, json={"articles": [article(site, "ws-2")]}, headers=bearer(mine["token"]))
        assert only_forged.status_code == 400
        assert httpx.post(url, json={"articles": [article(site, "ws-2")]},
                          headers=bearer(theirs["token"])).status_code == 202
        assert httpx.post(url, json={"articles": [article(site, "ws-3")]}, headers=ADMIN).status_code == 202
        assert httpx.post(url, json={}, headers=bearer(revoked["token"])).status_code == 401
        assert httpx.post(url, json={}, headers=bearer("glt_" + "A" * 43)).status_code == 401

        item_id = reference_item_id(canonicalize(site.url + "/articles/sea-ice"))
        deadline = time.monotonic() + 60  # the three workspaces' rows are linked as their landings finish
        while len((deps.references.get(item_id) or {}).get("articles", [])) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        as_mine = httpx.get(f"{url}refs/{item_id}", headers=bearer(mine["token"])).json()
        as_admin = httpx.get(f"{url}refs/{item_id}", headers=ADMIN).json()
    assert [a["workspace_id"] for a in as_mine["articles"]] == ["ws-1"]
    assert as_mine["other_workspaces"] == {"workspaces": 2, "articles": 2}
    assert "ws-2" not in json.dumps(as_mine) and "private-feeds/ws-2" not in json.dumps(as_mine)
    assert sorted(a["workspace_id"] for a in as_admin["articles"]) == ["ws-1", "ws-2", "ws-3"]
    assert "other_workspaces" not in as_admin


def test_only_the_operator_may_ask_for_a_full_reprocess_of_every_workspace(make_deps, cli_env, site):
    mine = add_token(cli_env, "ws-1")
    deps = make_deps(webhook_secret=SECRET)
    with WebhookServer(deps, port=0) as server:
        url = server.url + "/"
        assert httpx.post(url, json={"articles": [article(site, "ws-1")]}, headers=bearer(mine["token"])
                          ).status_code == 202
        refused = [httpx.post(url, json={"full_reprocess": True}, headers=bearer(mine["token"])) for _ in range(5)]
        assert [r.status_code for r in refused] == [403] * 5
        assert "only the operator" in refused[0].json()["error"]
        assert httpx.post(url, json={}, headers=bearer(mine["token"])).status_code == 202  # the plain walk
        assert httpx.post(url, json={"full_reprocess": True}, headers=ADMIN).json()["walk"] is True
