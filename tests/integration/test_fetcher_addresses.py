"""The address policy against a real loopback server: no spelling of a private address gets a request through.

The site listens on 127.0.0.1. Without ``GLEANER_ALLOW_NETWORKS`` every spelling below must end
``unavailable`` and the site's request log must stay empty; with ``127.0.0.0/8`` allowed, the odd
spellings are resolved and checked like any name (a control that the URLs really point at the site).
The real resolver (getaddrinfo) is used except where a test needs a name to answer something chosen:
there an injected resolver callable stands in for DNS, because no test may depend on the network.
"""

from __future__ import annotations

import datetime
import ssl
from collections.abc import Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gleaner.demosite.testsite import Page, TestSite, redirect_page
from gleaner.fetch.fetcher import Fetcher
from gleaner.fetch.types import FetchOutcome
from gleaner.settings.config import Settings, parse_networks

LOOPBACK = parse_networks("127.0.0.0/8")


def _settings(allow: str = "") -> Settings:
    return Settings(allow_networks=parse_networks(allow), host_delay=0.0, fetch_timeout=3.0)


@pytest.fixture
def site() -> Iterator[TestSite]:
    pages = {"/": Page("<html><body>home</body></html>"), "/robots.txt": Page("", content_type="text/plain")}
    with TestSite(pages, max_seconds=60) as running:
        yield running


SPELLINGS = [
    "http://127.0.0.1:{p}/",
    "https://127.0.0.1:{p}/",
    "http://localhost:{p}/",
    "http://LOCALHOST:{p}/",
    "http://localhost.:{p}/",
    "http://127.1:{p}/",
    "http://127.0.1:{p}/",
    "http://2130706433:{p}/",
    "http://0x7f000001:{p}/",
    "http://0x7f.0.0.1:{p}/",
    "http://0x7f.1:{p}/",
    "http://0177.0.0.1:{p}/",
    "http://017700000001:{p}/",
    "http://127.000.000.001:{p}/",
    "http://0:{p}/",
    "http://0.0.0.0:{p}/",
    "http://[::1]:{p}/",
    "http://[::]:{p}/",
    "http://[::ffff:127.0.0.1]:{p}/",
    "http://[::ffff:7f00:1]:{p}/",
    "http://[0:0:0:0:0:ffff:127.0.0.1]:{p}/",
    "http://[::127.0.0.1]:{p}/",
    "http://[64:ff9b::7f00:1]:{p}/",
    "http://[fe80::1%25lo]:{p}/",
    "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11:{p}/",  # full-width digits
    "http://127\u30020\u30020\u30021:{p}/",  # ideographic full stops
    "http://\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3:{p}/",  # circled letters: localhost
    "http://user@127.0.0.1:{p}/",
    "http://evil.test@127.0.0.1:{p}/",
    "http://user:secret@localhost:{p}/",
    "http://127.0.0.1:{p}\\@evil.test/",
    "http://127.0.\t0.1:{p}/",
    "http://%31%32%37.0.0.1:{p}/",
    "http://localhost%00.evil.test:{p}/",
    "HTTP://127.0.0.1:{p}/",
]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_no_spelling_of_loopback_reaches_the_site_without_allow_networks(site: TestSite, spelling: str) -> None:
    url = spelling.format(p=site.port)
    with Fetcher(_settings()) as fetcher:
        result = fetcher.fetch(url)
    assert result.outcome is FetchOutcome.UNAVAILABLE, result
    assert site.log == []


def test_there_are_at_least_thirty_spellings() -> None:
    assert len(SPELLINGS) >= 30


@pytest.mark.parametrize("spelling", ["http://0x7f.0.0.1:{p}/", "http://0x7f000001:{p}/", "http://localhost.:{p}/",
                                      "http://[::ffff:127.0.0.1]:{p}/"])
def test_odd_spellings_are_resolved_and_checked_not_just_read(site: TestSite, spelling: str) -> None:
    # Control: with loopback allowed the same URLs do reach the site, so the refusals above are the policy's.
    with Fetcher(_settings("127.0.0.0/8")) as fetcher:
        result = fetcher.fetch(spelling.format(p=site.port))
    assert result.outcome is FetchOutcome.FETCHED, result
    assert site.paths() == ["/robots.txt", "/"]


@pytest.mark.parametrize("spelling", ["http://127.1:{p}/", "http://2130706433:{p}/", "http://017700000001:{p}/",
                                      "http://127.0.1:{p}/"])
def test_legacy_numeric_ipv4_spellings_are_refused_as_urls_even_where_the_address_is_allowed(
        site: TestSite, spelling: str) -> None:
    # getaddrinfo reads these as addresses while aiohttp refuses them: no parser may disagree with another.
    with Fetcher(_settings("127.0.0.0/8")) as fetcher:
        result = fetcher.fetch(spelling.format(p=site.port))
    assert result.outcome is FetchOutcome.UNAVAILABLE
    assert result.reason.startswith("refused-url: legacy numeric IPv4 spelling"), result.reason
    assert site.log == []


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/",
                                    "http://[::1]:{p}/", "http://inner.test/", "http://metadata.google.internal/"])
def test_a_redirect_to_a_private_address_is_refused_at_that_hop(target: str) -> None:
    pages = {"/robots.txt": Page("", content_type="text/plain")}
    with TestSite(pages, max_seconds=30) as site:
        pages["/go"] = redirect_page(target.format(p=site.port))

        def resolver(host: str, port: int) -> list[str]:
            return {"inner.test": ["10.0.0.5"], "metadata.google.internal": ["169.254.169.254"]}.get(host, [])

        with Fetcher(_settings("127.0.0.0/8"), resolver=resolver) as fetcher:
            result = fetcher.fetch(site.url + "/go")
    assert result.outcome is FetchOutcome.UNAVAILABLE
    assert "redirect target" in result.reason and ("non-public" in result.reason or "no addresses" in result.reason)
    assert site.paths() == ["/robots.txt", "/go"]


def test_one_lookup_per_host_so_a_rebinding_name_cannot_change_where_we_connect(site: TestSite) -> None:
    """The name answers loopback (allowed) once, then the metadata server.

    Only one lookup may happen; every request must reach the site, which proves the transport
    connected to the checked address: ``rebind.test`` exists in no real DNS, so any lookup of
    its own by httpx would fail, and a second call to our resolver would be refused.
    """
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["169.254.169.254"]

    site.pages["/a"] = Page("<html><body>a</body></html>")
    url = f"http://rebind.test:{site.port}"
    with Fetcher(_settings("127.0.0.0/8"), resolver=rebinding) as fetcher:
        results = [fetcher.fetch(url + path) for path in ("/", "/a", "/")]
    assert [r.outcome for r in results] == [FetchOutcome.FETCHED] * 3
    assert calls == ["rebind.test"]
    assert site.paths() == ["/robots.txt", "/", "/a", "/"]
    assert {r.headers["host"] for r in site.log} == {f"rebind.test:{site.port}"}
    assert {r.client for r in site.log} == {"127.0.0.1"}


def test_a_host_with_one_private_address_among_public_ones_is_refused(site: TestSite) -> None:
    def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "127.0.0.1"]

    with Fetcher(_settings(), resolver=resolver) as fetcher:
        result = fetcher.fetch(f"http://mixed.test:{site.port}/")
    assert result.outcome is FetchOutcome.UNAVAILABLE and "127.0.0.1" in result.reason
    assert site.log == []


def _tls_pair(name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A CA, a server certificate for ``name`` signed by it; (server context, client context trusting the CA)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Gleaner test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    import tempfile

    with tempfile.NamedTemporaryFile("wb", suffix=".pem") as pem:
        pem.write(cert.public_bytes(serialization.Encoding.PEM))
        pem.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
        pem.flush()
        server.load_cert_chain(pem.name)
    client = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode("ascii"))
    return server, client


def test_tls_verifies_the_url_host_name_although_the_connection_goes_to_the_pinned_address() -> None:
    server_ctx, client_ctx = _tls_pair("good.test")
    pages = {"/": Page("<html><body>tls</body></html>"), "/robots.txt": Page("", content_type="text/plain")}
    with TestSite(pages, max_seconds=30, ssl_context=server_ctx) as site:
        def resolver(host: str, port: int) -> list[str]:
            return ["127.0.0.1"]

        with Fetcher(_settings("127.0.0.0/8"), resolver=resolver, verify=client_ctx) as fetcher:
            good = fetcher.fetch(f"https://good.test:{site.port}/")
            evil = fetcher.fetch(f"https://evil.test:{site.port}/")
    assert good.outcome is FetchOutcome.FETCHED, good
    # robots.txt is the first request to evil.test; it fails verification, so the host is robots-unknown.
    assert evil.outcome is FetchOutcome.ROBOTS_UNKNOWN and "CERTIFICATE_VERIFY_FAILED" in evil.reason
    assert site.paths() == ["/robots.txt", "/"]  # nothing was asked over the mismatched connection


def test_an_unreachable_checked_address_falls_back_to_the_next_checked_one(site: TestSite) -> None:
    calls: list[str] = []

    def two_answers(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.2", "127.0.0.1"]  # nothing listens on 127.0.0.2: the connection is refused

    with Fetcher(_settings("127.0.0.0/8"), resolver=two_answers) as fetcher:
        result = fetcher.fetch(f"http://two.test:{site.port}/")
    assert result.outcome is FetchOutcome.FETCHED
    assert calls == ["two.test"]
    assert site.paths() == ["/robots.txt", "/"]
    assert {r.client for r in site.log} == {"127.0.0.1"}
