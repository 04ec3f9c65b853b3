"""MCP through the SDK's own client: over streamable HTTP at /mcp under `gleaner serve`, and over stdio
(`gleaner mcp` as a subprocess). A slice the server returns is the bytes `gleaner slice` prints; a site
token reaches its own site only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from .conftest import OPERATOR_SECRET, SITE, Served

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"search", "get", "cite", "verify", "changes", "crawl_status"}


def _env(served: Served, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "GLEANER_DATABASE_URL": served.database_url, "GLEANER_HOME": str(tmp_path / "home"),
            "PYTHONPATH": str(ROOT / "shared"), "GLEANER_WEBHOOK_SECRET": OPERATOR_SECRET, **extra}


def _slice_cli(env: dict[str, str], text_hash: str, start: int, end: int) -> bytes:
    done = subprocess.run([sys.executable, "-m", "gleaner.cli", "slice", text_hash, str(start), str(end)],
                          env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return result.structured_content or json.loads(result.content[0].text)


async def _http_session(url: str, token: str | None, work: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as client, \
            streamable_http_client(url + "/mcp", http_client=client) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        return await work(session)


def test_the_http_server_lists_the_tools_and_gets_the_bytes_gleaner_slice_prints(served, tmp_path):
    text = served.current_text("/docs/install")
    start, end = 0, min(len(text.body), 120)

    async def work(session: ClientSession) -> tuple[set[str], dict[str, Any], str, dict[str, Any], dict[str, Any]]:
        listed = await session.list_tools()
        got = _structured(await session.call_tool("get", {"text_hash": text.text_hash, "start": start, "end": end}))
        resource = await session.read_resource(f"gleaner://documents/{served.document_id('/docs/install')}")
        # The operator searches every site: other modules crawl the same pages as other sites into this
        # session's database, and identical passages rank alike, so the search is held to this one.
        found = _structured(await session.call_tool("search", {"query": "install", "limit": 3, "site": SITE}))
        hit = found["results"][0]
        verbatim = _structured(await session.call_tool(
            "get", {"text_hash": hit["text_hash"], "start": hit["start"], "end": hit["end"]}))
        return {t.name for t in listed.tools}, got, resource.contents[0].text, hit, verbatim

    names, got, resource, hit, verbatim = anyio.run(_http_session, served.url, None, work)
    # A search hit's byte range is a verbatim slice: the bytes `get` returns are the stored text's.
    assert hit["site_domain"] == SITE and "install" in hit["preview"].lower()
    hit_text = served.deps.provenance.text_bytes(hit["text_hash"])
    assert verbatim["text"].encode("utf-8") == hit_text[hit["start"]:hit["end"]]
    assert names >= TOOLS
    assert got["text"].encode("utf-8") == _slice_cli(_env(served, tmp_path), text.text_hash, start, end)
    current = json.loads(resource)
    assert current["text_hash"] == text.text_hash and current["version"] == text.version == 1
    assert "# " in current["markdown"]


def test_the_stdio_server_lists_the_tools_and_gets_the_bytes_gleaner_slice_prints(served, tmp_path):
    text = served.current_text("/docs/install")
    start, end = 10, min(len(text.body), 200)
    env = _env(served, tmp_path)
    params = StdioServerParameters(command=sys.executable, args=["-m", "gleaner.cli", "mcp"], env=env)

    async def run() -> tuple[set[str], dict[str, Any]]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            got = await session.call_tool("get", {"text_hash": text.text_hash, "start": start, "end": end})
            return {t.name for t in listed.tools}, _structured(got)

    names, got = anyio.run(run)
    assert names >= TOOLS
    assert got["text"].encode("utf-8") == _slice_cli(env, text.text_hash, start, end)


def _quote(body: bytes) -> str:
    """Five words from the first prose line of a canonical text (a quote `cite` accepts)."""
    for line in body.decode("utf-8").splitlines():
        words = line.split()
        if len(words) >= 6 and all(w.isalpha() for w in words[:5]):
            return " ".join(words[:5])
    raise AssertionError("no prose line in the text")


def test_a_site_token_reaches_its_own_site_through_mcp_and_nothing_of_another(served):
    from gleaner import tenancy

    with tenancy.all_tenants():
        own = served.deps.tokens.add_site(SITE)["token"]
        other = served.deps.tokens.add_site("other.test")["token"]
    text = served.current_text("/docs/install")
    document_id = served.document_id("/docs/install")
    url = served.site.url + "/docs/install"
    run_id = served.run["run_id"]
    quote = _quote(text.body)

    async def as_owner(session: ClientSession) -> dict[str, Any]:
        got = _structured(await session.call_tool("get", {"text_hash": text.text_hash, "start": 0, "end": 40}))
        cited = _structured(await session.call_tool("cite", {"url": url, "quote": quote}))
        checked = _structured(await session.call_tool("verify", {"citation_id": cited["citation_id"]}))
        run = _structured(await session.call_tool("crawl_status", {"run_id": run_id}))
        events = _structured(await session.call_tool("changes", {}))
        found = _structured(await session.call_tool("search", {"query": "install"}))
        return {"got": got, "cited": cited, "checked": checked, "run": run, "events": events, "found": found}

    owner = anyio.run(_http_session, served.url, own, as_owner)
    assert owner["got"]["text"].encode("utf-8") == text.body[:40]
    assert owner["cited"]["quote"] == quote and owner["checked"]["state"] == "verified"
    assert owner["run"]["run_id"] == run_id
    assert owner["found"]["results"] and {r["site_domain"] for r in owner["found"]["results"]} == {SITE}
    assert owner["events"]["events"] and {e["site_domain"] for e in owner["events"]["events"]} == {SITE}

    async def as_other(session: ClientSession) -> dict[str, Any]:
        calls = {"get": {"text_hash": text.text_hash, "start": 0, "end": 40},
                 "cite": {"url": url, "quote": quote},
                 "verify": {"citation_id": owner["cited"]["citation_id"]},
                 "crawl_status": {"run_id": run_id},
                 "search": {"query": "install", "site": SITE}}
        answers = {name: await session.call_tool(name, args) for name, args in calls.items()}
        answers["changes"] = await session.call_tool("changes", {})
        answers["everywhere"] = await session.call_tool("search", {"query": "install"})
        answers["runs"] = await session.call_tool("crawl_status", {})
        try:
            await session.read_resource(f"gleaner://documents/{document_id}")
            answers["resource"] = "read"
        except Exception as exc:  # the SDK raises the server's error for a resource it could not read
            answers["resource"] = str(exc)
        return answers

    seen = anyio.run(_http_session, served.url, other, as_other)
    for name in ("get", "cite", "verify", "crawl_status", "search"):
        assert seen[name].is_error, name
        assert "no " in seen[name].content[0].text, (name, seen[name].content[0].text)
    assert _structured(seen["changes"]) == {"events": []}
    assert _structured(seen["everywhere"])["results"] == []
    assert _structured(seen["runs"])["runs"] == []
    assert "no document" in seen["resource"]


def test_mcp_over_http_refuses_a_wrong_token_takes_the_operators_and_stdio_refuses_a_wrong_one(served, tmp_path):
    answer = httpx2.post(served.url + "/mcp", headers={"Authorization": "Bearer glt_not-a-token"},
                         json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
    assert answer.status_code == 401

    async def names(session: ClientSession) -> set[str]:
        return {t.name for t in (await session.list_tools()).tools}

    # The operator's secret names the operator on loopback too (where no credential is needed).
    assert anyio.run(_http_session, served.url, OPERATOR_SECRET, names) >= TOOLS
    done = subprocess.run([sys.executable, "-m", "gleaner.cli", "mcp"], capture_output=True, timeout=120,
                          env=_env(served, tmp_path, GLEANER_MCP_TOKEN="glt_not-a-token"),
                          stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and b"neither the operator bearer nor a live site or workspace token" in done.stderr


@pytest.fixture
def other_token(served: Served) -> str:
    from gleaner import tenancy

    with tenancy.all_tenants():
        return str(served.deps.tokens.add_site("other.test")["token"])


def test_a_stdio_server_started_with_another_sites_token_cannot_read_this_sites_text(served, other_token, tmp_path):
    text = served.current_text("/docs/install")
    params = StdioServerParameters(command=sys.executable, args=["-m", "gleaner.cli", "mcp"],
                                   env=_env(served, tmp_path, GLEANER_MCP_TOKEN=other_token))

    async def run() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await session.call_tool("get", {"text_hash": text.text_hash})

    got = anyio.run(run)
    assert got.is_error and "no canonical text" in got.content[0].text
