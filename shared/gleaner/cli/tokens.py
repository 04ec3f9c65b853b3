"""Caller credentials: ``gleaner tokens add|list|revoke`` (bearer tokens bound to a workspace or a site)."""

from __future__ import annotations

import json
from typing import Any

import click

from gleaner.cli.base import echo_listing, fail, guard, load_settings, main, open_deps, resolve_id


@main.group("tokens")
def tokens_group() -> None:
    """Bearer tokens for HTTP callers: a request with one acts as its workspace (the feed webhook)
    or its site (the back office) only.

    GLEANER_WEBHOOK_SECRET stays the admin credential (every workspace and site).
    """


@tokens_group.command("add")
@click.option("--workspace", default=None, help="The workspace the token acts as (the feed webhook).")
@click.option("--site-domain", "site_domain", default=None,
              help="The site the token acts for (the back office: that site's rows only).")
@click.option("--label", default="", help="A note for `tokens list` (who holds it).")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"token", "id", "workspace_id"} (or "site_domain") on stdout.')
@guard
def tokens_add(workspace: str | None, site_domain: str | None, label: str, as_json: bool) -> None:
    """Create a token for a workspace or a site and print it (it is stored hashed: this is the only time
    it is shown)."""
    from gleaner.tenancy import InvalidTenant, validate_site_domain

    if (workspace is None) == (site_domain is None):
        fail("name exactly one of --workspace and --site-domain", 2)
    if site_domain is not None:
        try:
            validate_site_domain(site_domain)
        except InvalidTenant as exc:
            fail(str(exc), 2)
    with open_deps(load_settings()) as deps:
        store = deps.tokens
        created = store.add(workspace, label) if workspace is not None else store.add_site(str(site_domain), label)
    binding = "workspace_id" if workspace is not None else "site_domain"
    if as_json:
        click.echo(json.dumps({"token": created["token"], "id": created["id"], binding: created[binding]}))
        return
    click.echo(created["token"])
    acts = f"workspace {workspace!r}" if workspace is not None else f"site {site_domain} in the back office"
    click.echo(f"gleaner: token {created['id']} acts as {acts}; it is not stored and cannot be shown again",
               err=True)


@tokens_group.command("list")
@click.option("--json", "as_json", is_flag=True)
@guard
def tokens_list(as_json: bool) -> None:
    """Every token (never the token itself): id, workspace or site, label, created, revoked."""
    with open_deps(load_settings()) as deps:
        rows = deps.tokens.list()

    def line(row: dict[str, Any]) -> str:
        state = f"revoked {row['revoked_at']}" if row["revoked_at"] else "live"
        bound = row["workspace_id"] if row["workspace_id"] is not None else f"site:{row['site_domain']}"
        return f"{row['id']}  {bound:<24} {state:<40} {row['label']}"

    echo_listing(rows, as_json, line, "no tokens: `gleaner tokens add --workspace W` makes one")


@tokens_group.command("revoke")
@click.argument("token_id")
@guard
def tokens_revoke(token_id: str) -> None:
    """Revoke a token by its id: requests with it are refused from now on."""
    with open_deps(load_settings()) as deps:
        token_id = resolve_id(deps, "token", token_id)
        if not deps.tokens.revoke(token_id):
            fail(f"no live token {token_id}")
    click.echo(f"gleaner: revoked {token_id}", err=True)
