"""A run's robots.txt decisions, shared by every process of the run through PostgreSQL.

The fetcher keeps robots decisions in a mapping of origin -> RobotsRules. This mapping
remembers them in memory and in ``knowledge.crawl_run_robots``: the first decision stored for a
(run, origin) wins, and a process that meets the origin later rebuilds the same rules from the
stored body instead of asking the site again. So robots.txt is read once per host per run even
when map, sample and each scrape batch run in different Cloud Functions instances.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

from gleaner.fetch.robots import RobotsRules, RobotsState
from gleaner.store.metadata import MetadataStore


class RunRobots(MutableMapping[str, RobotsRules]):
    def __init__(self, metadata: MetadataStore, run_id: str) -> None:
        self._metadata = metadata
        self._run_id = run_id
        self._memory: dict[str, RobotsRules] = {}

    def __getitem__(self, origin: str) -> RobotsRules:
        rules = self._memory.get(origin)
        if rules is None:
            stored = self._metadata.run_robots(self._run_id, origin)
            if stored is None:
                raise KeyError(origin)
            rules = self._memory[origin] = _rebuild(*stored)
        return rules

    def __setitem__(self, origin: str, rules: RobotsRules) -> None:
        stored = self._metadata.save_run_robots(self._run_id, origin, rules.state.value, rules.reason, rules.body)
        # A racing process may have stored its decision first: use that one, so the run has one answer.
        self._memory[origin] = _rebuild(*stored) if stored != (rules.state, rules.reason, rules.body) else rules

    def __delitem__(self, origin: str) -> None:
        self._memory.pop(origin, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._memory)

    def __len__(self) -> int:
        return len(self._memory)


def _rebuild(state: str, reason: str, body: bytes | None) -> RobotsRules:
    stored = RobotsState(state)
    if stored is RobotsState.RULES:
        rules = RobotsRules.parse(body or b"")
        rules.reason = reason
        return rules
    if stored is RobotsState.NONE:
        return RobotsRules.allow_all(reason)
    return RobotsRules.unknown(reason)
