"""The Host rule and the credential-less rule of `gleaner serve` (gleaner.serving.hostgate), on plain environs."""

from __future__ import annotations

import pytest

from gleaner.serving.hostgate import HostPolicy, client_address, host_name, is_forwarding_header
from gleaner.settings.envvalues import parse_networks


def environ(host: str | None, peer: str = "127.0.0.1", **headers: str) -> dict[str, str]:
    env = {"REMOTE_ADDR": peer, **{f"HTTP_{k.upper()}": v for k, v in headers.items()}}
    if host is not None:
        env["HTTP_HOST"] = host
    return env


@pytest.mark.parametrize(("raw", "name"), [
    ("127.0.0.1:8080", "127.0.0.1"), ("LocalHost.:80", "localhost"), ("[::1]:8080", "::1"), ("[::1]", "::1"),
    ("evil.test", "evil.test"), ("", None), ("a b", None), ("x:y", None), ("[::1", None), ("u@127.0.0.1", None),
    ("évil.test", None), ("[::1]x", None),
])
def test_the_host_header_is_read_as_a_bare_lowercase_name(raw, name):
    assert host_name(environ(raw)) == name


def test_a_loopback_bind_answers_loopback_names_only():
    policy = HostPolicy.for_bind("127.0.0.1")
    for ok in ("127.0.0.1:1", "localhost:1", "127.0.0.2", "[::1]:1", "[::ffff:127.0.0.1]:1"):
        assert policy.refusal(environ(ok)) is None, ok
    for bad in ("evil.test:1", "192.0.2.1", "localhost.evil.test", None):
        assert policy.refusal(environ(bad)) is not None, bad


def test_a_wildcard_bind_answers_ip_literals_and_its_own_names_but_not_other_names():
    policy = HostPolicy.for_bind("0.0.0.0", ["gleaner.example.org"])
    for ok in ("192.0.2.7:8080", "[2001:db8::1]:80", "localhost", "gleaner.example.org"):
        assert policy.allows(host_name(environ(ok))), ok
    assert not policy.allows("evil.test")


def test_credential_free_needs_a_loopback_peer_a_loopback_host_and_no_proxy():
    policy = HostPolicy.for_bind("0.0.0.0")
    assert policy.credential_free(environ("127.0.0.1:8080"))
    assert policy.credential_free(environ("localhost", peer="::ffff:127.0.0.1"))
    assert not policy.credential_free(environ("192.0.2.7", peer="127.0.0.1"))  # a loopback peer alone is not enough
    assert not policy.credential_free(environ("127.0.0.1", peer="192.0.2.9"))  # nor is a loopback Host
    assert not policy.credential_free(environ("127.0.0.1", x_forwarded_for="198.51.100.1"))
    assert not policy.credential_free(environ("127.0.0.1", forwarded="for=198.51.100.1"))
    assert not HostPolicy.for_bind("127.0.0.1", ["gleaner.example.org"]).credential_free(environ("127.0.0.1"))


@pytest.mark.parametrize("header", [
    "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Server",
    "X-Original-Forwarded-For", "X-Real-IP", "Client-IP", "True-Client-IP", "CF-Connecting-IP", "X-Client-IP",
    "X-Cluster-Client-IP", "Via", "X-Originating-IP", "X-Azure-ClientIP", "Fastly-Client-IP", "X-Original-Host",
    "Remote-Addr",
])
def test_every_forwarding_style_header_makes_a_loopback_request_need_a_credential(header):
    policy = HostPolicy.for_bind("127.0.0.1")
    key = header.replace("-", "_")
    assert is_forwarding_header(header) and is_forwarding_header(key.lower())
    assert not policy.credential_free(environ("127.0.0.1", **{key: "198.51.100.1"}))


@pytest.mark.parametrize("header", ["Accept", "Accept-Language", "User-Agent", "Cookie", "Origin", "Referer",
                                    "Sec-Fetch-Site", "Sec-Ch-Ua-Platform", "Upgrade-Insecure-Requests",
                                    "If-None-Match", "Cache-Control", "Content-Type", "Authorization", "Connection",
                                    "Priority"])
def test_a_browsers_ordinary_headers_are_not_forwarding_headers(header):
    assert not is_forwarding_header(header)
    assert HostPolicy.for_bind("127.0.0.1").credential_free(environ("127.0.0.1", **{header.replace("-", "_"): "x"}))


def test_an_absolute_form_target_is_for_its_authority_not_the_host_header():
    policy = HostPolicy.for_bind("127.0.0.1")
    evil = {**environ("127.0.0.1"), "REQUEST_URI": "http://evil.test/v1/sites"}
    assert host_name(evil) == "evil.test"
    assert not policy.credential_free(evil) and policy.refusal(evil) is not None
    own = {**environ("127.0.0.1"), "REQUEST_URI": "http://127.0.0.1:8080/v1/sites?x=1"}
    assert policy.credential_free(own) and policy.refusal(own) is None
    assert policy.credential_free({**environ("127.0.0.1"), "REQUEST_URI": "/v1/sites"})
    assert not policy.credential_free({**environ("127.0.0.1"), "REQUEST_URI": "http://u@127.0.0.1/v1/sites"})


def test_the_client_behind_a_trusted_proxy_is_the_nearest_untrusted_forwarded_address():
    trusted = parse_networks("127.0.0.0/8,10.0.0.0/8")
    via_proxy = environ("x", peer="127.0.0.1", x_forwarded_for="6.6.6.6, 198.51.100.7, 10.1.2.3")
    assert client_address(via_proxy, trusted) == "198.51.100.7"  # the left end is the client's own word
    direct = environ("x", peer="203.0.113.5", x_forwarded_for="198.51.100.7")
    assert client_address(direct, trusted) == "203.0.113.5"
    rfc7239 = environ("x", peer="127.0.0.1", forwarded='for="[2001:db8::1]:4711"')
    assert client_address(rfc7239, trusted) == "2001:db8::1"
    with_port = environ("x", peer="127.0.0.1", x_forwarded_for="198.51.100.8:5000")
    assert client_address(with_port, trusted) == "198.51.100.8"
    assert client_address(environ("x", peer="127.0.0.1"), trusted) == "127.0.0.1"
    assert client_address(via_proxy, ()) == "127.0.0.1"  # nothing trusted: the peer
