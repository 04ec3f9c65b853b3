"""Run control: cancel a run, take a stopped run over to resume it, settle runs nobody works on.

Pure decisions (:func:`sweep_verdict`) beside the functions that apply them over the metadata
store. The CLI (``gleaner runs cancel|resume``, ``gleaner sweep``) and the cloud's scheduler both
call :func:`sweep`; ``runner.resume`` drives a claimed run to its end on the in-process bus.

How a sweep decides, for each run in an active status::

    worker on this host alive             keep (it is being worked on, however slowly)
    worker on this host gone              settle now (its process is dead or restarted: nobody works on it)
    no worker (cloud) / another host's    settle once idle >= the limit (0: settle now): liveness
                                          cannot be known there, only the heartbeat
    settling: every included page done    finished / partial (what try_finish_run decides)
              otherwise                   interrupted (``gleaner runs resume RUN_ID`` goes on)
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

from gleaner.errors import PermanentError
from gleaner.logs import Event
from gleaner.store.ledger.runcontrol import RunControl
from gleaner.store.ledger.runstate import ACTIVE, Liveness, RunStatus, Worker
from gleaner.store.metadata import MetadataStore

log = logging.getLogger(__name__)


class RunNotFound(PermanentError):
    """No run has this id."""


class RunNotResumable(PermanentError):
    """The run finished, or a live worker is running it."""


def liveness(run: RunControl) -> Liveness:
    worker = Worker.parse(run.worker)
    return worker.liveness() if worker is not None else Liveness.UNKNOWN


def sweep_verdict(run: RunControl, idle_limit: float, alive: Liveness) -> bool:
    """Whether a sweep (or a resume) may settle this active run: its worker on this host is gone, or
    nobody can tell (a cloud run, another host's worker) and it has been idle past the limit."""
    if alive is Liveness.ALIVE:
        return False
    if alive is Liveness.GONE:
        return True
    return idle_limit <= 0 or run.idle_seconds >= idle_limit


@dataclass(frozen=True, slots=True)
class Settled:
    run_id: str
    site_domain: str
    was: str
    now: str
    idle_seconds: float
    worker: str | None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def sweep(meta: MetadataStore, idle_seconds: float) -> list[Settled]:
    """Settle every active run with no live worker that has been idle at least ``idle_seconds``.

    Safe to run anywhere, any number of times, concurrently with the runs' workers: each
    transition is conditional on the status it read, so a run that moved meanwhile is left alone.
    """
    settled: list[Settled] = []
    for run in meta.unsettled_runs():
        alive = liveness(run)
        if not sweep_verdict(run, idle_seconds, alive):
            continue
        # A crash after the last page settled leaves nothing to do but the bookkeeping.
        status = meta.try_finish_run(run.run_id) if run.status is RunStatus.SCRAPING else None
        if status is None:
            why = ("its worker " + (run.worker or "") + " is gone" if alive is Liveness.GONE
                   else f"no stage worked on it for {run.idle_seconds:.0f}s")
            if not meta.end_run(run.run_id, RunStatus.INTERRUPTED, f"settled by sweep while {run.status}: {why}",
                                only_from=(run.status,)):
                continue
            status = RunStatus.INTERRUPTED
        # A swept run was stuck: the line Terraform's runs_stuck metric counts (logs.Event).
        log.warning("sweep: run %s %s -> %s", run.run_id, run.status, status,
                    extra={"fields": {"event": Event.RUN_SWEPT.value, "run_id": run.run_id,
                                      "site_domain": run.site_domain}})
        settled.append(Settled(run.run_id, run.site_domain, str(run.status), str(status), round(run.idle_seconds, 1),
                               run.worker))
    return settled


def cancel(meta: MetadataStore, run_id: str) -> tuple[bool, RunStatus]:
    """Cancel an active or interrupted run; (whether this call cancelled it, its status now).

    A worker still running it notices at its next scrape batch and fetches nothing more.
    """
    run = meta.run_control(run_id)
    if run is None:
        raise RunNotFound(f"no run {run_id}")
    if run.status not in (*ACTIVE, RunStatus.INTERRUPTED):
        return False, run.status
    moved = meta.end_run(run_id, RunStatus.CANCELLED, "cancelled by the operator",
                         only_from=(*ACTIVE, RunStatus.INTERRUPTED))
    now = meta.run_control(run_id)
    return moved, now.status if now is not None else RunStatus.CANCELLED


def resume_phase(run: RunControl) -> RunStatus:
    """The active status a resumed run goes back to, from what it had finished (not its last status)."""
    if run.batches_total is not None:
        return RunStatus.SCRAPING
    return RunStatus.MAPPED if run.mapped else RunStatus.MAPPING


def claim_for_resume(meta: MetadataStore, run_id: str, worker: Worker, idle_limit: float) -> RunControl:
    """Take a stopped run over for this process, in the status its remaining work starts from.

    An active run is taken over only when no worker can be running it: at once when its worker on
    this host is gone (``kill -9``, a crash, a reboot), else (a cloud run, another host's) once nothing
    touched it for ``idle_limit`` seconds."""
    run = meta.run_control(run_id)
    if run is None:
        raise RunNotFound(f"no run {run_id}")
    if run.status is RunStatus.FINISHED:
        raise RunNotResumable(f"run {run_id} is finished; nothing to resume")
    if run.status in ACTIVE and not sweep_verdict(run, idle_limit, liveness(run)):
        who = f"its worker {run.worker}" if run.worker else "a stage"
        raise RunNotResumable(f"run {run_id} is {run.status} and {who} may still be running it (last active "
                              f"{run.idle_seconds:.0f}s ago); cancel it, or sweep it once it is idle")
    phase = resume_phase(run)
    if not meta.claim_run(run_id, str(worker), phase, seen_status=run.status, seen_worker=run.worker):
        raise RunNotResumable(f"run {run_id} changed while it was being taken over; try again")
    claimed = meta.run_control(run_id)
    assert claimed is not None
    return claimed
