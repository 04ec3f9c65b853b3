"""Upkeep: what Gleaner deletes by itself, so that nothing fetched is kept longer than it is needed.

- A run's fetched bodies (fetch-once, ``runs/{run}/bodies/``) go when the run settles
  (finished, partial, failed, cancelled): :func:`finish_run` wherever a stage may end a
  run, and :func:`upkeep` for runs settled any other way (cancel, a failed map, sweep).
  An interrupted run keeps them so that ``runs resume`` can replay them; its artefacts
  expire with the rest.
- Every document keeps its newest ``GLEANER_KEEP_VERSIONS`` versions (and the current and
  pinned ones): :func:`gleaner.store.documents.retention.prune`.
- An ended run's other artefacts (map JSON, samples, raw and content copies) expire after
  ``GLEANER_RUN_ARTEFACT_DAYS``; its ledger rows stay.

``upkeep`` runs on every ``tick`` (so ``watch``) and every sweep (the cloud's Scheduler job);
each part is bounded per call and marks what it did, so a call is cheap once caught up. The
GCS bucket's lifecycle rule on ``runs/`` stays as a backstop.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from gleaner import tenancy
from gleaner.store.backends.blobs import BlobStore, run_prefix
from gleaner.store.documents.retention import RetentionStore, prune
from gleaner.store.ledger.runstate import TERMINAL, RunStatus

if TYPE_CHECKING:
    from gleaner.app import Deps

log = logging.getLogger(__name__)

SETTLED = (RunStatus.FINISHED, RunStatus.PARTIAL, RunStatus.FAILED, RunStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class UpkeepReport:
    runs_discarded: int  # settled runs whose fetched bodies were deleted
    bodies_deleted: int
    versions_removed: int
    version_blobs_deleted: int
    runs_expired: int  # ended runs whose artefacts expired
    artefacts_deleted: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _delete_under(blobs: BlobStore, prefix: str) -> int:
    deleted = 0
    for key in blobs.list(prefix):
        if blobs.delete(key):
            deleted += 1
    return deleted


def discard_bodies(store: RetentionStore, blobs: BlobStore, site: str, run_id: str) -> int:
    """Delete a settled run's fetched bodies and note it; how many went."""
    deleted = _delete_under(blobs, f"{run_prefix(site, run_id)}/bodies/")
    store.mark_bodies_discarded(run_id)
    return deleted


def settle_bodies(deps: Deps, run_id: str) -> int:
    """If the run has settled, its fetched bodies go now (a failure is left to the next upkeep); a run
    whose bodies went already (the run's last snapshot settled it, then its end) costs one read."""
    try:
        found = deps.provenance.run_holding_bodies(run_id)
        if found is None or found[1] not in SETTLED:
            return 0
        return discard_bodies(deps.provenance, deps.blobs, found[0], run_id)
    except Exception:  # the run has settled either way; upkeep retries what is left
        log.warning("could not discard the fetched bodies of run %s", run_id, exc_info=True)
        return 0


def finish_run(deps: Deps, run_id: str) -> str | None:
    """``try_finish_run``, and the run's fetched bodies deleted if that settled it."""
    status = deps.metadata.try_finish_run(run_id)
    if status is not None:
        settle_bodies(deps, run_id)
    return status


@tenancy.across_tenants
def upkeep(deps: Deps) -> UpkeepReport:
    """Apply retention across every tenant: bodies of settled runs, old versions, expired artefacts."""
    store, blobs, settings = deps.provenance, deps.blobs, deps.settings
    discarded = bodies = 0
    for run_id, site in store.runs_holding_bodies([str(s) for s in SETTLED]):
        try:
            bodies += discard_bodies(store, blobs, site, run_id)
            discarded += 1
        except Exception:  # a store that refuses deletes (a creator-only bucket role): the next one tries again
            log.warning("upkeep: could not delete the fetched bodies of run %s", run_id, exc_info=True)
    pruned = prune(store, blobs, None, settings.keep_versions)
    expired = artefacts = 0
    for run_id, site in store.expired_runs([str(s) for s in TERMINAL], settings.run_artefact_days):
        try:
            artefacts += _delete_under(blobs, f"{run_prefix(site, run_id)}/")
        except Exception:
            log.warning("upkeep: could not expire the artefacts of run %s", run_id, exc_info=True)
            continue
        store.mark_artefacts_expired(run_id)
        expired += 1
    report = UpkeepReport(discarded, bodies, pruned.versions_removed, pruned.blobs_deleted, expired, artefacts)
    if any(report.to_dict().values()):
        log.info("upkeep: %s", report.to_dict())
    return report
