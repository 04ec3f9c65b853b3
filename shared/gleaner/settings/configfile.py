"""``gleaner.toml``: the environment settings, written down once.

Keys mirror the environment variables, in either spelling: ``host_delay = 0.5`` or
``GLEANER_HOST_DELAY = 0.5`` (the ``GLEANER_`` prefix may be left out; ``google_cloud_project``
stands for ``GOOGLE_CLOUD_PROJECT``). Lists join with commas (``allow_networks = ["127.0.0.0/8"]``).

The same keys may instead sit in the ``[tool.gleaner]`` table of the current directory's
``pyproject.toml``, for a project that keeps its tools' settings there.

Precedence, highest first: the environment, ``./gleaner.toml``, ``./pyproject.toml``'s
``[tool.gleaner]``, ``$GLEANER_HOME/gleaner.toml``, the defaults. So a one-off
``GLEANER_HOST_DELAY=0 gleaner crawl …`` still does what it says, the directory you work in beats
your home-wide file, and a dedicated file beats a shared one (as ruff.toml beats pyproject.toml).
A key no setting reads is an error naming the file, so a typo is never silently ignored; a
``pyproject.toml`` without a ``[tool.gleaner]`` table is none of Gleaner's business.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gleaner.errors import ConfigError
from gleaner.settings.config import Settings, default_home

FILE_NAME = "gleaner.toml"
PYPROJECT = "pyproject.toml"


class _RecordingEnv(Mapping[str, str]):
    """An empty environment that remembers every name looked up in it."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.names.add(key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.names.add(key)
        return default

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.names.add(key)
        return False

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def setting_names() -> frozenset[str]:
    """Every environment name :meth:`Settings.from_env` reads (asked of it, so never out of date)."""
    env = _RecordingEnv()
    Settings.from_env(env)
    return frozenset(env.names - {"XDG_DATA_HOME", "XDG_CACHE_HOME"})


@dataclass(frozen=True, slots=True)
class Layered:
    """The environment the settings are built from, and the files that went into it."""

    env: dict[str, str]
    files: tuple[Path, ...]
    origins: dict[str, str] = field(default_factory=dict)  # variable -> "environment" or the file it came from


def layered_env(environ: Mapping[str, str], cwd: Path) -> Layered:
    """The environment over ./gleaner.toml over ./pyproject.toml's [tool.gleaner] over the home's file."""
    names = setting_names()
    local_path, project_path = cwd / FILE_NAME, cwd / PYPROJECT
    local = _read(local_path, names)
    project = _read_tool_table(project_path, names)
    files = [path for path, found in ((local_path, local_path.is_file()), (project_path, project is not None))
             if found]
    home_path = default_home({**(project or {}), **local, **environ}) / FILE_NAME
    from_home: dict[str, str] = {}
    if home_path.is_file() and home_path.resolve() != local_path.resolve():
        from_home = _read(home_path, names)
        files.append(home_path)
    origins: dict[str, str] = {}
    for where, values in ((str(home_path), from_home), (f"{project_path} [tool.gleaner]", project or {}),
                          (str(local_path), local), ("environment", environ)):
        origins.update(dict.fromkeys(values, where))
    return Layered({**from_home, **(project or {}), **local, **environ}, tuple(files), origins)


def _read(path: Path, names: frozenset[str]) -> dict[str, str]:
    if not path.is_file():
        return {}
    return _settings_of(_load(path), str(path), names)


def _read_tool_table(path: Path, names: frozenset[str]) -> dict[str, str] | None:
    """The ``[tool.gleaner]`` table of a pyproject.toml; None where there is no such file or table."""
    if not path.is_file():
        return None
    tool = _load(path).get("tool")
    table = tool.get("gleaner") if isinstance(tool, dict) else None
    if table is None:
        return None
    where = f"{path} [tool.gleaner]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table of settings")
    return _settings_of(table, where, names)


def _load(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable TOML file ({exc}); fix or remove it") from exc


def _settings_of(data: Mapping[str, Any], where: str, names: frozenset[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for key, value in data.items():
        name = _env_name(key, names)
        if name is None:
            raise ConfigError(f"{where}: unknown setting {key!r}; keys are the environment settings, "
                              "e.g. host_delay or GLEANER_HOST_DELAY")
        env[name] = _as_text(value, where, key)
    return env


def _env_name(key: str, names: frozenset[str]) -> str | None:
    upper = key.strip().upper()
    for candidate in (upper, "GLEANER_" + upper):
        if candidate in names:
            return candidate
    return None


def _as_text(value: Any, where: str, key: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ",".join(str(v) for v in value)
    raise ConfigError(f"{where}: {key} must be a string, a number, a boolean or a list of those")
