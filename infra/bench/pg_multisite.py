"""Where PostgreSQL's CPU goes in a many-site tick: statements, plans, commits, connections, functions.

    PYTHONPATH=shared .venv/bin/python infra/bench/pg_multisite.py --hosts 50 [--pages 30] [--delay 0.5]
        [--baseline SHARED] [--perf] [--top 25] [--out FILE]

The ``multi-site`` profile's hosts (multisite.py) and its tick (``sites add`` untimed, then ``gleaner tick
--json``), against a cluster of Debian's PostgreSQL 15 with ``pg_stat_statements`` (pg_statements.py's
cluster: ``track_planning = on``, ``track_functions = all``, ``jit = off``) instead of the embedded server,
reached through ``GLEANER_DATABASE_URL``. Debian's server has no pgvector: the tick does not embed anyway.
Statistics are reset between ``sites add`` and the tick. Printed per page fetched: every statement with its
calls, execution and planning time and rows; transactions committed; connections opened (backend starts,
from ``log_connections``); trigger functions; indexes written but never scanned; and the server's CPU
seconds. With ``--perf``, ``perf record`` samples the server's processes (the postmaster started under it)
and the top functions are printed. With ``--baseline``, another tree's ``shared/`` goes first, on the same
hosts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import multisite
import pg_statements
from pg_statements import INDEXES, STATEMENTS, TABLES, Cluster

from gleaner.demosite.testsite import Page, TestSite

FUNCTIONS = pg_statements.FUNCTIONS
DATABASE = pg_statements.DATABASE


def _seconds(hms: str) -> float:
    h, m, sec = hms.split(":")
    return int(h) * 3600 + int(m) * 60 + float(sec)


def tick(sites: list[TestSite], delay: float, shared: Path, perf: bool, conf: list[str], homes: multisite.Homes,
         label: str = "tree") -> dict[str, Any]:
    home = homes.new("bench-pgms-")
    Path(home).chmod(0o755)
    cluster = Cluster(Path(home) / "pg")
    cluster.start()
    extra = conf
    with (cluster.pgdata / "postgresql.conf").open("a") as conf_file:
        conf_file.write("log_connections = on\nlog_disconnections = on\n" + "".join(line + "\n" for line in extra))
    cluster.stop()
    perf_out = Path(home) / "perf.data"
    if perf:
        env = {**os.environ}
        launcher = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-o", str(perf_out), "--",
                                     "runuser", "-u", "postgres", "--", str(pg_statements.PG_BIN / "postgres"),
                                     "-D", str(cluster.pgdata)], env=env, stdout=subprocess.DEVNULL,
                                    stderr=open(Path(home) / "perf.log", "w"))  # noqa: SIM115
        for _ in range(100):
            if (cluster.sockets / f".s.PGSQL.{cluster.port}").exists():
                break
            time.sleep(0.1)
        time.sleep(0.3)
    else:
        pg_statements.as_pg([str(pg_statements.PG_BIN / "pg_ctl"), "-D", str(cluster.pgdata), "-w", "-l",
                             str(cluster.pgdata / "log"), "start"])
    try:
        env = multisite.tool_env()
        env.update(GLEANER_HOME=home, GLEANER_ALLOW_NETWORKS="127.0.0.0/8", GLEANER_EMBED_AFTER_CRAWL="false",
                   GLEANER_DATABASE_URL=cluster.url,
                   PYTHONPATH=str(shared) + os.pathsep + env.get("PYTHONPATH", ""))
        python = sys.executable
        subprocess.run([python, "-c", multisite.SETUP, str(delay), *[s.url + "/" for s in sites]], env=env,
                       check=True)
        time.sleep(1.2)
        cluster.sql("SELECT pg_stat_statements_reset(), pg_stat_reset()")
        log = cluster.pgdata / "log"
        if perf:
            log = Path(home) / "perf.log"
        connections_before = log.read_text(errors="replace").count("connection authorized")
        time.sleep(0.5)
        _started, wall, rss, done = multisite.timed([python, "-m", "gleaner.cli", "tick", "--json"], env,
                                                   pgdata=str(cluster.pgdata))
        if done.returncode != 0:
            raise SystemExit(f"gleaner tick failed ({done.returncode}): {done.stderr[-2000:]}")
        runs = json.loads(done.stdout)["runs"]
        pages = max(1, sum(r["fetched"] for r in runs))
        time.sleep(1.5)
        text = log.read_text(errors="replace")
        connections = text.count("connection authorized") - connections_before
        sessions = [_seconds(m) for m in re.findall(r"session time: (\d+:\d+:[\d.]+)", text)]
        statements = [{"query": q, "calls": int(c), "exec_ms": float(e), "plan_ms": float(p), "plans": int(n),
                       "rows": int(r), "toplevel": t == "t", "wal_bytes": int(w)}
                      for q, c, e, p, n, r, t, w in cluster.sql(STATEMENTS)]
        commits, rollbacks = (int(x) for x in cluster.sql(DATABASE)[0])
        result = {
            "pages": pages, "process_seconds": round(wall, 2),
            "cpu_seconds": {k: round(v, 2) for k, v in rss.cpu.items()},
            "postgres_cpu_ms_per_page": round(rss.cpu["postgres"] * 1000 / pages, 2),
            "connections": connections,
            "session_seconds": {"under_1": sum(t < 1 for t in sessions),
                                "1_to_10": sum(1 <= t < 10 for t in sessions),
                                "over_10": sum(t >= 10 for t in sessions)},
            "commits": commits, "rollbacks": rollbacks,
            "statements": statements,
            "indexes": [dict(zip(("table", "index", "scans", "inserts", "updates", "hot_updates"),
                                 (t, i, int(s), int(n), int(u), int(h)), strict=True))
                        for t, i, s, n, u, h in cluster.sql(INDEXES)],
            "tables": [dict(zip(("table", "inserts", "updates", "hot_updates", "deletes", "seq_scans",
                                 "idx_scans"), (r[0], *map(int, r[1:])), strict=True))
                       for r in cluster.sql(TABLES)],
            "functions": [{"function": f, "calls": int(c), "total_ms": float(t), "self_ms": float(s)}
                          for f, c, t, s in cluster.sql(FUNCTIONS)],
        }
    finally:
        if perf:
            pg_statements.as_pg([str(pg_statements.PG_BIN / "pg_ctl"), "-D", str(cluster.pgdata), "-m", "fast",
                                 "-w", "stop"])
            launcher.wait(timeout=60)
        else:
            cluster.stop()
    if perf:
        kept = Path(tempfile.gettempdir()) / f"pg_multisite-{os.getpid()}-{label}.perf.data"
        perf_out.replace(kept)
        perf_out = kept
        result["perf_data"] = str(kept)
        report = subprocess.run(["perf", "report", "-i", str(perf_out), "--no-children", "--sort", "symbol",
                                 "--stdio", "-g", "none", "--percent-limit", "0.7"],
                                capture_output=True, text=True).stdout
        result["perf_self"] = [line for line in report.splitlines() if line and not line.startswith("#")][:45]
        report = subprocess.run(["perf", "report", "-i", str(perf_out), "--children", "--sort", "symbol",
                                 "--stdio", "-g", "none", "--percent-limit", "2"],
                                capture_output=True, text=True).stdout
        result["perf_children"] = [line for line in report.splitlines()
                                   if line and not line.startswith("#")][:70]
    return result


def show(label: str, r: dict[str, Any], top: int) -> None:
    pages = r["pages"]
    calls, exec_ms, plan_ms = pg_statements.totals(r["statements"])
    print(f"\n## {label}: {pages} pages, tick {r['process_seconds']} s, CPU {r['cpu_seconds']}, PostgreSQL "
          f"{r['postgres_cpu_ms_per_page']} ms/page")
    print(f"sessions ended by duration: {r.get('session_seconds')}")
    print(f"connections opened {r['connections']}; top-level statements {calls / pages:.2f}/page; execution "
          f"{exec_ms / pages:.3f} ms/page, planning {plan_ms / pages:.3f} ms/page (sum {exec_ms + plan_ms:.0f} ms);"
          f" commits {r['commits'] / pages:.2f}/page, rollbacks {r['rollbacks'] / pages:.2f}/page")
    print("\n| statement | calls/page | exec ms/page | plan ms/page | plans | rows/call |\n|---|---|---|---|---|---|")
    for s in r["statements"][:top]:
        nested = "" if s["toplevel"] else "(nested) "
        query = nested + (s["query"][:150] + "…" if len(s["query"]) > 150 else s["query"]).replace("|", "\\|")
        print(f"| `{query}` | {s['calls'] / pages:.3f} | {s['exec_ms'] / pages:.4f} | {s['plan_ms'] / pages:.4f} |"
              f" {s['plans']} | {s['rows'] / max(1, s['calls']):.1f} |")
    unread = [i for i in r["indexes"] if i["scans"] == 0 and i["inserts"] + i["updates"] - i["hot_updates"] > 0]
    print("\nindexes written, never scanned: " + ", ".join(f"{i['table']}.{i['index']}" for i in unread))
    print("\n| table | inserts/page | updates/page (HOT) | seq scans | index scans |\n|---|---|---|---|---|")
    for t in r["tables"]:
        print(f"| {t['table']} | {t['inserts'] / pages:.2f} | {t['updates'] / pages:.2f} "
              f"({t['hot_updates'] / pages:.2f}) | {t['seq_scans']} | {t['idx_scans']} |")
    if r["functions"]:
        print("\n| function | calls/page | self ms/page |\n|---|---|---|")
        for f in r["functions"]:
            print(f"| {f['function']} | {f['calls'] / pages:.3f} | {f['self_ms'] / pages:.4f} |")
    for key in ("perf_self", "perf_children"):
        if key in r:
            print(f"\n{key}:\n" + "\n".join(r[key]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--baseline", type=Path, metavar="SHARED")
    parser.add_argument("--perf", action="store_true", help="sample the server with perf record")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--conf", action="append", default=[], metavar="SETTING",
                        help="a postgresql.conf line for the tree's server (not the baseline's), e.g. jit=off")
    parser.add_argument("--same", action="store_true", help="the baseline is this tree too (only --conf differs)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {"hosts": args.hosts, "pages": args.pages, "delay": args.delay,
                              "load_before": os.getloadavg()}
    with ExitStack() as stack:
        sites = []
        for n in range(args.hosts):
            served: dict[str, Page] = {}
            site = stack.enter_context(TestSite(served, host=f"127.0.0.{n + 2}", max_seconds=3600,
                                                max_requests=100_000))
            served.update(multisite.host_pages(n, site.url, args.pages))
            sites.append(site)
        variants = {"baseline": multisite.REPO / "shared" if args.same else args.baseline}
        if variants["baseline"] is None:
            del variants["baseline"]
        variants["tree"] = multisite.REPO / "shared"
        homes = multisite.Homes(None)  # removed together at the end: see multisite.Homes
        stack.callback(homes.remove)
        for name, shared in variants.items():
            report[name] = tick(sites, args.delay, shared, args.perf, args.conf if name == "tree" else [], homes,
                                name)
            show(name, report[name], args.top)
    report["load_after"] = os.getloadavg()
    print(f"\nload {report['load_before']} -> {report['load_after']}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
