"""Send a crawl to a deployed Gleaner: ``gleaner submit URL --to MAP_HTTP_URL``, and ask how a run went.

map-http sits behind Cloud Run IAM (no public invoker), so a request needs a Google identity
token for an identity holding ``roles/run.invoker``. The token comes from ``--identity-token``,
else from Application Default Credentials for the function's URL (a service account, the
metadata server), else from ``gcloud auth print-identity-token`` (a person logged in with gcloud).
With ``GLEANER_WEBHOOK_SECRET`` set the bearer goes in ``Authorization`` and the identity token
in ``X-Serverless-Authorization``, which Cloud Run checks and passes the other header on.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import click

from gleaner.cli.base import fail, guard, is_uuid, load_settings, main
from gleaner.cloud.callers import SERVERLESS_AUTHORIZATION
from gleaner.errors import ConfigError

# A crawl request is answered as soon as it is queued; a status read is one query.
REQUEST_TIMEOUT = 60.0


def identity_token(audience: str, given: str | None) -> str | None:
    """A Google identity token for ``audience``: given, from ADC, or from gcloud; None if none is at hand."""
    if given:
        return given
    try:
        import google.auth.exceptions
        import google.auth.transport.requests
        import google.oauth2.id_token

        token: str = google.oauth2.id_token.fetch_id_token(google.auth.transport.requests.Request(), audience)
        return token
    except (ImportError, google.auth.exceptions.GoogleAuthError, ValueError):
        pass  # user credentials cannot mint tokens for an audience: gcloud can, for the logged-in user
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        return None
    done = subprocess.run([gcloud, "auth", "print-identity-token"], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or None if done.returncode == 0 else None


def auth_headers(audience: str, given_token: str | None, secret: str | None) -> dict[str, str]:
    token = identity_token(audience, given_token)
    if token is None and not secret:
        raise ConfigError("no credentials: pass --identity-token, log in with gcloud, or set GLEANER_WEBHOOK_SECRET")
    if secret:
        headers = {"Authorization": f"Bearer {secret}"}
        if token:
            headers[SERVERLESS_AUTHORIZATION] = f"Bearer {token}"
        return headers
    return {"Authorization": f"Bearer {token}"}


def _call(method: str, url: str, headers: dict[str, str], **kwargs: Any) -> tuple[int, Any]:
    import httpx

    try:
        response = httpx.request(method, url, headers=headers, timeout=REQUEST_TIMEOUT, trust_env=True, **kwargs)
    except httpx.HTTPError as exc:
        raise ConfigError(f"cannot reach {url}: {exc}") from exc
    try:
        body = response.json()
    except ValueError:
        body = {"error": response.text[:500]}
    return response.status_code, body


@main.command("submit")
@click.argument("url", required=False)
@click.option("--to", "function_url", required=True, help="map-http's URL (terraform output crawl_request_url).")
@click.option("--site-domain", help="Tenant key (default: the URL's host without www.).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many URLs in the run.")
@click.option("--max-depth", type=click.IntRange(min=0), help="Link depth from the start page.")
@click.option("--include", multiple=True, help="Only paths matching this glob (repeatable).")
@click.option("--exclude", multiple=True, help="Never scrape paths matching this glob (repeatable).")
@click.option("--request-id", help="Idempotency key: the same id is the same run.")
@click.option("--status", "status_of", metavar="RUN_ID", help="Instead of submitting, print this run's status.")
@click.option("--identity-token", envvar="GLEANER_IDENTITY_TOKEN", help="A Google identity token to send.")
@guard
def submit_cmd(url: str | None, function_url: str, site_domain: str | None, limit: int | None,
               max_depth: int | None, include: tuple[str, ...], exclude: tuple[str, ...], request_id: str | None,
               status_of: str | None, identity_token: str | None) -> None:
    """Queue a crawl of URL on a deployed Gleaner (or, with --status, show a run): prints the JSON answer."""
    settings = load_settings()
    headers = auth_headers(function_url, identity_token, settings.webhook_secret)
    if status_of is not None:
        if not is_uuid(status_of):
            fail(f"{status_of!r} is not a run id", 2)
        status, body = _call("GET", function_url, headers, params={"run_id": status_of})
    else:
        if not url:
            fail("give the URL to crawl (or --status RUN_ID)", 2)
        request = {"url": url, "site_domain": site_domain, "limit": limit, "max_depth": max_depth,
                   "include": list(include) or None, "exclude": list(exclude) or None, "request_id": request_id}
        status, body = _call("POST", function_url, headers,
                             json={k: v for k, v in request.items() if v is not None})
    click.echo(json.dumps(body, sort_keys=True))
    if status >= 400:
        fail(f"{function_url} answered {status}: {body.get('error', body) if isinstance(body, dict) else body}")
