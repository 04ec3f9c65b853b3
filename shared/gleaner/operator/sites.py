"""The sites registry: which sites Gleaner keeps current, what a scheduled run of each asks for, and when.

One row per ``site_domain`` in ``knowledge.sites`` (the CLI, the HTTP API and Cloud Scheduler's tick
read the same list). ``every``: a duration (``90s``, ``30m``, ``6h``, ``1d``, ``1h30m``), ``auto``
(the interval adapts to the change observed, :mod:`gleaner.operator.schedule`) or ``manual`` (never
due; crawled on demand). Per-host politeness overrides are kept on the site's ``source_hosts`` row,
where the fetcher reads them; run budgets travel with each scheduled run's request.
The statements are :mod:`gleaner.store.registry.sites`, reached through ``deps.metadata``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gleaner.errors import InvalidInput
from gleaner.operator.values import Plain
from gleaner.render.modes import parse_render_mode
from gleaner.urls import canonicalize, host_of, site_domain_of, validate_glob

if TYPE_CHECKING:
    from gleaner.app import Deps
    from gleaner.settings.config import Settings

_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def site_key(value: str) -> str:
    """A site_domain as the tenant key: lowercase ``[a-z0-9-]`` labels joined by dots, at most 253 chars."""
    key = (value or "").strip().lower()
    if not key or len(key) > 253 or key.startswith("_") or not all(_LABEL.fullmatch(p) for p in key.split(".")):
        raise InvalidInput(f"{value!r} is not a site key (lowercase labels of a-z, 0-9 and '-', joined by dots)")
    return key


def parse_duration(text: str) -> int:
    """``90s``, ``30m``, ``6h``, ``1d``, ``2w`` or combinations (``1h30m``) -> seconds (> 0)."""
    raw = (text or "").strip().lower()
    if raw.isdigit():  # 5 seconds, minutes or hours? A schedule says its unit
        raise InvalidInput(f"{text!r} has no unit: say {raw}s, {raw}m, {raw}h or {raw}d (or auto)")
    else:
        parts = _DURATION.findall(raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            raise InvalidInput(f"{text!r} is not a duration (e.g. 90s, 30m, 6h, 1d, 1h30m, or auto)")
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)
    if seconds <= 0:
        raise InvalidInput(f"a schedule interval must be positive, got {text!r}")
    return seconds


def format_duration(seconds: int | None) -> str:
    if seconds is None:
        return "manual"
    out = ""
    for unit in ("d", "h", "m", "s"):
        n, seconds = divmod(seconds, _UNIT_SECONDS[unit])
        if n:
            out += f"{n}{unit}"
    return out or "0s"


@dataclass(frozen=True, slots=True)
class SiteSpec(Plain):
    """A site's registration as the operator asked for it, validated: what ``knowledge.sites`` keeps."""

    site_domain: str
    target_url: str
    every_seconds: int | None
    adaptive: bool
    min_interval_seconds: int | None
    max_interval_seconds: int | None
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    limit: int | None
    max_depth: int | None
    delay: float | None  # per-host politeness, kept on the site's source_hosts row
    concurrency: int | None
    run_max_requests: int | None
    run_max_bytes: int | None
    run_max_seconds: float | None
    render: str  # never | auto | always (gleaner.render.modes): whether its pages are read by a browser


@dataclass(frozen=True, slots=True)
class Site(SiteSpec):
    """A registered site: its registration, and where its schedule stands."""

    id: str
    next_run_at: str | None
    last_run_id: str | None
    last_run_at: str | None
    created_at: str

    @property
    def every(self) -> str:
        return "auto" if self.adaptive else format_duration(self.every_seconds)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, **Plain.to_dict(self), "every": self.every}  # the id first, as it always came


def add_site(deps: Deps, url: str, *, site_domain: str | None = None, every: str | None = None,
             include: Sequence[str] = (), exclude: Sequence[str] = (), limit: int | None = None,
             max_depth: int | None = None, delay: float | None = None, concurrency: int | None = None,
             max_requests: int | None = None, max_bytes: int | None = None, max_seconds: float | None = None,
             render: str | None = None, now: datetime | None = None) -> Site:
    """Register a site, or update the one registered under the same site key. A scheduled site is due at once."""
    target = canonicalize(url)
    site = site_key(site_domain or site_domain_of(target))
    for name, value in (("limit", limit), ("max_depth", max_depth), ("delay", delay), ("concurrency", concurrency),
                        ("max_requests", max_requests), ("max_bytes", max_bytes), ("max_seconds", max_seconds)):
        if value is not None and (value < 0 or (name in ("limit", "concurrency") and value < 1)):
            raise InvalidInput(f"{name} must be {'at least 1' if name in ('limit', 'concurrency') else '>= 0'}")
    settings = deps.settings
    adaptive = (every or "").strip().lower() == "auto"
    if adaptive:
        seconds: int | None = settings.schedule_auto_start_seconds
    elif every is None or every.strip().lower() in ("manual", "never"):
        seconds = None
    else:
        seconds = parse_duration(every)
    spec = SiteSpec(site, target, seconds, adaptive, settings.schedule_min_seconds if adaptive else None,
                    settings.schedule_max_seconds if adaptive else None, tuple(validate_glob(g) for g in include),
                    tuple(validate_glob(g) for g in exclude), limit, max_depth, delay, concurrency, max_requests,
                    max_bytes, max_seconds, str(parse_render_mode(render)))
    host_id = deps.metadata.upsert_source_host(site, host_of(target), own_site=site_domain_of(target) == site)
    deps.metadata.save_site(spec, host_id, due_at=(now or datetime.now(UTC)) if seconds is not None else None)
    return get_site(deps, site)


def effective_politeness(settings: Settings, site: Site) -> dict[str, Any]:
    """The delay and concurrency a crawl of the site keeps, and where each comes from (the precedence of
    docs/configuration.md; robots.txt's Crawl-delay can still ask for more)."""
    from gleaner.fetch.politeness import Source, choose

    sources = settings.politeness_sources
    delay, delay_source = choose(settings.host_delay, sources.get("host_delay", Source.DEFAULT), site.delay)
    concurrency, concurrency_source = choose(settings.host_concurrency,
                                             sources.get("host_concurrency", Source.DEFAULT), site.concurrency)
    return {"delay": delay, "delay_source": str(delay_source), "concurrency": int(concurrency),
            "concurrency_source": str(concurrency_source)}


def list_sites(deps: Deps) -> list[Site]:
    return deps.metadata.sites()


def find_site(deps: Deps, site: str) -> Site | None:
    return deps.metadata.find_site(site_key(site))


def get_site(deps: Deps, site: str) -> Site:
    found = find_site(deps, site)
    if found is None:
        raise InvalidInput(f"no site {site!r} (see `gleaner sites list`)")
    return found


def remove_site(deps: Deps, site: str) -> Site:
    """Forget a site's schedule. Its documents, versions, runs and rules stay."""
    found = get_site(deps, site)
    deps.metadata.delete_site(found.id)
    return found
