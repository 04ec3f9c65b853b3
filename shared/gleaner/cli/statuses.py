"""``gleaner runs RUN_ID --urls --status S``: S is a summary counter (``refused``, ``failed`` …) or one URL status.

The summary counts URLs under its counter names (DESIGN.md "Document lifecycle"); each URL row carries
its own status (the fetch outcome, else the decision that kept it from being fetched). A filter takes
either spelling, so the words of a run's summary find its URLs; anything else is an error listing both.
"""

from __future__ import annotations

from gleaner.decide.port import Verdict
from gleaner.errors import InvalidInput
from gleaner.fetch.types import LIMITED_OUTCOMES, REFUSED_OUTCOMES, FetchOutcome

# Each summary counter and the URL statuses it counts (an address refused by policy shows as unavailable
# with its reason; it is listed under failed here, and its reason says "refused-url").
COUNTERS: dict[str, frozenset[str]] = {
    "fetched": frozenset({FetchOutcome.FETCHED}),
    "not_modified": frozenset({FetchOutcome.NOT_MODIFIED}),
    "refused": frozenset(REFUSED_OUTCOMES),
    "failed": frozenset({FetchOutcome.UNAVAILABLE, FetchOutcome.DENIED, FetchOutcome.STORE_FAILED}),
    "limited": frozenset(LIMITED_OUTCOMES),
    "excluded": frozenset({Verdict.EXCLUDE, Verdict.NEEDS_REVIEW}),
    "pending": frozenset({"pending"}),
}
URL_STATUSES = frozenset({*(str(o) for o in FetchOutcome), *(str(v) for v in Verdict if v != Verdict.INCLUDE),
                          "pending"})


def statuses_for(value: str) -> frozenset[str]:
    """The URL statuses a ``--status`` value selects; InvalidInput naming the accepted values otherwise."""
    key = value.strip().lower()
    if key.replace("-", "_") in COUNTERS:
        return frozenset(str(s) for s in COUNTERS[key.replace("-", "_")])
    if key in URL_STATUSES:
        return frozenset({key})
    raise InvalidInput(f"unknown status {value!r}: use a summary counter ({', '.join(COUNTERS)}) or a URL status"
                       f" ({', '.join(sorted(URL_STATUSES))})")
