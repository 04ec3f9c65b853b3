"""What a run's summary warns about: a run that excluded most of what it discovered, or kept none of
it, says so.

A run that keeps almost nothing of a site has usually misjudged it (a near-empty landing page taken
for its section, a rule too wide, pages the extractor could not read), and "finished" alone hides
that. The same words go into the run event (migrations 0043 and 0053, ``record_run_event``), so
every reader of a run sees them.
"""

from __future__ import annotations

# At or above this share of discovered pages excluded, a run carries a warning.
EXCLUDED_WARNING_PERCENT = 80


def excluded_warning(site: str, discovered: int, excluded: int) -> str | None:
    """The warning for a run that excluded ``excluded`` of ``discovered`` pages, or None."""
    if discovered <= 0 or excluded * 100 < EXCLUDED_WARNING_PERCENT * discovered:
        return None
    return (f"excluded {excluded} of {discovered} pages discovered ({excluded * 100 // discovered} %):"
            f" see `gleaner review list {site}` and keep pages with `gleaner rules add {site} GLOB --include`")


def nothing_kept_warning(run_id: str, status: str, discovered: int, kept: int) -> str | None:
    """The warning for a finished (or partial) run that kept none of ``discovered`` pages (``kept``: fetched
    or confirmed unchanged), or None."""
    if status not in ("finished", "partial") or discovered <= 0 or kept > 0:
        return None
    return (f"kept none of the {discovered} pages discovered: each was excluded, refused or failed;"
            f" `gleaner runs {run_id} --urls` says why")


def run_warnings(site: str, run_id: str, status: str, discovered: int, excluded: int, kept: int) -> list[str]:
    """A run's warning, as its run event carries it: the excluded one if it speaks, else the nothing-kept one."""
    warning = excluded_warning(site, discovered, excluded) or nothing_kept_warning(run_id, status, discovered, kept)
    return [warning] if warning else []
