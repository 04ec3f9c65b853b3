"""The erasure key: a setting in the cloud, generated once and kept locally otherwise; digests differ per tenant."""

from __future__ import annotations

import stat

import pytest

from gleaner.errors import ConfigError
from gleaner.provenance.digests import erasure_digest, tenant_key
from gleaner.settings.config import Settings
from gleaner.store.documents.erasurekey import KEY_FILE, erasure_secret


def test_a_local_key_is_generated_once_readable_by_its_owner_only_and_reused(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    first = erasure_secret(settings)
    assert len(first) == 32 and erasure_secret(settings) == first
    assert stat.S_IMODE((tmp_path / "data" / KEY_FILE).stat().st_mode) == 0o600


def test_the_key_setting_wins_and_the_cloud_refuses_to_run_without_one(tmp_path):
    assert erasure_secret(Settings(data_dir=tmp_path, erasure_key="ab" * 32)) == bytes.fromhex("ab" * 32)
    with pytest.raises(ConfigError):
        erasure_secret(Settings(data_dir=tmp_path, bus="gcp"))
    with pytest.raises(ConfigError):
        erasure_secret(Settings(data_dir=tmp_path, erasure_key="abc"))
    assert Settings.from_env({"GLEANER_ERASURE_KEY": "cd" * 32, "GLEANER_KEEP_VERSIONS": "3"}).keep_versions == 3


def test_the_same_content_leaves_unrelated_digests_in_two_tenants():
    secret = bytes(range(32))
    one, two = tenant_key(secret, "a.test"), tenant_key(secret, "b.test")
    assert erasure_digest(one, b"page") != erasure_digest(two, b"page")
    assert erasure_digest(one, b"page") == erasure_digest(tenant_key(secret, "a.test"), b"page")
