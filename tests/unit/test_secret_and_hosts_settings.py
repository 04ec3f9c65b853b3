"""GLEANER_WEBHOOK_SECRET's minimum length and GLEANER_ALLOWED_HOSTS, read from the environment."""

from __future__ import annotations

import pytest

from gleaner.errors import ConfigError
from gleaner.settings.config import Settings

LONG = "x" * 32


def test_a_short_secret_is_refused_naming_the_variable_and_how_to_make_one():
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"GLEANER_WEBHOOK_SECRET": "s3cret"})
    assert "GLEANER_WEBHOOK_SECRET is 6 characters; it must be at least 32" in str(refused.value)
    assert "secrets.token_urlsafe" in str(refused.value)
    assert Settings.from_env({"GLEANER_WEBHOOK_SECRET": LONG}).webhook_secret == LONG
    assert Settings.from_env({}).webhook_secret is None


def test_allowed_hosts_are_bare_lowercase_names():
    settings = Settings.from_env({"GLEANER_ALLOWED_HOSTS": " Gleaner.Example.org. , 192.0.2.7,,"})
    assert settings.allowed_hosts == ("gleaner.example.org", "192.0.2.7")
    for bad in ("https://gleaner.example.org", "gleaner.example.org:443", "a/b", "a b"):
        with pytest.raises(ConfigError, match="GLEANER_ALLOWED_HOSTS"):
            Settings.from_env({"GLEANER_ALLOWED_HOSTS": bad})
