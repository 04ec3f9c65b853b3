"""The Host rule and the credential-less rule of `gleaner serve` (gleaner.serving.hostgate), on plain environs."""

from __future__ import annotations

import pytest

from gleaner.serving.hostgate import HostPolicy, host_name


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
