"""``gleaner.toml``: the environment settings, written down once.

Keys mirror the environment variables, in either spelling: ``host_delay = 0.5`` or
``GLEANER_HOST_DELAY = 0.5`` (the ``GLEANER_`` prefix may be left out; ``google_cloud_project``
stands for ``GOOGLE_CLOUD_PROJECT``). Lists join with commas (``allow_networks = ["127.0.0.0/8"]``).

Looked up in the current directory, then in ``GLEANER_HOME``. The environment wins over a file and
the current directory's file over the home's, so a one-off ``GLEANER_HOST_DELAY=0 gleaner crawl …``
still does what it says. A key no setting reads is an error naming the file, so a typo is never
silently ignored.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gleaner.config import Settings, default_home
from gleaner.errors import ConfigError

FILE_NAME = "gleaner.toml"


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
    return frozenset(env.names - {"XDG_DATA_HOME"})


@dataclass(frozen=True, slots=True)
class Layered:
    """The environment the settings are built from, and the files that went into it."""

    env: dict[str, str]
    files: tuple[Path, ...]


def layered_env(environ: Mapping[str, str], cwd: Path) -> Layered:
    """The home's file under the current directory's file under the environment."""
    names = setting_names()
    local = _read(cwd / FILE_NAME, names)
    home = default_home({**local, **environ})
    files = [cwd / FILE_NAME] if (cwd / FILE_NAME).is_file() else []
    home_file = home / FILE_NAME
    from_home: dict[str, str] = {}
    if home_file.is_file() and home_file.resolve() != (cwd / FILE_NAME).resolve():
        from_home = _read(home_file, names)
        files.append(home_file)
    return Layered({**from_home, **local, **environ}, tuple(files))


def _read(path: Path, names: frozenset[str]) -> dict[str, str]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable TOML file ({exc}); fix or remove it") from exc
    env: dict[str, str] = {}
    for key, value in data.items():
        name = _env_name(key, names)
        if name is None:
            raise ConfigError(f"{path}: unknown setting {key!r}; keys are the environment settings, "
                              "e.g. host_delay or GLEANER_HOST_DELAY")
        env[name] = _as_text(value, path, key)
    return env


def _env_name(key: str, names: frozenset[str]) -> str | None:
    upper = key.strip().upper()
    for candidate in (upper, "GLEANER_" + upper):
        if candidate in names:
            return candidate
    return None


def _as_text(value: Any, path: Path, key: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ",".join(str(v) for v in value)
    raise ConfigError(f"{path}: {key} must be a string, a number, a boolean or a list of those")
