"""Reading one setting's value from the environment: numbers, switches, paths and lists, each with a
clear :class:`ConfigError` naming the variable when the value is unusable (:mod:`gleaner.settings.config`)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

from gleaner.errors import ConfigError

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def env_int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def env_float(env: Mapping[str, str], name: str, default: float, minimum: float = 0.0) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def default_home(env: Mapping[str, str]) -> Path:
    """Where embedded state lives: GLEANER_HOME, else $XDG_DATA_HOME/gleaner, else ~/.local/share/gleaner.

    Never the current directory: every command must see the same runs from wherever it is started.
    """
    home = env.get("GLEANER_HOME", "").strip()
    if home:
        return Path(home).expanduser().absolute()
    xdg = env.get("XDG_DATA_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():  # the XDG spec says to ignore a relative value
        return Path(xdg) / "gleaner"
    return Path.home() / ".local" / "share" / "gleaner"


def default_pg_templates(env: Mapping[str, str]) -> Path | None:
    """GLEANER_PG_TEMPLATE_DIR ("off": none), else $XDG_CACHE_HOME/gleaner/pg-templates, else ~/.cache/…

    A cache: deleting it costs the next new data dir one initdb and the migrations.
    """
    value = env.get("GLEANER_PG_TEMPLATE_DIR", "").strip()
    if value.lower() == "off":
        return None
    if value:
        return Path(value).expanduser().absolute()
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "gleaner" / "pg-templates"


def env_choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (case-insensitive; unset or empty: the first)."""
    value = env.get(name, "").strip().lower() or choices[0]
    if value not in choices:
        raise ConfigError(f"{name} must be {' or '.join(repr(c) for c in choices)}, got {value!r}")
    return value


def env_embed_model(env: Mapping[str, str], name: str) -> str:
    return env_choice(env, name, ("static", "minilm"))


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def env_http_auth(env: Mapping[str, str], name: str) -> HttpAuth:
    raw = env.get(name, "").strip().lower() or HttpAuth.BEARER.value
    try:
        return HttpAuth(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be 'bearer' or 'iam', got {raw!r}") from exc


def parse_networks(raw: str, name: str = "GLEANER_ALLOW_NETWORKS") -> tuple[IPNetwork, ...]:
    """Parse a comma-separated list of CIDRs; an empty string allows nothing extra."""
    networks: list[IPNetwork] = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError as exc:
            raise ConfigError(f"{name}: {part!r} is not a CIDR network") from exc
    return tuple(networks)


class HttpAuth(StrEnum):
    """How HTTP triggers admit operators (:mod:`gleaner.cloud.callers`)."""

    BEARER = "bearer"  # the shared secret only
    IAM = "iam"  # also any identity Cloud Run's IAM admitted (the function has no public invoker)
