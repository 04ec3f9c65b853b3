"""The sites registry: which sites Gleaner keeps current, what a scheduled run of each asks for, and when.

One row per ``site_domain`` in ``knowledge.sites`` (the CLI, the HTTP API and Cloud Scheduler's tick
read the same list). ``every``: a duration (``90s``, ``30m``, ``6h``, ``1d``, ``1h30m``), ``auto``
(the interval adapts to the change observed, :mod:`gleaner.operator.schedule`) or ``manual`` (never
due; crawled on demand). Per-host politeness overrides are kept on the site's ``source_hosts`` row,
where the fetcher reads them; run budgets travel with each scheduled run's request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from gleaner.errors import InvalidInput
from gleaner.urls import canonicalize, host_of, site_domain_of, validate_glob

if TYPE_CHECKING:
    from gleaner.app import Deps

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
    """``90``, ``90s``, ``30m``, ``6h``, ``1d``, ``2w`` or combinations (``1h30m``) -> seconds (> 0)."""
    raw = (text or "").strip().lower()
    if raw.isdigit():
        seconds = int(raw)
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
class Site:
    id: str
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
    delay: float | None
    concurrency: int | None
    run_max_requests: int | None
    run_max_bytes: int | None
    run_max_seconds: float | None
    next_run_at: str | None
    last_run_id: str | None
    last_run_at: str | None
    created_at: str

    @property
    def every(self) -> str:
        return "auto" if self.adaptive else format_duration(self.every_seconds)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["every"] = self.every
        data["include"], data["exclude"] = list(self.include), list(self.exclude)
        return data


_COLUMNS = (
    "s.id, s.site_domain, s.target_url, s.every_seconds, s.adaptive, s.min_interval_seconds,"
    " s.max_interval_seconds, s.include, s.exclude, s.url_limit, s.max_depth, h.host_delay_seconds,"
    " h.host_concurrency, s.run_max_requests, s.run_max_bytes, s.run_max_seconds, s.next_run_at, s.last_run_id,"
    " s.last_run_at, s.created_at"
)
_FROM = " FROM knowledge.sites s LEFT JOIN knowledge.source_hosts h ON h.id = s.source_host_id"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def site_from_row(r: Sequence[Any]) -> Site:
    return Site(str(r[0]), r[1], r[2], r[3], bool(r[4]), r[5], r[6], tuple(r[7] or ()), tuple(r[8] or ()), r[9],
                r[10], r[11], r[12], r[13], r[14], r[15], _iso(r[16]), str(r[17]) if r[17] else None, _iso(r[18]),
                r[19].isoformat())


def add_site(deps: Deps, url: str, *, site_domain: str | None = None, every: str | None = None,
             include: Sequence[str] = (), exclude: Sequence[str] = (), limit: int | None = None,
             max_depth: int | None = None, delay: float | None = None, concurrency: int | None = None,
             max_requests: int | None = None, max_bytes: int | None = None, max_seconds: float | None = None,
             now: datetime | None = None) -> Site:
    """Register a site, or update the one registered under the same site key. A scheduled site is due at once."""
    target = canonicalize(url)
    site = site_key(site_domain or site_domain_of(target))
    include = [validate_glob(g) for g in include]
    exclude = [validate_glob(g) for g in exclude]
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
    host_id = deps.metadata.upsert_source_host(site, host_of(target), own_site=site_domain_of(target) == site)
    with deps.metadata.engine.begin() as conn:
        if delay is not None or concurrency is not None:
            conn.execute(
                sa.text("UPDATE knowledge.source_hosts SET host_delay_seconds = COALESCE(:d, host_delay_seconds),"
                        " host_concurrency = COALESCE(:c, host_concurrency), updated_at = now() WHERE id = :h"),
                {"d": delay, "c": concurrency, "h": host_id},
            )
        conn.execute(
            sa.text(
                "INSERT INTO knowledge.sites AS s (site_domain, target_url, source_host_id, every_seconds, adaptive,"
                " min_interval_seconds, max_interval_seconds, include, exclude, url_limit, max_depth,"
                " run_max_requests, run_max_bytes, run_max_seconds, next_run_at)"
                " VALUES (:s, :t, :h, :e, :a, :lo, :hi, CAST(:inc AS jsonb), CAST(:exc AS jsonb), :lim, :dep,"
                " :mr, :mb, :ms, :due)"
                " ON CONFLICT (site_domain) DO UPDATE SET target_url = EXCLUDED.target_url,"
                " source_host_id = EXCLUDED.source_host_id, every_seconds = EXCLUDED.every_seconds,"
                " adaptive = EXCLUDED.adaptive, min_interval_seconds = EXCLUDED.min_interval_seconds,"
                " max_interval_seconds = EXCLUDED.max_interval_seconds, include = EXCLUDED.include,"
                " exclude = EXCLUDED.exclude, url_limit = EXCLUDED.url_limit, max_depth = EXCLUDED.max_depth,"
                " run_max_requests = EXCLUDED.run_max_requests, run_max_bytes = EXCLUDED.run_max_bytes,"
                " run_max_seconds = EXCLUDED.run_max_seconds,"
                # a changed schedule keeps a pending due time; a newly scheduled site is due now
                " next_run_at = CASE WHEN EXCLUDED.every_seconds IS NULL THEN NULL"
                "   ELSE COALESCE(s.next_run_at, EXCLUDED.next_run_at) END, updated_at = now()"
            ),
            {"s": site, "t": target, "h": host_id, "e": seconds, "a": adaptive,
             "lo": settings.schedule_min_seconds if adaptive else None,
             "hi": settings.schedule_max_seconds if adaptive else None,
             "inc": json.dumps(include), "exc": json.dumps(exclude), "lim": limit, "dep": max_depth,
             "mr": max_requests, "mb": max_bytes, "ms": max_seconds,
             "due": (now or datetime.now(UTC)) if seconds is not None else None},
        )
    return get_site(deps, site)


def list_sites(deps: Deps) -> list[Site]:
    with deps.metadata.engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT {_COLUMNS}{_FROM} ORDER BY s.site_domain")).all()
    return [site_from_row(r) for r in rows]


def find_site(deps: Deps, site: str) -> Site | None:
    with deps.metadata.engine.connect() as conn:
        row = conn.execute(sa.text(f"SELECT {_COLUMNS}{_FROM} WHERE s.site_domain = :s"),
                           {"s": site_key(site)}).first()
    return site_from_row(row) if row else None


def get_site(deps: Deps, site: str) -> Site:
    found = find_site(deps, site)
    if found is None:
        raise InvalidInput(f"no site {site!r} (see `gleaner sites list`)")
    return found


def remove_site(deps: Deps, site: str) -> Site:
    """Forget a site's schedule. Its documents, versions, runs and rules stay."""
    found = get_site(deps, site)
    with deps.metadata.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM knowledge.sites WHERE id = :i"), {"i": found.id})
    return found
