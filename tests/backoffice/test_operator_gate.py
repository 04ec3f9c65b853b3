"""Who is the credential-free operator of `gleaner serve`, asked over real sockets: a forwarding-style
header by any spelling, or an absolute-form target for another host, makes a request need a credential."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gleaner.serving.serve import WebhookServer

SECRET = "gate-secret-" + "x" * 32


@pytest.fixture
def served(make_deps: Any) -> Iterator[str]:
    deps = make_deps(webhook_secret=SECRET)
    with WebhookServer(deps, port=0) as server:
        yield server.url


def raw_status(url: str, request_head: str) -> int:
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request_head.encode("latin-1"))
        line = sock.recv(200).split(b"\r\n", 1)[0].decode("latin-1")
    return int(line.split()[1])


def get_sites(url: str, extra: str = "", target: str = "/v1/sites") -> int:
    return raw_status(url, f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Connection: close\r\n\r\n")


def test_a_plain_loopback_request_is_the_operator(served):
    assert get_sites(served) == 200


@pytest.mark.parametrize("header", ["Client-IP", "X-Forwarded-Server", "X-Original-Forwarded-For", "X_Forwarded_For",
                                    "True-Client-IP", "CF-Connecting-IP", "X-Cluster-Client-IP", "client_ip"])
def test_a_loopback_request_with_any_forwarding_header_needs_a_credential(served, header):
    assert get_sites(served, f"{header}: 198.51.100.1\r\n") == 401
    assert get_sites(served, f"{header}: 198.51.100.1\r\nAuthorization: Bearer {SECRET}\r\n") == 200


def test_an_absolute_form_target_for_another_host_is_refused(served):
    assert get_sites(served, target="http://evil.test/v1/sites") == 403
    assert get_sites(served, target="http://127.0.0.1/v1/sites") == 200


def test_a_json_command_is_accepted_whatever_the_case_of_its_media_type(served):
    for media_type in ("Application/JSON", "application/json; charset=UTF-8"):
        answer = httpx.post(served + "/v1/sites", content=b"{}", headers={"Content-Type": media_type}, timeout=10)
        assert answer.status_code != 403, (media_type, answer.text)
    assert httpx.post(served + "/v1/sites", content=b"{}", headers={"Content-Type": "text/plain"},
                      timeout=10).status_code == 403
