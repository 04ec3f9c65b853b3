"""What a run's summary warns about: a run that excluded most of what it discovered says so.

A run that keeps almost nothing of a site has usually misjudged it (a near-empty landing page taken
for its section, a rule too wide), and "finished" alone hides that. The same words go into the run
event (migration 0043's ``record_run_event``), so every reader of a run sees them.
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

