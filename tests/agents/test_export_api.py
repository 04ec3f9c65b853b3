"""`GET /v1/sites/{site}/export?format=jsonl`: the command's JSON Lines over HTTP, streamed, per tenant.

The agents' kept demo site is served by a real `gleaner serve` (waitress on 127.0.0.1); its records
are compared with the lines `gleaner export SITE DIR --format jsonl` writes for the same database.
The test that takes bodies away does it to a tenant of its own.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from gleaner import tenancy
from gleaner.backoffice.wsgi import BackofficeApp
from gleaner.cli import main
from gleaner.runtime.runner import crawl, new_request
from gleaner.store.access.tokens import TokenStore
from tests.backoffice.conftest import call

from .conftest import OPERATOR_SECRET, SITE, Served

OTHER = "export-other.test"
CUT = "export-cut.test"


def _token(served: Served, site: str) -> str:
    with tenancy.all_tenants():
        return str(TokenStore(served.deps.engine).add_site(site)["token"])


def _cli_lines(served: Served, tmp_path: Path, *flags: str) -> list[dict[str, Any]]:
    env = {"GLEANER_DATABASE_URL": served.database_url, "GLEANER_HOME": str(served.deps.settings.data_dir)}
    out = tmp_path / ("cli" + "".join(flags))
    result = CliRunner().invoke(main, ["export", SITE, str(out), "--format", "jsonl", *flags], env=env)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in (out / "documents.jsonl").read_text(encoding="utf-8").splitlines()]


def test_a_site_token_streams_its_sites_export_equal_to_the_commands(served: Served, tmp_path: Path):
    token = _token(served, SITE)
    headers = {"Authorization": f"Bearer {token}"}
    for flags, query in (((), {"format": "jsonl"}), (("--spans",), {"format": "jsonl", "spans": "1"})):
        with httpx.stream("GET", f"{served.url}/v1/sites/{SITE}/export", params=query, headers=headers,
                          timeout=30) as answer:
            assert answer.status_code == 200
            assert answer.headers["content-type"] == "application/x-ndjson"
            # Sent while it is made: no length up front, the body comes chunked.
            assert "content-length" not in answer.headers and answer.headers["transfer-encoding"] == "chunked"
            streamed = [json.loads(line) for line in answer.iter_lines()]
        expected = _cli_lines(served, tmp_path, *flags)
        assert streamed == expected and len(streamed) >= 5
        assert all(("spans" in r) == bool(flags) for r in streamed)
    install = next(r for r in streamed if r["url"].endswith("/docs/install"))
    assert install["markdown"].startswith("# Install") and install["spans"]


def test_a_site_token_is_refused_another_sites_export_and_a_wrong_token_everything(served: Served):
    crawl(served.deps, new_request(served.site.url + "/", site_domain=OTHER))
    app = BackofficeApp(served.deps, bearer=OPERATOR_SECRET)
    other = _token(served, OTHER)
    refused = call(app, "GET", f"/v1/sites/{SITE}/export", token=other, query={"format": "jsonl"})
    missing = call(app, "GET", "/v1/sites/nosuch.test/export", token=other, query={"format": "jsonl"})
    assert (refused.status, refused.json()["error"].replace(SITE, "?")) == (
        missing.status, missing.json()["error"].replace("nosuch.test", "?")) == (404, "no site ?")
    assert call(app, "GET", f"/v1/sites/{SITE}/export", token="wrong").status == 401
    own = call(app, "GET", f"/v1/sites/{OTHER}/export", token=other)
    records = [json.loads(line) for line in own.body.splitlines()]
    assert records and {r["site_domain"] for r in records} == {OTHER}
    every = call(app, "GET", f"/v1/sites/{SITE}/export", token=OPERATOR_SECRET)
    assert every.status == 200 and {json.loads(line)["site_domain"] for line in every.body.splitlines()} == {SITE}
    parquet = call(app, "GET", f"/v1/sites/{OTHER}/export", token=other, query={"format": "parquet"})
    assert parquet.status == 400 and "gleaner export" in parquet.json()["error"]


def test_the_export_reads_each_body_as_its_line_is_sent_and_a_later_failure_cuts_the_stream(served: Served):
    crawl(served.deps, new_request(served.site.url + "/", site_domain=CUT))
    app = BackofficeApp(served.deps, bearer=OPERATOR_SECRET)
    token = _token(served, CUT)
    with tenancy.all_tenants():
        items = served.deps.metadata.current_versions(CUT)
    environ: dict[str, Any] = {"REQUEST_METHOD": "GET", "PATH_INFO": f"/v1/sites/{CUT}/export",
                               "QUERY_STRING": "format=jsonl", "wsgi.input": io.BytesIO(b""),
                               "HTTP_HOST": "backoffice.example", "HTTP_AUTHORIZATION": f"Bearer {token}"}
    started: list[Any] = []
    body = app(environ, lambda status, headers, exc_info=None: started.extend((status, headers)))
    chunks = iter(body)
    first = json.loads(next(chunks))
    assert started[0] == "200 OK" and "Content-Length" not in dict(started[1])
    assert first["url"] == items[0]["url"]
    # The last page's body goes now, after the answer started: a body read up front would not notice.
    assert served.deps.blobs.delete(items[-1]["content_ref"])
    sent: list[bytes] = []
    try:
        for chunk in chunks:
            sent.append(chunk)
    except Exception as exc:  # the server cuts the connection: the reader sees a truncated body, not an end
        assert "missing from the blob store" in str(exc)
    else:
        raise AssertionError("the export went on past a missing body")
    finally:
        body.close()  # type: ignore[attr-defined]
    assert [json.loads(line)["url"] for line in sent] == [i["url"] for i in items[1:-1]]
    # Missing before anything was sent, it is an answer like any other route's.
    assert served.deps.blobs.delete(items[0]["content_ref"])
    first_missing = call(app, "GET", f"/v1/sites/{CUT}/export", token=token)
    assert first_missing.status == 404 and "missing from the blob store" in first_missing.json()["error"]
