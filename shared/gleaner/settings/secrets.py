"""The operator's shared secret and the host names ``gleaner serve`` answers to, read from the environment."""

from __future__ import annotations

from collections.abc import Mapping

from gleaner.errors import ConfigError

# The operator's bearer opens every tenant; a short one falls to guessing (the login is throttled, the
# webhook and the functions are not). 32 characters is 16 random bytes in hex, 24 in base64.
MIN_SECRET_CHARS = 32


def webhook_secret_of(env: Mapping[str, str]) -> str | None:
    """``GLEANER_WEBHOOK_SECRET``, or None when unset; ConfigError, naming it, when it is too short."""
    secret = env.get("GLEANER_WEBHOOK_SECRET") or None
    if secret is not None and len(secret) < MIN_SECRET_CHARS:
        raise ConfigError(
            f"GLEANER_WEBHOOK_SECRET is {len(secret)} characters; it must be at least {MIN_SECRET_CHARS}"
            f" (it opens every site and workspace). Make one with: {SECRET_RECIPE}")
    return secret


SECRET_RECIPE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


def allowed_hosts_of(raw: str) -> tuple[str, ...]:
    """``GLEANER_ALLOWED_HOSTS``: comma-separated host names or IPv4 addresses (no scheme, port or path)."""
    names = []
    for item in raw.split(","):
        name = item.strip().lower().rstrip(".")
        if not name:
            continue
        if not all(c.isascii() and (c.isalnum() or c in "-.") for c in name):
            raise ConfigError(f"GLEANER_ALLOWED_HOSTS holds {item.strip()!r}: give host names only, "
                              "comma-separated (e.g. gleaner.example.org), without scheme, port or path")
        names.append(name)
    return tuple(names)
