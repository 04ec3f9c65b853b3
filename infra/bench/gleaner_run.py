"""One Gleaner crawl in this process, timed; writes a JSON report (the benchmark runs it as a subprocess).

It builds Deps from the environment exactly as ``gleaner crawl`` does (embedded
PostgreSQL and blob dir under GLEANER_HOME, the in-process bus) and calls
the same runner. The crawl time runs from the call of ``runner.crawl`` to its
return: interpreter start, imports and the embedded PostgreSQL's start are
reported apart. Stage times are the seconds each stage's handlers spent
(summed over deliveries; stages that overlap can add up to more than the wall).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

T_PROCESS = time.monotonic()


def count_blobs(root: Path) -> dict[str, int]:
    counts = {"snapshot": 0, "run": 0}
    if not root.exists():
        return counts
    for _dirpath, _dirs, files in os.walk(root):
        kind = "snapshot" if "/document-snapshots/" in _dirpath + "/" else "run"
        counts[kind] += sum(1 for f in files if not f.startswith(".tmp-"))
    return counts


def cpu_now(pg_dir: Path) -> dict[str, float]:
    """User + system CPU seconds so far: this process, its live descendants, the embedded PostgreSQL's live
    processes (the server found by its data dir, and its backends). Differences around the crawl leave
    start-up out (initdb, migrations)."""
    import psutil

    def seconds(p: psutil.Process) -> float:
        try:
            t = p.cpu_times()
        except psutil.Error:
            return 0.0
        return float(t.user + t.system)

    me = psutil.Process()
    marker = str(pg_dir)
    database: list[psutil.Process] = []
    for server in (p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or ())):
        try:
            database += [server, *server.children(recursive=True)]  # its backends name no data dir
        except psutil.Error:
            continue
    return {"main": seconds(me), "children": sum(seconds(c) for c in me.children(recursive=True)),
            "postgres": sum(seconds(p) for p in database)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--limit", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--site-domain", default="bench.local")
    args = parser.parse_args()

    import psutil
    import sqlalchemy as sa

    from gleaner import tenancy
    from gleaner.app import Deps
    from gleaner.bus.local import LocalBus
    from gleaner.runtime.runner import crawl, new_request
    from gleaner.settings.config import Settings
    from gleaner.stages import STAGES, dispatch

    t_imported = time.monotonic()
    # The harness reads the ledger as the operator does (every tenant); the stages act for their own.
    operator = tenancy.all_tenants()
    operator.__enter__()
    settings = Settings.from_env(os.environ)
    deps = Deps(settings)
    meta = deps.metadata  # starts the embedded PostgreSQL and applies migrations
    blob_root = settings.data_dir / "blobs"

    def snapshot_rows() -> int:
        with meta.engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT count(*) FROM knowledge.document_snapshots")).scalar_one())

    t_counting = time.monotonic()
    rows_before, blobs_before = snapshot_rows(), count_blobs(blob_root)
    t_ready = time.monotonic()

    busy: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    lock = threading.Lock()
    first_dispatch: list[float] = []
    first_start: dict[str, float] = {}  # when each stage first started and last finished: the phases
    last_end: dict[str, float] = {}
    rss_after: dict[str, int] = defaultdict(int)
    map_rss: list[int] = []
    me = psutil.Process()
    bus = deps.bus
    assert isinstance(bus, LocalBus)
    for topic, (name, _cls, _handler) in STAGES.items():
        def timed(message, _name=name):  # type: ignore[no-untyped-def]
            started = time.monotonic()
            with lock:
                if not first_dispatch:
                    first_dispatch.append(started)
                    map_rss.append(me.memory_info().rss)  # map runs in crawl() itself, before any dispatch
                first_start.setdefault(_name, started)
            try:
                dispatch(message, deps)
            finally:
                with lock:
                    ended = time.monotonic()
                    busy[_name] += ended - started
                    calls[_name] += 1
                    last_end[_name] = ended
                    # Which stage the main process's memory grows in (its RSS as each call returns).
                    rss_after[_name] = max(rss_after[_name], me.memory_info().rss)
        bus.subscribe(topic, timed)

    request = new_request(args.url, site_domain=args.site_domain, limit=args.limit, triggered_by="api",
                          mode="manual")
    pg_dir = (settings.data_dir / "pg").resolve()
    cpu_before = cpu_now(pg_dir)
    t0 = time.monotonic()
    summary = crawl(deps, request)
    t1 = time.monotonic()
    cpu_after = cpu_now(pg_dir)
    if map_rss:
        rss_after["map"] = map_rss[0]
    busy["map"] = (first_dispatch[0] if first_dispatch else t1) - t0
    calls["map"] = 1

    t_counting_after = time.monotonic()
    rows_after, blobs_after = snapshot_rows(), count_blobs(blob_root)
    with meta.engine.connect() as conn:
        changed = sorted(str(r[0]) for r in conn.execute(sa.text(
            "SELECT d.path FROM knowledge.crawl_page_decisions c JOIN knowledge.documents d ON d.id = c.document_id"
            " WHERE c.run_id = :r AND c.snapshot_outcome = 'changed'"), {"r": request.run_id}))
        outcomes = {str(k): int(v) for k, v in conn.execute(sa.text(
            "SELECT COALESCE(fetch_outcome::text, decision::text), count(*) FROM knowledge.crawl_page_decisions"
            " WHERE run_id = :r GROUP BY 1"), {"r": request.run_id})}
    harness_seconds = (t_ready - t_counting) + (time.monotonic() - t_counting_after)
    deps.close()
    crawl_seconds = t1 - t0
    total_busy = sum(busy.values()) or 1.0
    report = {
        "summary": summary,
        "crawl_seconds": crawl_seconds,
        "pages_fetched": summary["fetched"],
        "pages_settled": summary["fetched"] + summary.get("not_modified", 0),
        "pages_per_second": summary["fetched"] / crawl_seconds if crawl_seconds else 0.0,
        "not_modified": summary.get("not_modified", 0),
        "outcomes": outcomes,
        # CPU seconds spent between the call of runner.crawl and its return (processes alive at the end).
        "cpu_during_crawl": {k: round(cpu_after[k] - cpu_before.get(k, 0.0), 3) for k in cpu_after},
        "startup_seconds": {"imports": t_imported - T_PROCESS, "database_and_counts": t_ready - t_imported},
        # What this harness adds to the process's wall time (counting rows and blobs, reading outcomes): the
        # benchmark subtracts it to time the process as `gleaner crawl` would run.
        "harness_seconds": harness_seconds,
        "snapshot_rows_written": rows_after - rows_before,
        "blobs_written": {k: blobs_after[k] - blobs_before[k] for k in blobs_after},
        "changed_paths": changed,
        "stage_seconds": {k: round(v, 3) for k, v in busy.items()},
        "stage_calls": dict(calls),
        # Seconds from the crawl's start: when each stage first ran and last finished (map runs first, directly).
        "stage_span": {k: [round(first_start[k] - t0, 3), round(last_end[k] - t0, 3)] for k in first_start},
        "stage_shares": {k: round(v / total_busy, 3) for k, v in busy.items()},
        "main_rss_after_stage_mb": {k: round(v / 2**20, 1) for k, v in rss_after.items()},
        "settings": {k: os.environ[k] for k in sorted(os.environ) if k.startswith("GLEANER_")},
    }
    args.out.write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps({"crawl_seconds": round(crawl_seconds, 2), "fetched": summary["fetched"],
                      "not_modified": report["not_modified"], "status": summary["status"]}), file=sys.stderr)


if __name__ == "__main__":
    main()
