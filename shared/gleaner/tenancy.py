"""The tenant key (``site_domain``) and which tenant a database transaction acts for.

A tenant key is a lowercase hostname-like name: ``[a-z0-9-]`` labels joined by
dots, at most 253 characters, no empty label, no label starting or ending with a
hyphen. It becomes a blob prefix (``domains/{site_domain}/...``) and the value
row-level security compares rows with, so anything looser would let one tenant
write under another's prefix (``victim.com/runs``) or escape it (``../x``).
Names starting with ``_`` are reserved for Gleaner's own tenants (the feed
references live under ``_references``): callers can never name them.

Every transaction on the application's engine runs for exactly one of:

- one tenant: ``with scope("example.com"):`` (stages, commands naming a site);
- every tenant, deliberately: ``with all_tenants():`` (operator commands that
  list or settle across sites); trusted code only, never from a request;
- nothing: rows of tenant-scoped tables are invisible and cannot be written.

The store reads the current choice when a transaction begins
(:func:`gleaner.store.backends.db.install_tenant_guard`). Context variables make the
choice follow the thread (and asyncio task) that set it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from gleaner.errors import InvalidInput

MAX_KEY_CHARS = 253  # a DNS name's limit: every real host fits
RESERVED_PREFIX = "_"
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_RESERVED = re.compile(r"_[a-z0-9]+(?:[-_][a-z0-9]+)*")


class InvalidTenant(InvalidInput):
    """A site_domain that is not a usable tenant key."""


def validate_site_domain(value: object, *, allow_reserved: bool = False) -> str:
    """The key unchanged if it is a valid tenant key; InvalidTenant says why not.

    ``allow_reserved`` admits Gleaner's own ``_name`` tenants: only for messages Gleaner itself
    publishes between stages, never for a key a caller typed or sent.
    """
    if not isinstance(value, str):
        raise InvalidTenant(f"site_domain must be a string, got {type(value).__name__}")
    shown = repr(value[:80]) + ("…" if len(value) > 80 else "")
    if not value:
        raise InvalidTenant("site_domain must not be empty")
    if len(value) > MAX_KEY_CHARS:
        raise InvalidTenant(f"site_domain {shown} is longer than {MAX_KEY_CHARS} characters")
    if value.startswith(RESERVED_PREFIX):
        if allow_reserved and _RESERVED.fullmatch(value):
            return value
        raise InvalidTenant(f"site_domain {shown} is reserved: names starting with '_' belong to Gleaner")
    if value != value.lower():
        raise InvalidTenant(f"site_domain {shown} must be lowercase")
    for label in value.split("."):
        if not label:
            raise InvalidTenant(f"site_domain {shown} has an empty label (a leading, trailing or double dot)")
        if not _LABEL.fullmatch(label):
            raise InvalidTenant(
                f"site_domain {shown} is not hostname-like: labels are a-z, 0-9 and inner hyphens, joined by dots")
    return value


def site_for(canonical_url: str, site_domain: str | None = None) -> str:
    """The tenant a crawl of this URL belongs to: the key given, else the host without ``www.``.

    A host that is not a valid key (``[::1]``, an underscore) needs an explicit ``--site-domain``.
    """
    from gleaner.urls import site_domain_of

    if site_domain is not None:
        return validate_site_domain(site_domain)
    derived = site_domain_of(canonical_url)
    try:
        return validate_site_domain(derived)
    except InvalidTenant as exc:
        raise InvalidTenant(f"{exc}; name the tenant with --site-domain (or 'site_domain')") from exc


# -- which tenant a transaction acts for ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scope:
    """One tenant, or every tenant (``site_domain`` None and ``all_tenants`` True), or none."""

    site_domain: str | None = None
    all_tenants: bool = False


NO_TENANT = Scope()
_current: ContextVar[Scope] = ContextVar("gleaner_tenant", default=NO_TENANT)


def current() -> Scope:
    return _current.get()


@contextmanager
def _acting_as(chosen: Scope) -> Iterator[Scope]:
    token = _current.set(chosen)
    try:
        yield chosen
    finally:
        _current.reset(token)


def scope(site_domain: str) -> AbstractContextManager[Scope]:
    """Transactions begun inside act for this tenant only (reserved names allowed: callers validate)."""
    return _acting_as(Scope(site_domain=validate_site_domain(site_domain, allow_reserved=True)))


def no_tenant() -> AbstractContextManager[Scope]:
    """Transactions begun inside see no tenant-scoped row (what code that chose no tenant gets)."""
    return _acting_as(NO_TENANT)


def all_tenants() -> AbstractContextManager[Scope]:
    """Transactions begun inside see every tenant: operator commands only (listing, sweeping, ticking)."""
    return _acting_as(Scope(all_tenants=True))


P = ParamSpec("P")
R = TypeVar("R")


def across_tenants(fn: Callable[P, R]) -> Callable[P, R]:
    """Gleaner's own machinery that serves every tenant at once (the change-event outbox and its
    deliveries): fn's transactions see all tenants, whichever tenant's stage happens to call it."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with all_tenants():
            return fn(*args, **kwargs)

    return wrapper
