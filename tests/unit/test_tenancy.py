"""The tenant key: what a site_domain may be, wherever it enters (CLI, HTTP bodies, messages)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gleaner.cli import main
from gleaner.cloud.entry import crawl_request_from
from gleaner.errors import InvalidInput
from gleaner.messages import CrawlMapped, CrawlRequested, ScrapeBatch, SnapshotsWritten, decode, encode
from gleaner.runtime.runner import new_request
from gleaner.tenancy import InvalidTenant, all_tenants, current, no_tenant, scope, site_for, validate_site_domain

VALID = ["example.com", "docs.example.com", "a", "127.0.0.1", "xn--bcher-kva.example", "a-b.c-d.e",
         "x" * 63 + ".com", ".".join(["a" * 49] * 5) + ".abc"]  # the last: 253 characters

INVALID = {
    "Example.com": "lowercase",
    "EXAMPLE.COM": "lowercase",
    "victim.com/runs": "not hostname-like",
    "../escape": "empty label",
    ".example.com": "empty label",
    "example.com.": "empty label",
    "a..b": "empty label",
    "..": "empty label",
    "_references": "reserved",
    "_x": "reserved",
    "x" * 254: "longer than 253",
    "": "empty",
    "-a.com": "not hostname-like",
    "a-.com": "not hostname-like",
    "a_b.com": "not hostname-like",
    "a b.com": "not hostname-like",
    "exa\u00e9mple.com": "not hostname-like",
    "a.com\x00": "not hostname-like",
    "x" * 64 + ".com": "not hostname-like",
}


@pytest.mark.parametrize("key", VALID)
def test_hostname_like_lowercase_keys_are_valid_tenants(key):
    assert len(VALID[-1]) == 253
    assert validate_site_domain(key) == key


@pytest.mark.parametrize(("key", "reason"), INVALID.items(), ids=[repr(k[:20]) for k in INVALID])
def test_anything_else_is_refused_with_a_reason(key, reason):
    with pytest.raises(InvalidTenant, match=reason):
        validate_site_domain(key)


def test_reserved_names_are_only_for_gleaners_own_messages():
    assert validate_site_domain("_references", allow_reserved=True) == "_references"
    with pytest.raises(InvalidTenant):
        validate_site_domain("_../x", allow_reserved=True)
    with pytest.raises(InvalidTenant):
        validate_site_domain(7)


def test_a_crawl_request_cannot_name_a_bad_or_reserved_tenant():
    for key in ("victim.com/runs", "_references", "../escape", "UPPER.com"):
        with pytest.raises(InvalidInput):
            new_request("https://example.com/", site_domain=key)
        with pytest.raises(InvalidInput):
            crawl_request_from(json.dumps({"url": "https://example.com/", "site_domain": key}).encode(), {})
        with pytest.raises(InvalidInput):
            decode(json.dumps({"type": "CrawlRequested", "v": 1, "data": {
                "request_id": "r", "target_url": "https://example.com/", "site_domain": key}}))
    assert new_request("https://example.com/", site_domain="example.com").site_domain == "example.com"


def test_stage_messages_refuse_malformed_keys_but_carry_gleaners_reserved_tenant():
    written = SnapshotsWritten(run_id=None, site_domain="_references")
    assert decode(encode(written)) == written
    for cls, extra in ((CrawlMapped, {}), (ScrapeBatch, {"batch_no": 0})):
        with pytest.raises(InvalidInput, match="site_domain"):
            decode(json.dumps({"type": cls.__name__, "v": 1,
                               "data": {"run_id": "r", "site_domain": "a/../b", **extra}}))
    assert CrawlRequested(request_id="r", target_url="https://x.test/").site_domain is None


def test_a_host_that_is_no_valid_key_asks_for_an_explicit_tenant():
    assert site_for("https://www.example.com/a") == "example.com"
    assert site_for("https://example.com/a", "other.example") == "other.example"
    with pytest.raises(InvalidTenant, match="--site-domain"):
        site_for("https://my_host.example/")


def test_the_crawl_command_refuses_a_bad_tenant_before_touching_anything(tmp_path):
    result = CliRunner().invoke(main, ["crawl", "https://example.com/", "--site-domain", "victim.com/runs"],
                                env={"GLEANER_HOME": str(tmp_path / "g")})
    assert result.exit_code == 2
    assert "not hostname-like" in result.output
    assert not (tmp_path / "g").exists()


def test_a_scope_names_one_tenant_or_all_or_none_and_ends_with_its_block():
    with no_tenant():
        assert current().site_domain is None and not current().all_tenants
        with scope("example.com"):
            assert current().site_domain == "example.com"
            with all_tenants():
                assert current().all_tenants
            assert current().site_domain == "example.com"
        assert current().site_domain is None and not current().all_tenants
    with pytest.raises(InvalidTenant), scope("a/b"):
        pass
