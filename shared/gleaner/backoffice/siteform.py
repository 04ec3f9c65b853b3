"""A site's fields as the back office and ``POST /v1/sites`` take them: checked one by one, each error beside its field.

Pure: values in, :class:`SiteFields` (the arguments of :func:`gleaner.operator.sites.add_site`) or the
errors by field name out. A form keeps what the operator typed, so the page shows it again with the
error next to the field that caused it, not a bare 400 page.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gleaner.errors import InvalidInput
from gleaner.operator.sites import parse_duration, site_key
from gleaner.urls import canonicalize, validate_glob

# The fields of the site form, in the order the page shows them.
FIELDS = ("url", "site_domain", "every", "include", "exclude", "limit", "max_depth", "delay", "concurrency", "render")
# Whether a site's pages are read by a browser (DESIGN.md "Rendering", gleaner.render.modes).
RENDER_MODES: tuple[str, ...] = ("never", "auto", "always")


@dataclass(frozen=True, slots=True)
class SiteFields:
    """Checked values, ready for ``add_site``."""

    url: str
    site_domain: str | None = None
    every: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    limit: int | None = None
    max_depth: int | None = None
    delay: float | None = None
    concurrency: int | None = None
    render: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def arguments(self) -> dict[str, Any]:
        return {"site_domain": self.site_domain, "every": self.every, "include": self.include,
                "exclude": self.exclude, "limit": self.limit, "max_depth": self.max_depth, "delay": self.delay,
                "concurrency": self.concurrency, "render": self.render}


def _lines(value: Any) -> tuple[str, ...]:
    """Globs from a form's text area (one a line, or comma-separated) or a JSON list."""
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return tuple(part.strip() for line in str(value).splitlines() for part in line.split(",") if part.strip())


def _number(kind: Callable[[str], Any], low: float, what: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        try:
            number = kind(str(value).strip())
        except ValueError:
            raise InvalidInput(f"{what}, e.g. {int(low) if low else 0}") from None
        if number < low:
            raise InvalidInput(f"must be at least {low:g}")
        return number
    return check


def _globs(value: Any) -> tuple[str, ...]:
    return tuple(validate_glob(glob) for glob in _lines(value))


def _every(value: Any) -> str | None:
    text = str(value or "").strip()
    if not text or text.lower() in ("manual", "never"):
        return None
    if text.lower() != "auto":
        parse_duration(text)
    return text


def _url(value: Any) -> str:
    text = str(value or "").strip()
    if not text:
        raise InvalidInput("give the site's start page, e.g. https://example.com/docs/")
    canonicalize(text)
    return text


def _site_domain(value: Any) -> str | None:
    text = str(value or "").strip()
    return site_key(text) if text else None


def _render(value: Any) -> str | None:
    text = str(value or "").strip()
    if text and text not in RENDER_MODES:
        raise InvalidInput(f"render is one of {', '.join(RENDER_MODES)}")
    return text or None


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "url": _url, "site_domain": _site_domain, "every": _every, "include": _globs, "exclude": _globs,
    "limit": _number(int, 1, "a whole number"), "max_depth": _number(int, 0, "a whole number"),
    "delay": _number(float, 0, "seconds"), "concurrency": _number(int, 1, "a whole number"), "render": _render,
}


def check_site(values: Mapping[str, Any]) -> SiteFields | dict[str, str]:
    """The checked fields, or ``{field: error}`` for every field that is wrong."""
    checked: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name in FIELDS:
        try:
            checked[name] = _CHECKS[name](values.get(name))
        except InvalidInput as exc:
            errors[name] = str(exc)
    if errors:
        return errors
    return SiteFields(**checked)


def form_values(site: Any) -> dict[str, str]:
    """A registered site's values as the form shows them (blank where the settings' value applies)."""
    def text(value: Any) -> str:
        return "" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))

    return {"url": site.target_url, "site_domain": site.site_domain,
            "every": "" if site.every_seconds is None and not site.adaptive else site.every,
            "include": "\n".join(site.include), "exclude": "\n".join(site.exclude), "limit": text(site.limit),
            "max_depth": text(site.max_depth), "delay": text(site.delay), "concurrency": text(site.concurrency),
            "render": getattr(site, "render", "") or ""}
