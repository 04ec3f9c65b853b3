"""gleaner.toml and GLEANER_HOME: where settings and data come from."""

from __future__ import annotations

from pathlib import Path

import pytest

from gleaner.cli.info import mask_url
from gleaner.errors import ConfigError
from gleaner.settings.config import Settings, default_home
from gleaner.settings.configfile import layered_env, setting_names


def test_home_defaults_to_the_xdg_data_dir_and_never_to_the_current_directory(tmp_path):
    assert default_home({"GLEANER_HOME": str(tmp_path / "g")}) == tmp_path / "g"
    assert default_home({"XDG_DATA_HOME": str(tmp_path / "xdg")}) == tmp_path / "xdg" / "gleaner"
    assert default_home({"XDG_DATA_HOME": "relative/ignored"}) == Path.home() / ".local" / "share" / "gleaner"
    assert default_home({}) == Path.home() / ".local" / "share" / "gleaner"
    assert Settings.from_env({"GLEANER_HOME": "rel"}).data_dir.is_absolute()


def test_the_environment_wins_over_the_current_directory_which_wins_over_home(tmp_path):
    cwd, home = tmp_path / "project", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    (home / "gleaner.toml").write_text('host_delay = 3\nfetch_timeout = 7\nGLEANER_MAX_REDIRECTS = 2\n')
    (cwd / "gleaner.toml").write_text('host_delay = 2\nallow_networks = ["127.0.0.0/8", "10.0.0.0/8"]\n'
                                      f'home = "{home}"\n')
    layered = layered_env({"GLEANER_FETCH_TIMEOUT": "9"}, cwd)
    settings = Settings.from_env(layered.env)
    assert layered.files == (cwd / "gleaner.toml", home / "gleaner.toml")
    assert settings.data_dir == home
    assert settings.host_delay == 2.0  # the current directory's file over the home's
    assert settings.fetch_timeout == 9.0  # the environment over both
    assert settings.max_redirects == 2  # the home's file where nothing else says
    assert [str(n) for n in settings.allow_networks] == ["127.0.0.0/8", "10.0.0.0/8"]


def test_an_unknown_key_or_a_broken_file_is_an_error_naming_the_file(tmp_path):
    (tmp_path / "gleaner.toml").write_text("hots_delay = 1\n")
    with pytest.raises(ConfigError, match=r"gleaner\.toml: unknown setting 'hots_delay'"):
        layered_env({}, tmp_path)
    (tmp_path / "gleaner.toml").write_text("host_delay = \n")
    with pytest.raises(ConfigError, match="not a readable TOML file"):
        layered_env({}, tmp_path)


def test_every_environment_setting_is_a_config_file_key():
    names = setting_names()
    assert {"GLEANER_ALLOW_NETWORKS", "GLEANER_HOME", "GLEANER_HOST_DELAY", "GOOGLE_CLOUD_PROJECT"} <= names


def test_info_masks_passwords_in_urls():
    assert mask_url("postgresql://app:s3cret@db.internal:5432/gleaner") == "postgresql://app:***@db.internal:5432/gleaner"
    assert mask_url("postgresql://app@db/g?password=s3cret&host=/run/pg") == "postgresql://app@db/g?password=***&host=/run/pg"
    assert mask_url("gs://bucket/prefix") == "gs://bucket/prefix"


def test_pyproject_tool_gleaner_sits_between_the_directorys_gleaner_toml_and_the_homes(tmp_path):
    cwd, home = tmp_path / "project", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    (home / "gleaner.toml").write_text("host_delay = 5\nfetch_timeout = 6\nmax_redirects = 1\nmax_retries = 4\n")
    (cwd / "pyproject.toml").write_text(
        '[project]\nname = "mine"\n\n[tool.ruff]\nline-length = 100\n\n'
        f'[tool.gleaner]\nhome = "{home}"\nhost_delay = 3\nfetch_timeout = 4\nGLEANER_MAX_REDIRECTS = 2\n')
    (cwd / "gleaner.toml").write_text("host_delay = 2\n")
    layered = layered_env({"GLEANER_MAX_RETRIES": "0"}, cwd)
    settings = Settings.from_env(layered.env)
    assert layered.files == (cwd / "gleaner.toml", cwd / "pyproject.toml", home / "gleaner.toml")
    assert settings.data_dir == home  # GLEANER_HOME may come from [tool.gleaner] too
    assert settings.host_delay == 2.0  # ./gleaner.toml over [tool.gleaner]
    assert settings.fetch_timeout == 4.0  # [tool.gleaner] over the home's file
    assert settings.max_redirects == 2
    assert settings.max_retries == 0  # the environment over every file


def test_a_pyproject_without_a_tool_gleaner_table_is_ignored(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mine"\n\n[tool.black]\nline-length = 88\n')
    layered = layered_env({"GLEANER_HOME": str(tmp_path / "home")}, tmp_path)
    assert layered.files == ()
    assert Settings.from_env(layered.env).host_delay == Settings().host_delay


def test_an_unknown_key_in_tool_gleaner_is_an_error_naming_the_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.gleaner]\nhots_delay = 1\n")
    with pytest.raises(ConfigError, match=r"pyproject\.toml \[tool\.gleaner\]: unknown setting 'hots_delay'"):
        layered_env({}, tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool]\ngleaner = "fast"\n')
    with pytest.raises(ConfigError, match=r"\[tool\.gleaner\]: must be a table"):
        layered_env({}, tmp_path)
