"""A fetch outcome in a reader's words: why a URL a person asked for was not fetched (pure)."""

from __future__ import annotations

from urllib.parse import urljoin

from gleaner.fetch.types import FetchOutcome, FetchResult


def why_not_fetched(result: FetchResult, url: str) -> str:
    """A fetch outcome in a reader's words: a refused connection to robots.txt is an unreachable host."""
    outcome, reason = result.outcome, result.reason or "no reason given"
    if result.refused_by_policy:
        return f"Gleaner's address policy refused it ({reason})"
    robots = urljoin(url, "/robots.txt")
    if outcome == FetchOutcome.ROBOTS_UNKNOWN and reason.startswith("network:"):
        return (f"the host did not answer ({reason.removeprefix('network:').strip()} at {robots}); check the "
                "address, or whether the site is up")
    explained = {
        FetchOutcome.ROBOTS_UNKNOWN: f"{robots} could not be read ({reason}), and Gleaner fetches nothing from a "
                                     "host whose robots.txt it cannot read (RFC 9309)",
        FetchOutcome.ROBOTS_DENIED: f"{robots} does not allow Gleaner to fetch it ({reason})",
        FetchOutcome.UNAVAILABLE: f"the site did not serve it ({reason})",
        FetchOutcome.DENIED: f"the site refused access ({reason})",
    }
    # The status name too: it is what `gleaner runs RUN_ID --urls` and scripts know the outcome by.
    return f"{explained[FetchOutcome(outcome)]} [{outcome}]" if FetchOutcome(outcome) in explained \
        else f"{outcome}: {reason}"
