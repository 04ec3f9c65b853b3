"""Which statements cost PostgreSQL its CPU during a first crawl: per-statement figures per page.

    PYTHONPATH=shared .venv/bin/python infra/bench/pg_statements.py [--pages 2000] [--profile cheap]
        [--ref COMMIT] [--workdir-in /dev/shm] [--search] [--out FILE]

It needs nginx and Debian's PostgreSQL 15 (``/usr/lib/postgresql/15``, whose contrib has
``pg_stat_statements``). For each variant (the working tree, and ``--ref``'s ``shared/``) it makes
a new PostgreSQL cluster with ``pg_stat_statements`` (``track = all``, ``track_planning = on``),
``track_functions = all`` and ``jit = off`` (the embedded server has no JIT), applies the migrations,
resets the statistics, and runs one first crawl
(``gleaner_run.py``, the benchmark's harness) of the corpus against it through ``GLEANER_DATABASE_URL``.
The cluster's data dir is ``{GLEANER_HOME}/pg``, so the harness's CPU sampler counts it as it counts the
embedded server. It then prints, per page settled: every statement (normalised) with its calls, execution
and planning time and rows; transactions committed; trigger functions; and the indexes that were
written (their table got rows) but never scanned.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench
import compare
import server

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_USER = "postgres"  # initdb refuses root; the cluster runs as Debian's postgres user
CONF = """
listen_addresses = ''
unix_socket_directories = '{sockets}'
port = {port}
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.track_planning = on
pg_stat_statements.max = 5000
track_functions = all
# The embedded server (pgserver) is built without LLVM: no JIT there, none here.
jit = off
"""


def as_pg(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    prefix = ["runuser", "-u", PG_USER, "--"] if os.geteuid() == 0 else []
    return subprocess.run(prefix + cmd, check=True, capture_output=True, text=True, **kw)


class Cluster:
    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata
        self.sockets = pgdata.parent / "sock"
        self.port = server.free_port()

    @property
    def url(self) -> str:
        return f"postgresql://{PG_USER}@:{self.port}/postgres?host={self.sockets}"

    def start(self) -> Cluster:
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        self.pgdata.parent.chmod(0o777)
        self.sockets.mkdir(exist_ok=True)
        self.sockets.chmod(0o777)
        as_pg([str(PG_BIN / "initdb"), "-D", str(self.pgdata), "-A", "trust", "-U", PG_USER, "--no-sync"])
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(CONF.format(sockets=self.sockets, port=self.port))
        as_pg([str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), "-w", "-l", str(self.pgdata / "log"), "start"])
        self.sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return self

    def stop(self) -> None:
        as_pg([str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), "-m", "fast", "stop"])

    def sql(self, query: str) -> list[list[str]]:
        out = as_pg([str(PG_BIN / "psql"), "-h", str(self.sockets), "-p", str(self.port), "-U", PG_USER,
                     "-d", "postgres", "-X", "-A", "-t", "-F", "\x1f", "-v", "ON_ERROR_STOP=1", "-c", query])
        return [line.split("\x1f") for line in out.stdout.splitlines() if line]


def migrate(url: str, data: Path, shared: Path) -> None:
    env = {**bench.gleaner_env(data, shared), "GLEANER_DATABASE_URL": url}
    code = ("import os; from gleaner.settings.config import Settings; "
            "from gleaner.store.backends.db import create_engine, "
            "ensure_schema; ensure_schema(create_engine(Settings.from_env(os.environ)))")
    subprocess.run([bench.python(), "-c", code], env=env, check=True, cwd=bench.HERE)


STATEMENTS = """
SELECT regexp_replace(query, '\\s+', ' ', 'g'), calls, total_exec_time, total_plan_time, plans, rows,
       toplevel, wal_bytes
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'postgres')
ORDER BY total_exec_time + total_plan_time DESC
"""
INDEXES = """
SELECT i.relname, i.indexrelname, i.idx_scan, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd
FROM pg_stat_user_indexes i JOIN pg_stat_user_tables t USING (relid)
WHERE i.schemaname = 'knowledge' ORDER BY t.n_tup_ins + t.n_tup_upd DESC, i.relname, i.indexrelname
"""
TABLES = """
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, seq_scan, idx_scan
FROM pg_stat_user_tables WHERE schemaname = 'knowledge' AND n_tup_ins + n_tup_upd + n_tup_del > 0
ORDER BY n_tup_ins + n_tup_upd DESC
"""
FUNCTIONS = "SELECT schemaname || '.' || funcname, calls, total_time, self_time FROM pg_stat_user_functions"
DATABASE = "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = 'postgres'"


def profile(base: str, work: Path, name: str, limit: int, shared: Path) -> dict[str, Any]:
    data = work / f"data-{name}"
    data.mkdir()
    data.chmod(0o755)
    cluster = Cluster(data / "pg").start()
    try:
        migrate(cluster.url, data, shared)
        cluster.sql("SELECT pg_stat_statements_reset(), pg_stat_reset()")
        time.sleep(0.5)
        bench.DATABASE_URL = cluster.url
        report = bench.gleaner_crawl(base, data, work / f"{name}.json", limit, shared)
        time.sleep(1.5)  # backends flush their statistics when idle (at most once a second) or at exit
        pages = max(1, int(report["pages_settled"]))
        statements = [{"query": q, "calls": int(c), "exec_ms": float(e), "plan_ms": float(p), "plans": int(n),
                       "rows": int(r), "toplevel": t == "t", "wal_bytes": int(w)}
                      for q, c, e, p, n, r, t, w in cluster.sql(STATEMENTS)]
        commits, rollbacks = (int(x) for x in cluster.sql(DATABASE)[0])
        return {
            "pages_settled": pages, "crawl_seconds": round(report["crawl_seconds"], 3),
            "cpu_during_crawl": report["cpu_during_crawl"],
            "postgres_cpu_ms_per_page": round(report["cpu_during_crawl"]["postgres"] * 1000 / pages, 3),
            "statements": statements,
            "commits_per_page": round(commits / pages, 3), "rollbacks_per_page": round(rollbacks / pages, 3),
            "indexes": [dict(zip(("table", "index", "scans", "inserts", "updates", "hot_updates"),
                                 (t, i, int(s), int(n), int(u), int(h)), strict=True))
                        for t, i, s, n, u, h in cluster.sql(INDEXES)],
            "tables": [dict(zip(("table", "inserts", "updates", "hot_updates", "deletes", "seq_scans", "idx_scans"),
                                (r[0], *map(int, r[1:])), strict=True)) for r in cluster.sql(TABLES)],
            "functions": [{"function": f, "calls": int(c), "total_ms": float(t), "self_ms": float(s)}
                          for f, c, t, s in cluster.sql(FUNCTIONS)],
        }
    finally:
        cluster.stop()
        bench.DATABASE_URL = None


def totals(statements: list[dict[str, Any]]) -> tuple[int, float, float]:
    """Calls, execution ms and planning ms of the top-level statements (nested ones count inside them)."""
    top_level = [s for s in statements if s["toplevel"]]
    return (sum(s["calls"] for s in top_level), sum(s["exec_ms"] for s in top_level),
            sum(s["plan_ms"] for s in top_level))


def print_result(label: str, r: dict[str, Any], top: int) -> None:
    pages = r["pages_settled"]
    calls, exec_ms, plan_ms = totals(r["statements"])
    print(f"\n## {label}: {pages} pages, crawl {r['crawl_seconds']} s, PostgreSQL CPU during the crawl "
          f"{r['postgres_cpu_ms_per_page']} ms/page")
    print(f"top-level statements {calls / pages:.2f}/page, execution {exec_ms / pages:.3f} ms/page, planning "
          f"{plan_ms / pages:.3f} ms/page; commits {r['commits_per_page']}/page, "
          f"rollbacks {r['rollbacks_per_page']}/page")
    print("\n| statement | calls/page | exec ms/page | mean exec ms | plan ms/page | rows/call | WAL B/page |")
    print("|---|---|---|---|---|---|---|")
    for s in r["statements"][:top]:
        nested = "" if s["toplevel"] else "(nested) "
        query = nested + (s["query"][:140] + "…" if len(s["query"]) > 140 else s["query"]).replace("|", "\\|")
        print(f"| `{query}` | {s['calls'] / pages:.3f} | {s['exec_ms'] / pages:.4f} | "
              f"{s['exec_ms'] / max(1, s['calls']):.4f} | {s['plan_ms'] / pages:.4f} | "
              f"{s['rows'] / max(1, s['calls']):.1f} | {s['wal_bytes'] / pages:.0f} |")
    print("\n| table | inserts/page | updates/page (HOT) | seq scans | index scans |\n|---|---|---|---|---|")
    for t in r["tables"]:
        print(f"| {t['table']} | {t['inserts'] / pages:.2f} | {t['updates'] / pages:.2f} "
              f"({t['hot_updates'] / pages:.2f}) | {t['seq_scans']} | {t['idx_scans']} |")
    unread = [i for i in r["indexes"] if i["scans"] == 0 and i["inserts"] + i["updates"] - i["hot_updates"] > 0]
    print("\nindexes written, never scanned: " + ", ".join(f"{i['table']}.{i['index']}" for i in unread))
    if r["functions"]:
        print("\n| function (triggers) | calls/page | self ms/page |\n|---|---|---|")
        for f in r["functions"]:
            print(f"| {f['function']} | {f['calls'] / pages:.3f} | {f['self_ms'] / pages:.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--profile", choices=("cheap", "standard"), default="cheap")
    parser.add_argument("--ref", help="also profile this commit's shared/ (first), on the same corpus")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--workdir-in", type=Path, default=None)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--search", action="store_true", help="crawl with search on (GLEANER_EMBED_AFTER_CRAWL)")
    args = parser.parse_args()
    bench.SEARCH = args.search
    if not (PG_BIN / "postgres").exists():
        raise SystemExit(f"pg_statements: PostgreSQL 15 is not installed under {PG_BIN}")
    work, variants, servers, base = compare.served_corpus("gleaner-pgs-", args.pages, args.profile, args.ref,
                                                          args.workdir_in)
    results: dict[str, Any] = {}
    try:
        for name, shared in variants.items():
            results[name] = profile(base, work, name, args.pages * 2 + 100, shared)
            print_result(name, results[name], args.top)
    finally:
        servers.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        args.out.write_text(json.dumps({"pages": args.pages, "profile": args.profile, "ref": args.ref,
                                        "search": args.search, "commit": bench.git_commit(),
                                        "results": results}, indent=1))


if __name__ == "__main__":
    main()
