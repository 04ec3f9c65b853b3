"""Instance-seconds per page on the emulator path: what the cloud bills for a multi-site crawl.

The functions run under functions-framework (``infra/emulators.py`` Stack: Pub/Sub emulator,
fake-gcs-server, embedded PostgreSQL), each wrapped so that every invocation appends its start and
end to a log. A function instance is billed while it serves at least one request, so:

- at concurrency 1 (every function before, and every one but scrape and notify now) each invocation
  is an instance of its own for its duration: instance time = the *sum* of the invocations' durations;
- at concurrency > 1 (scrape now) one process serving several invocations at once is one instance:
  instance time = the *union* of its invocations' intervals.

The crawl: N loopback hosts (127.0.0.2 …) with a sitemap of PAGES articles each, a per-host delay,
one crawl request per host sent together to map's HTTP function; optionally one big site whose
pages come in many batches (``--big``, with ``--soft-deadline`` sizing its batches small), which is
where per-site batch slots matter. ``--code DIR`` runs another checkout's ``shared/`` and
``functions/`` (e.g. ``git archive b685b50 shared functions | tar -x -C /tmp/before``) for the
figures before. Also reported: PostgreSQL transactions per page (``pg_stat_database.xact_commit``:
the waiters' polling shows there), each host's smallest gap between two requests (politeness
holds), wall time, and what scrape's invocations did (``scrape_outcomes``: ``done``, ``deferred``,
and ``run-by-other-copy``, a waiting batch's delayed copy arriving after its woken copy ran: a billed
invocation that does nothing).

    PYTHONPATH=shared .venv/bin/python infra/bench/instance_seconds.py --hosts 5 --pages 20 --delay 0.5 \\
        --concurrency 8 --out infra/bench/results/instance_seconds.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections import Counter, defaultdict
from contextlib import ExitStack
from itertools import pairwise
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "infra"))
sys.path.insert(0, str(HERE))

WRAPPER = '''\
"""Timing wrapper of {source} for infra/bench/instance_seconds.py."""
import importlib.util
import json
import os
import threading
import time

import functions_framework

_spec = importlib.util.spec_from_file_location("bench_original_{stage}", {source!r})
_original = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_original)
_lock = threading.Lock()


def _outcome(response):
    """The ``outcome`` of a JSON answer (a scrape task's: done, deferred, run-by-other-copy), else None."""
    try:
        return json.loads(response[0]).get("outcome")
    except Exception:
        return None


def _record(entry, started, ended, outcome=None):
    line = json.dumps({{"stage": "{stage}", "entry": entry, "pid": os.getpid(), "start": started, "end": ended,
                       "outcome": outcome}})
    with _lock, open(os.environ["BENCH_INVOCATIONS"], "a") as log:
        log.write(line + "\\n")
'''
HTTP = '''

@functions_framework.http
def on_http(request):
    started = time.time()
    outcome = None
    try:
        response = _original.on_http(request)
        outcome = _outcome(response)
        return response
    finally:
        _record("on_http", started, time.time(), outcome)
'''
EVENT = '''

@functions_framework.cloud_event
def on_event(cloud_event):
    started = time.time()
    try:
        return _original.on_event(cloud_event)
    finally:
        _record("on_event", started, time.time())
'''


# Requests the scrape process serves at once whatever concurrency is modelled: at concurrency 1 the
# cloud would start more instances rather than queue batches, and the sum of durations counts each.
SCRAPE_THREADS = 8


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of [start, end] intervals (an instance busy while any is open)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def instance_seconds(invocations: list[dict[str, Any]], concurrent: set[str]) -> dict[str, float]:
    """Per function (stage.entry): union of intervals per process for ``concurrent`` ones, else the sum."""
    by_fn: dict[str, dict[int, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for inv in invocations:
        by_fn[f"{inv['stage']}.{inv['entry']}"][inv["pid"]].append((inv["start"], inv["end"]))
    out = {}
    for fn, by_pid in by_fn.items():
        if fn in concurrent:
            out[fn] = sum(union_seconds(spans) for spans in by_pid.values())
        else:
            out[fn] = sum(end - start for spans in by_pid.values() for start, end in spans)
    return out


def write_wrappers(code: Path, into: Path) -> None:
    import emulators

    for stage, entries in emulators.entry_points(code / "functions").items():
        source = code / "functions" / stage / "main.py"
        text = WRAPPER.format(source=str(source), stage=stage)
        text += "".join(HTTP if e == "on_http" else EVENT for e in entries)
        (into / stage).mkdir(parents=True, exist_ok=True)
        (into / stage / "main.py").write_text(textwrap.dedent(text))


def migrate(code: Path, database_url: str) -> None:
    script = ("import sys\nfrom gleaner.settings.config import Settings\nfrom gleaner.store.backends import db\n"
              "db.ensure_schema(db.create_engine(Settings(database_url=sys.argv[1])))\n")
    subprocess.run([sys.executable, "-c", script, database_url], check=True,
                   env={**os.environ, "PYTHONPATH": str(code / "shared")})


def transactions(database_url: str) -> int:
    import sqlalchemy as sa

    from gleaner.settings.config import Settings
    from gleaner.store.backends import db

    engine = db.create_engine(Settings(database_url=database_url))
    with engine.connect() as conn:
        value = conn.execute(sa.text("SELECT xact_commit + xact_rollback FROM pg_stat_database"
                                     " WHERE datname = current_database()")).scalar()
    engine.dispose()
    return int(value or 0)


def settled(database_url: str, run_ids: list[str]) -> dict[str, dict[str, Any]] | None:
    import sqlalchemy as sa

    from gleaner import tenancy
    from gleaner.settings.config import Settings
    from gleaner.store.backends import db
    from gleaner.store.metadata import MetadataStore

    engine = db.create_engine(Settings(database_url=database_url))
    try:
        meta = MetadataStore(engine)
        out = {}
        with tenancy.all_tenants():
            for run_id in run_ids:
                summary = meta.run_summary(run_id)
                if summary is None or summary["status"] not in ("finished", "partial", "failed"):
                    return None
                out[run_id] = summary
        with engine.connect() as conn:  # and every snapshot they wrote was ingested
            pending = conn.execute(sa.text(
                "SELECT count(*) FROM knowledge.document_snapshots s LEFT JOIN knowledge.snapshot_texts t"
                " ON t.snapshot_id = s.id WHERE t.snapshot_id IS NULL")).scalar()
        return out if pending == 0 else None
    finally:
        engine.dispose()


def post_crawl(url: str, secret: str, target: str) -> str:
    request = urllib.request.Request(url, data=json.dumps({"url": target}).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return str(json.loads(response.read())["run_id"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    import emulators
    from multisite import host_pages

    from gleaner.demosite.testsite import Page, TestSite
    from gleaner.store.backends.db import embedded_url

    code = args.code.resolve()
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="bench-instance-",
                                                                ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        sizes = [args.pages] * args.hosts + ([args.big] if args.big else [])
        sites = []
        for n, pages in enumerate(sizes):
            served: dict[str, Page] = {}
            site = stack.enter_context(TestSite(served, host=f"127.0.0.{n + 2}", max_seconds=3600,
                                                max_requests=100_000))
            served.update(host_pages(n, site.url, pages))
            sites.append(site)
        database_url = embedded_url(work / "pg")
        migrate(code, database_url)
        write_wrappers(code, work / "functions")
        log = work / "invocations.jsonl"
        log.touch()
        env = {"GLEANER_ALLOW_NETWORKS": "127.0.0.0/8", "GLEANER_HOST_DELAY": str(args.delay),
               "GLEANER_HOST_CONCURRENCY": "1", "GLEANER_SHARED_POLITENESS": "true", "GLEANER_EXTRACT_WORKERS": "1",
               "GLEANER_FETCH_TIMEOUT": "10", "GLEANER_SCRAPE_SOFT_DEADLINE": str(args.soft_deadline),
               "GLEANER_AUTO_MIGRATE": "false", "GLEANER_HOME": str(work / "home"), "BENCH_INVOCATIONS": str(log)}
        stack_ = emulators.Stack(work / "stack", database_url, extra_env=env, functions_dir=work / "functions",
                                 shared_dir=code / "shared", threads={"scrape": SCRAPE_THREADS},
                                 min_backoff=1.0, max_backoff=10.0, ack_deadline=120)
        stack.callback(stack_.stop)
        stack_.start_emulators().start_functions()
        xact_before = transactions(database_url)
        started = time.time()
        since = [len(s.log) for s in sites]
        map_url = stack_.urls[("map", "on_http")]
        run_ids = [post_crawl(map_url, stack_.webhook_secret, s.url + "/") for s in sites]
        deadline = time.monotonic() + args.timeout
        summaries = None
        while summaries is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"runs did not settle in {args.timeout}s; logs in {work}")
            time.sleep(0.5)
            summaries = settled(database_url, run_ids)
        wall = time.time() - started
        time.sleep(2.0)  # the last deliveries' invocations end and are logged
        xacts = transactions(database_url) - xact_before
        invocations = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        concurrent = {"scrape.on_http"} if args.concurrency > 1 else set()
        per_fn = instance_seconds(invocations, concurrent)
        pages = sum(int(s["fetched"]) for s in summaries.values())
        gaps = []
        for site, start in zip(sites, since, strict=True):
            times = [r.at for r in site.log[start:]]
            gaps.append(min((b - a for a, b in pairwise(times)), default=float("inf")))
        total = sum(per_fn.values())
        noops = [i for i in invocations if i.get("outcome") == "run-by-other-copy"]
        summed = instance_seconds(invocations, set())
        big = {}
        if args.big:  # the big site's slot idle beyond its delay: batches waiting while none fetched
            # Its article requests but the first (sample's, a whole stage before the first batch).
            times = [r.at for r in sites[-1].log[since[-1]:] if r.path.startswith("/p/")][1:]
            idle = [b - a - args.delay for a, b in pairwise(times)]
            big = {"big_site": {"span_seconds": round(times[-1] - times[0], 2) if times else 0.0,
                                "floor_seconds": round(args.delay * max(len(times) - 1, 0), 2),
                                "idle_seconds": round(sum(i for i in idle if i > 0), 2),
                                "longest_gap_seconds": round(max(idle, default=0.0) + args.delay, 2)}}
        return {
            "code": args.label, "hosts": args.hosts, "pages_per_host": args.pages, "big_site_pages": args.big,
            "delay": args.delay, "scrape_concurrency": args.concurrency, "soft_deadline": args.soft_deadline,
            "wall_seconds": round(wall, 2), "pages": pages,
            "statuses": sorted({str(s["status"]) for s in summaries.values()}),
            "min_gap_seconds": round(min(gaps), 3),
            "invocations": {fn: sum(1 for i in invocations if f"{i['stage']}.{i['entry']}" == fn) for fn in per_fn},
            "instance_seconds": {fn: round(v, 2) for fn, v in sorted(per_fn.items())},
            "instance_seconds_total": round(total, 2),
            "instance_seconds_per_page": round(total / max(pages, 1), 4),
            "scrape_instance_seconds_per_page": round(per_fn.get("scrape.on_http", 0.0) / max(pages, 1), 4),
            # The same invocations billed as if each had had an instance of its own (concurrency 1).
            "scrape_invocation_seconds_summed": round(summed.get("scrape.on_http", 0.0), 2),
            "db_transactions_per_page": round(xacts / max(pages, 1), 1),
            "scrape_outcomes": dict(sorted(Counter(str(i.get("outcome")) for i in invocations
                                                   if i["stage"] == "scrape" and i["entry"] == "on_http").items())),
            # Invocations that did nothing (the batch's other copy ran it) and the instance time they held.
            "noop_invocations": len(noops),
            "noop_invocation_seconds": round(sum(i["end"] - i["start"] for i in noops), 3),
            **big,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=5)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--big", type=int, default=0, help="add one site with this many pages")
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=8,
                        help="scrape's per-instance concurrency modelled: 1 = every batch its own instance "
                             "(instance time = sum of durations), more = one instance (union of intervals)")
    parser.add_argument("--soft-deadline", type=float, default=1200.0,
                        help="GLEANER_SCRAPE_SOFT_DEADLINE: also sizes batches (soft deadline / (delay + 2 s))")
    parser.add_argument("--code", type=Path, default=REPO, help="checkout whose shared/ and functions/ run")
    parser.add_argument("--label", default="this branch")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path, help="append the result to this JSON file's runs")
    args = parser.parse_args()
    result = run(args)
    print(json.dumps(result), flush=True)
    if args.out:
        report: dict[str, Any] = (json.loads(args.out.read_text()) if args.out.exists()
                                  else {"profile": "instance-seconds", "runs": []})
        report["runs"].append({**result, "load_after": os.getloadavg()})
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
