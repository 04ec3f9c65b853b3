"""Caller credentials: ``gleaner tokens add|list|revoke`` (bearer tokens bound to a workspace)."""

from __future__ import annotations

import json

import click

from gleaner.cli.base import fail, guard, is_uuid, load_settings, main, open_deps


@main.group("tokens")
def tokens_group() -> None:
    """Bearer tokens for HTTP callers: a request with one acts as its workspace only.

    GLEANER_WEBHOOK_SECRET stays the admin credential (every workspace).
    """


@tokens_group.command("add")
@click.option("--workspace", required=True, help="The workspace the token acts as.")
@click.option("--label", default="", help="A note for `tokens list` (who holds it).")
@click.option("--json", "as_json", is_flag=True, help='Print {"token", "id", "workspace_id"} on stdout.')
@guard
def tokens_add(workspace: str, label: str, as_json: bool) -> None:
    """Create a token for WORKSPACE and print it (it is stored hashed: this is the only time it is shown)."""
    with open_deps(load_settings()) as deps:
        created = deps.tokens.add(workspace, label)
    if as_json:
        click.echo(json.dumps({"token": created["token"], "id": created["id"],
                               "workspace_id": created["workspace_id"]}))
        return
    click.echo(created["token"])
    click.echo(f"gleaner: token {created['id']} acts as workspace {created['workspace_id']!r}; "
               "it is not stored and cannot be shown again", err=True)


@tokens_group.command("list")
@click.option("--json", "as_json", is_flag=True)
@guard
def tokens_list(as_json: bool) -> None:
    """Every token (never the token itself): id, workspace, label, created, revoked."""
    with open_deps(load_settings()) as deps:
        rows = deps.tokens.list()
    if as_json:
        click.echo(json.dumps(rows))
        return
    for row in rows:
        state = f"revoked {row['revoked_at']}" if row["revoked_at"] else "live"
        click.echo(f"{row['id']}  {row['workspace_id']:<24} {state:<40} {row['label']}")


@tokens_group.command("revoke")
@click.argument("token_id")
@guard
def tokens_revoke(token_id: str) -> None:
    """Revoke a token by its id: requests with it are refused from now on."""
    if not is_uuid(token_id):
        fail(f"{token_id!r} is not a token id (see `gleaner tokens list`)", 2)
    with open_deps(load_settings()) as deps:
        if not deps.tokens.revoke(token_id):
            fail(f"no live token {token_id}")
    click.echo(f"gleaner: revoked {token_id}", err=True)
