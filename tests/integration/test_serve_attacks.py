"""`gleaner serve` probed as an attacker would: bounded memory and threads, clear 4xx, a clean pool.

The server runs in this process on 127.0.0.1 with small limits; memory and threads are read from
this process (psutil), so each bound below is what the server holds, not what a client does.
Figures for the full-size attacks come from infra/bench/serve_attacks.py.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

from gleaner.demosite.testsite import Page, TestSite
from gleaner.serving.serve import WebhookServer
from gleaner.serving.web import ServerLimits

SECRET = "attack-secret"
AUTH = {"Authorization": f"Bearer {SECRET}"}
CAP = 64 * 1024
LIMITS = ServerLimits(max_body_bytes=CAP, threads=4, connection_limit=40, channel_timeout=2.0)


@pytest.fixture
def served(make_deps: Any) -> Iterator[tuple[str, Any]]:
    deps = make_deps(webhook_secret=SECRET, webhook_max_bytes=CAP)
    with WebhookServer(deps, port=0, limits=LIMITS) as server:
        yield server.url, deps


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def raw_exchange(url: str, head: bytes, body_bytes: int = 0, chunked: bool = False) -> tuple[str, int]:
    """Send a request head and up to body_bytes of body; the status line and how much was sent."""
    sock = socket.create_connection(("127.0.0.1", port_of(url)), timeout=10)
    sock.sendall(head)
    block, sent = b"x" * 65536, 0
    try:
        while sent < body_bytes:
            sock.sendall(b"10000\r\n" + block + b"\r\n" if chunked else block)
            sent += len(block)
    except OSError:
        pass  # the server stopped reading and closed
    try:
        status = sock.recv(100).split(b"\r\n", 1)[0].decode("latin-1")
    except OSError:
        status = ""
    sock.close()
    return status, sent


def rss() -> int:
    return psutil.Process().memory_info().rss


def article(url: str, title: str = "A title", workspace: str = "ws-1") -> dict[str, Any]:
    return {"url": url, "title": title, "workspace_id": workspace}


def ledger_count(deps: Any) -> int:
    return int(deps.references.counts()["feed_articles"])


def test_an_unauthenticated_negative_content_length_is_refused_without_reading(served):
    url, deps = served
    status, _sent = raw_exchange(url, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n", 4 << 20)
    assert " 400 " in status
    assert ledger_count(deps) == 0


def test_a_declared_oversized_body_is_refused_before_any_byte_is_read(served):
    url, _deps = served
    head = f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {300 << 20}\r\n\r\n".encode()
    before = rss()
    status, _sent = raw_exchange(url, head)  # nothing sent: the answer comes without the body
    assert " 413 " in status
    assert rss() - before < 16 << 20


def test_a_streamed_chunked_body_is_cut_off_at_the_cap_and_memory_stays_flat(served):
    url, deps = served
    before = rss()
    status, sent = raw_exchange(url, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                                32 << 20, chunked=True)
    assert " 413 " in status
    assert sent < 32 << 20  # the server closed long before the attacker was done
    assert rss() - before < 16 << 20
    assert ledger_count(deps) == 0


def test_an_unauthenticated_body_under_the_cap_is_answered_401_and_never_parsed(served):
    url, deps = served
    response = httpx.post(url + "/", content=json.dumps({"articles": [article("https://n.test/a")]}))
    assert response.status_code == 401
    assert ledger_count(deps) == 0


def test_idle_connections_hold_no_thread_and_are_closed_after_the_timeout(served):
    url, _deps = served
    threads_before = psutil.Process().num_threads()
    idle = [socket.create_connection(("127.0.0.1", port_of(url)), timeout=10) for _ in range(100)]
    try:
        time.sleep(0.5)
        assert psutil.Process().num_threads() <= threads_before + 1
        # Past connection_limit the server stops accepting; those wait in the backlog, costing nothing.
        idle[0].settimeout(LIMITS.channel_timeout * 4)
        assert idle[0].recv(1) == b""  # closed by the server, not by us
        assert httpx.get(url + "/refs?q=x", headers=AUTH, timeout=20).status_code == 200
    finally:
        for sock in idle:
            sock.close()


def test_a_lone_surrogate_is_a_400_and_the_next_requests_land_every_valid_article(served):
    url, deps = served
    site_pages: dict[str, Page] = {"/a": Page(b"<html><title>A</title><p>Sea ice is thinning fast.</p></html>")}
    with TestSite(site_pages, max_seconds=60) as site:
        poison = b'{"articles": [{"url": "%s/a", "title": "\\ud800", "workspace_id": "w"}]}' % site.url.encode()
        response = httpx.post(url + "/", content=poison, headers=AUTH)
        assert response.status_code == 400
        assert "surrogate" in response.text
        answers = [httpx.post(url + "/", json={"articles": [article(f"{site.url}/a?n={i}")]}, headers=AUTH)
                   for i in range(8)]
    assert [a.status_code for a in answers] == [202] * 8
    assert ledger_count(deps) == 8


@pytest.mark.parametrize("query", ["q=%00", "q=%ED%A0%80", "q=a&limit=%00"])
def test_a_nul_or_undecodable_query_is_a_permanent_400_not_a_retry(served, query):
    url, _deps = served
    response = httpx.get(f"{url}/refs?{query}", headers=AUTH)
    assert response.status_code == 400


def test_the_server_answers_other_routes_it_is_given(make_deps):
    def hello(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"hello " + environ["PATH_INFO"].encode()]

    deps = make_deps(webhook_secret=SECRET)
    with WebhookServer(deps, port=0, routes=[("/v1/", hello)], limits=LIMITS) as server:
        assert httpx.get(server.url + "/v1/sites").text == "hello /v1/sites"
        assert httpx.get(server.url + "/refs?q=x").status_code == 401


# -- fuzz -----------------------------------------------------------------------------------------------

FUZZ_CASES = 300


def random_json(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["str", "int", "float", "bool", "null", "surrogate", "nul"] + (["list", "dict"] if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "str":
        return "".join(rng.choice("ab/:.é\u202e\ufeff ") for _ in range(rng.randint(0, 12)))
    if kind == "surrogate":
        return "x\ud800" if rng.random() < 0.5 else "\udfff"
    if kind == "nul":
        return "a\x00"
    if kind == "int":
        return rng.choice([0, -1, 2**63, 10**30])
    if kind == "float":
        return rng.choice([0.5, float("1e308"), -0.0])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["url", "title", "workspace_id", "published_at", "summary", "feed_source", "articles",
            "full_reprocess", "x"]
    return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))}


def random_body(rng: random.Random) -> bytes:
    roll = rng.random()
    if roll < 0.2:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 200)))
    if roll < 0.6:
        articles = []
        for _ in range(rng.randint(1, 4)):
            item = {"url": rng.choice(["https://n.test/a", "ftp://x", "http://[::1", "https://n.test/\x00"]),
                    "title": random_json(rng), "workspace_id": random_json(rng)}
            if rng.random() < 0.5:
                item[rng.choice(["published_at", "summary", "feed_source", "extra"])] = random_json(rng)
            articles.append(item)
        text = json.dumps({"articles": articles}, ensure_ascii=rng.random() < 0.5)
    else:
        text = json.dumps(random_json(rng))
    return text.encode("utf-8", "surrogatepass")


def test_fuzzed_webhook_bodies_never_answer_500_and_rejected_input_leaves_no_row(served):
    url, deps = served
    rng = random.Random(1313)
    statuses: dict[int, int] = {}
    with httpx.Client(headers=AUTH, timeout=20) as client:
        for _ in range(FUZZ_CASES):
            body = random_body(rng)
            before = ledger_count(deps)
            response = client.post(url + "/", content=body)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            assert response.status_code in (202, 400), (response.status_code, body[:200])
            if response.status_code == 400:
                assert ledger_count(deps) == before, body[:200]
            else:
                accepted = response.json().get("accepted", 0)
                assert ledger_count(deps) <= before + accepted
    assert statuses.get(400, 0) > FUZZ_CASES // 2  # the fuzzer mostly sends garbage, and it is refused


def test_requests_in_parallel_beyond_the_worker_pool_are_queued_not_refused(served):
    url, _deps = served
    results: list[int] = []

    def call() -> None:
        results.append(httpx.get(url + "/refs?q=ice", headers=AUTH, timeout=30).status_code)

    workers = [threading.Thread(target=call) for _ in range(LIMITS.threads * 3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert results == [200] * len(workers)
