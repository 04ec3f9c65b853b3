"""When a page is rendered, and which of two readings of a page is kept (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from gleaner.errors import InvalidInput


class RenderMode(StrEnum):
    """A site's, crawl's or rule's choice (DESIGN.md "Rendering")."""

    NEVER = "never"
    AUTO = "auto"  # the sampler renders a section whose plain sample says little, and keeps the better
    ALWAYS = "always"


class RenderedBy(StrEnum):
    """How a version's bytes were read: the ADR's ``render_mode`` of a snapshot."""

    PLAIN_FETCH = "plain_fetch"
    BROWSER = "browser"


class RenderOutcome(StrEnum):
    """How one page's rendering ended; a page that never settles is still read, at its budget."""

    RENDERED = "rendered"
    BUDGET = "budget"  # the time budget ran out first: the DOM as it stood then
    FAILED = "failed"  # nothing could be read (the browser failed): the plain fetch stands


# Rule actions that set a render mode are named render_<mode> (operator/rules.py RuleAction).
RULE_PREFIX = "render_"
# A sample whose main text is shorter than this is "little text": an SPA shell, a navigation-only page.
LITTLE_TEXT_CHARS = 200
# Rendering must find clearly more text to be worth a browser for every page of the section.
BETTER_FACTOR = 1.5


def parse_render_mode(value: str | None, *, default: RenderMode | None = RenderMode.NEVER) -> RenderMode | None:
    """A render mode from user input (CLI, API, config); None or blank gives ``default``."""
    if value is None or not str(value).strip():
        return default
    try:
        return RenderMode(str(value).strip().lower())
    except ValueError:
        raise InvalidInput(f"render must be one of never, auto, always; got {str(value)[:40]!r}") from None


def wants_render_check(mode: RenderMode, plain_chars: int) -> bool:
    """Whether the sampler should also render a section's sample read plainly with ``plain_chars``."""
    return mode is RenderMode.ALWAYS or (mode is RenderMode.AUTO and plain_chars < LITTLE_TEXT_CHARS)


def rendered_is_better(plain_chars: int, rendered_chars: int) -> bool:
    """Whether the rendered reading earns the browser: clearly more main text than the plain one."""
    return rendered_chars >= LITTLE_TEXT_CHARS // 4 and rendered_chars > plain_chars * BETTER_FACTOR


def mode_for(path: str, run_mode: RenderMode, rules: Sequence[tuple[str, str]]) -> RenderMode:
    """A page's render mode: the oldest render rule whose glob matches ``path`` (``rules`` are
    (glob, action) pairs in creation order, actions ``render_<mode>``), else the run's mode."""
    from gleaner.urls import glob_matches

    for glob, action in rules:
        if action.startswith(RULE_PREFIX) and glob_matches(path, glob):
            return RenderMode(action.removeprefix(RULE_PREFIX))
    return run_mode


def choose(mode: RenderMode, section_verdict: RenderedBy | None) -> RenderedBy:
    """How scrape reads a page: ``always`` renders, ``never`` does not, ``auto`` follows the sample's verdict."""
    if mode is RenderMode.ALWAYS:
        return RenderedBy.BROWSER
    if mode is RenderMode.AUTO and section_verdict is RenderedBy.BROWSER:
        return RenderedBy.BROWSER
    return RenderedBy.PLAIN_FETCH
