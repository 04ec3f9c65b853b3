"""The address policy as pure functions: which addresses are public, which URLs are refused outright."""

from __future__ import annotations

import ipaddress

import pytest

from gleaner.fetch.addresses import AddressBook, AddressRefused, UrlRefused, check_url, is_allowed, is_public
from gleaner.settings.config import parse_networks

REFUSED = [
    "0.0.0.0", "0.1.2.3", "10.1.2.3", "100.64.0.1", "100.127.255.254", "127.0.0.1", "127.255.255.254",
    "169.254.169.254", "172.16.0.1", "172.31.255.255", "192.0.0.8", "192.0.2.1", "192.88.99.1", "192.168.1.1",
    "198.18.0.1", "198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
    "::", "::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "::ffff:8.8.8.8",
    "64:ff9b::a9fe:a9fe", "64:ff9b:1::a00:1", "100::1", "2001::1", "2001:db8::1", "2002:7f00:1::1",
    "3fff::1", "fc00::1", "fd20:ce::254", "fe80::1", "fec0::1", "ff02::1", "4000::1", "fe80::1%eth0",
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e"]


@pytest.mark.parametrize("text", REFUSED)
def test_special_purpose_addresses_are_not_public(text: str) -> None:
    assert not is_public(ipaddress.ip_address(text))
    assert not is_allowed(ipaddress.ip_address(text), ())


@pytest.mark.parametrize("text", PUBLIC)
def test_global_unicast_addresses_are_public(text: str) -> None:
    assert is_public(ipaddress.ip_address(text))


def test_allow_networks_is_the_only_way_in() -> None:
    allow = parse_networks("127.0.0.0/8, 10.0.0.0/8")
    assert is_allowed(ipaddress.ip_address("127.0.0.1"), allow)
    assert is_allowed(ipaddress.ip_address("::ffff:10.1.2.3"), allow)  # mapped form of an allowed address
    assert not is_allowed(ipaddress.ip_address("169.254.169.254"), allow)
    assert not is_allowed(ipaddress.ip_address("::1"), allow)


@pytest.mark.parametrize("url", [
    "ftp://example.com/", "file:///etc/passwd", "gopher://example.com/", "http://user:pw@example.com/",
    "http://user@example.com/", "http://127.0.0.1:80\\@example.com/", "http://exa mple.com/",
    "http://example.com/\x00", "http://[fe80::1%25eth0]/", "http:///nohost", "http://0177.0.0.1/",
])
def test_urls_that_parsers_could_disagree_on_are_refused_before_any_lookup(url: str) -> None:
    with pytest.raises(UrlRefused):
        check_url(url)


def test_the_address_book_resolves_each_host_once_and_checks_every_answer() -> None:
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["93.184.216.34", "10.0.0.1"] if host == "mixed.test" else ["93.184.216.34"]

    book = AddressBook(resolver, ())
    with pytest.raises(AddressRefused, match=r"10\.0\.0\.1"):
        book.pin("mixed.test", 80)
    with pytest.raises(AddressRefused):
        book.pin("mixed.test", 80)  # the refusal is remembered, not looked up again
    assert [str(a) for a in book.pin("public.test", 443)] == ["93.184.216.34"]
    assert [str(a) for a in book.pin("PUBLIC.test", 443)] == ["93.184.216.34"]
    assert calls == ["mixed.test", "public.test"]
    assert book.pinned("never-checked.test", 80) == ()
