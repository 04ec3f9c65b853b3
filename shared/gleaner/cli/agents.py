"""``gleaner mcp``: the MCP server over stdio, for agents that start Gleaner as a subprocess."""

from __future__ import annotations

import click

from gleaner.cli.base import fail, guard, load_settings, main, open_deps

TOKEN_ENV = "GLEANER_MCP_TOKEN"


@main.command("mcp")
@click.option("--token", envvar=TOKEN_ENV, default=None, show_envvar=True,
              help="Act for this caller: a site token (its site only), a workspace token (its feed's "
                   "reference items only) or the operator bearer. Without one the server acts for the "
                   "operator, like every other command.")
@guard
def mcp_cmd(token: str | None) -> None:
    """Serve MCP over stdio: tools search, get, cite, verify, changes, crawl_status, refs_search, refs_get
    (docs/agents.md).

    Stdout carries the protocol only; logs go to stderr.
    """
    from gleaner.agents.references import WorkspaceCaller, workspace_caller
    from gleaner.backoffice.api import OPERATOR, Access
    from gleaner.backoffice.wsgi import BackofficeApp

    settings = load_settings()
    tenant = click.get_current_context().find_root().params.get("tenant")
    with open_deps(settings) as deps:
        access: Access | WorkspaceCaller = Access(tenant) if tenant else OPERATOR  # --tenant SITE: SITE only
        if token is not None:
            # The same gate as /v1/: the operator bearer, else a live site token; anything else is refused.
            gate = BackofficeApp(deps, bearer=settings.webhook_secret)
            header = f"Bearer {token}"
            found = gate.access_for({"HTTP_AUTHORIZATION": header}) or workspace_caller(deps, header)
            if found is None:
                fail(f"{TOKEN_ENV}/--token is neither the operator bearer nor a live site or workspace token")
            assert found is not None
            access = found
        from gleaner.agents.server import build_server  # after the token check: a refusal needs no SDK

        build_server(deps, fixed=access).run("stdio")
