"""The benchmark: Gleaner against a Scrapy + trafilatura baseline on the same corpus, in one command.

    infra/bench/run.sh [--pages 2000] [--memory-pages 20000] [--quick] [--name NAME]

In one run, on two synthetic corpora (the standard profile, documentation pages that are expensive
to extract, and the cheap profile, short articles with little chrome, unless --no-cheap) and on
real documentation HTML unless --no-real:
the extraction ceiling (trafilatura alone, one and two processes), the baseline,
Gleaner's first crawl, its unchanged recrawl and its recrawl after 5% of the
pages changed; optionally a larger first crawl for the memory-growth check.
Prints a table and writes the same figures as JSON to infra/bench/results/NAME.json.

Gleaner runs on its embedded defaults with politeness relaxed for this loopback
host through the environment only (GLEANER_HOST_DELAY=0, GLEANER_HOST_CONCURRENCY=16,
GLEANER_ALLOW_NETWORKS=127.0.0.0/8). Peak RSS is sampled every 50 ms: the
Gleaner process with its descendants (the extraction forkserver and workers),
summed, and apart from it the embedded PostgreSQL's processes, summed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402
import server  # noqa: E402

CONCURRENCY = 16
# The smoke test points Gleaner at its own PostgreSQL instead of starting an embedded one per crawl.
DATABASE_URL: str | None = None
# cpu_table.py --search: the crawls run with search on (every page chunked, embedded, searchable at the end).
SEARCH = False


def log(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


class RssSampler:
    """Peak summed RSS of a process tree, and of the processes whose command line names a path."""

    def __init__(self, pid: int, also: str | None = None, interval: float = 0.05) -> None:
        self.pid, self.also, self.interval = pid, also, interval
        self.peak_tree = 0
        self.peak_other = 0
        self.peak_main = 0  # the harness's own process alone (the pipeline's stages run in it)
        self.peak_children = 0  # its descendants summed (the extraction forkserver and workers)
        self.cpu: dict[int, tuple[str, float]] = {}  # pid -> (role, user+system seconds when last sampled)
        self.cpu_system: dict[int, float] = {}  # pid -> system (kernel) seconds of that, for the tree's processes
        self._pg_first: dict[int, float] = {}  # database pid -> its CPU seconds when first seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        others: list[psutil.Process] = []
        last_scan = last_pg = 0.0
        while not self._stop.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            main, children = _rss(tree[:1]), _rss(tree[1:])
            self.peak_tree = max(self.peak_tree, main + children)
            self.peak_main = max(self.peak_main, main)
            self.peak_children = max(self.peak_children, children)
            for p in tree:
                try:
                    t = p.cpu_times()
                    self.cpu[p.pid] = ("main" if p.pid == self.pid else "children", t.user + t.system)
                    self.cpu_system[p.pid] = t.system
                except psutil.Error:
                    pass
            if self.also and time.monotonic() - last_scan > 1.0:
                others = [p for p in psutil.process_iter(["cmdline"])
                          if p.pid != self.pid and self.also in " ".join(p.info["cmdline"] or ())]
                last_scan = time.monotonic()
            if others:
                self.peak_other = max(self.peak_other, _rss(others))
                if time.monotonic() - last_pg > 0.25:
                    self._sample_postgres(others)
                    last_pg = time.monotonic()
            self._stop.wait(self.interval)

    def _sample_postgres(self, servers: list[psutil.Process]) -> None:
        """The database's CPU during the run (its server and backends, which are not our children):
        on two cores it is taken from extraction too. Counted from when each process is first seen."""
        for postmaster in servers:
            try:
                procs = [postmaster, *postmaster.children(recursive=True)]
            except psutil.Error:
                continue
            for p in procs:
                try:
                    t = p.cpu_times()
                except psutil.Error:
                    continue
                now = t.user + t.system
                first = self._pg_first.setdefault(p.pid, now)
                self.cpu[-p.pid] = ("postgres", now - first)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class Spies:
    """py-spy on every process of a tree, one recorder per process as it appears (``--subprocesses`` misses
    the extraction workers a forkserver starts): raw stacks to ``{prefix}.{pid}``."""

    def __init__(self, pid: int, prefix: Path, rate: int = 100) -> None:
        self.pid, self.prefix, self.rate = pid, prefix, rate
        self.recorders: dict[int, subprocess.Popen[bytes]] = {}
        self._stop = threading.Event()
        self._attach(pid)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _attach(self, pid: int) -> None:
        self.recorders[pid] = subprocess.Popen(
            [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid), "--nonblocking", "--gil",
             "--rate", str(self.rate), "--format", "raw", "--output", f"{self.prefix}.{pid}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                children = psutil.Process(self.pid).children(recursive=True)
            except psutil.Error:
                return
            for child in children:
                if child.pid not in self.recorders:
                    self._attach(child.pid)
            self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for recorder in self.recorders.values():
            try:
                recorder.wait(timeout=30)
            except subprocess.TimeoutExpired:
                recorder.terminate()


def _rss(procs: list[psutil.Process]) -> int:
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def python() -> str:
    return sys.executable


def run_json(cmd: list[str], out: Path, env: dict[str, str] | None = None, rss_also: str | None = None,
             timeout: float = 3600, spy: Path | None = None) -> dict[str, Any]:
    """Run a harness that writes a JSON report; with ``spy``, py-spy samples its process tree into that file."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    profiler = Spies(proc.pid, spy) if spy is not None else None
    with RssSampler(proc.pid, rss_also) as rss:
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    if profiler is not None:
        profiler.stop()
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"bench: {' '.join(cmd[:3])}... failed ({proc.returncode}):\n{err[-3000:]}")
    data = json.loads(out.read_text())
    data["process_wall_seconds"] = time.monotonic() - started
    # The whole process as a user would run it: interpreter start, imports, the database's start and
    # shutdown included; only what the harness itself adds (counting what was written) left out.
    data["whole_process_seconds"] = data["process_wall_seconds"] - data.get("harness_seconds", 0.0)
    data["pid"] = proc.pid
    data["cpu_by_pid"] = {str(pid): round(c, 3) for pid, (_role, c) in rss.cpu.items()}
    data["cpu_system_by_pid"] = {str(pid): round(c, 3) for pid, c in rss.cpu_system.items()}
    data["peak_rss_mb"] = round(rss.peak_tree / 2**20, 1)
    data["peak_rss_main_mb"] = round(rss.peak_main / 2**20, 1)
    data["peak_rss_children_mb"] = round(rss.peak_children / 2**20, 1)
    # CPU seconds as last sampled (a child's last 50 ms may be missed): where the two cores went.
    data["cpu_seconds"] = {role: round(sum(c for r, c in rss.cpu.values() if r == role), 2)
                           for role in ("main", "children", "postgres")}
    if rss_also:
        data["peak_rss_postgres_mb"] = round(rss.peak_other / 2**20, 1)
    return data


# Where a new data dir's migrated cluster is cached (store/backends/pgtemplate.py); see warm_pg_templates.
PG_TEMPLATES: Path | None = None


def warm_pg_templates(work: Path, shared: Path = REPO / "shared") -> dict[str, Any]:
    """Build the template cluster every new data dir of this run copies, before anything is timed.

    A user pays the build once, on the first data dir ever made: the crawls are then timed as on every later
    one, and the build is reported apart. A commit without templates ignores the setting (initdb each time).
    """
    global PG_TEMPLATES
    PG_TEMPLATES = work / "pg-templates"
    started = time.monotonic()
    built = subprocess.run([python(), "-c", "import sys; from pathlib import Path; "
                            "from gleaner.store.backends.pgtemplate "
                            "import ensure_template; ensure_template(Path(sys.argv[1]))", str(PG_TEMPLATES)],
                           env=gleaner_env(work / "pg-template-build", shared), capture_output=True, text=True,
                           check=False, timeout=600)
    if built.returncode != 0:  # a commit before templates: its data dirs run initdb, as they always did
        return {"dir": None, "error": built.stderr.strip().splitlines()[-1:]}
    return {"dir": str(PG_TEMPLATES), "build_seconds": round(time.monotonic() - started, 2)}


def gleaner_env(data_dir: Path, shared: Path = REPO / "shared") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env.update({
        **({"GLEANER_PG_TEMPLATE_DIR": str(PG_TEMPLATES)} if PG_TEMPLATES else {}),
        "GLEANER_HOME": str(data_dir),
        "GLEANER_DATA_DIR": str(data_dir),  # what commits before GLEANER_HOME read (compare.py --ref)
        "GLEANER_HOST_DELAY": "0",
        "GLEANER_HOST_CONCURRENCY": str(CONCURRENCY),
        "GLEANER_FETCH_CONCURRENCY": str(CONCURRENCY),
        "GLEANER_ALLOW_NETWORKS": "127.0.0.0/8",
        # The crawl's own figures: embedding after the crawl is measured by retrieval.py (and Scrapy,
        # the baseline, does none).
        "GLEANER_EMBED_AFTER_CRAWL": "true" if SEARCH else "false",
        **({"GLEANER_DATABASE_URL": DATABASE_URL} if DATABASE_URL else {}),
        "PYTHONPATH": str(shared) + os.pathsep + env.get("PYTHONPATH", ""),
    })
    return env


def gleaner_crawl(base: str, data_dir: Path, out: Path, limit: int, shared: Path = REPO / "shared",
                  spy: Path | None = None) -> dict[str, Any]:
    return run_json([python(), str(HERE / "gleaner_run.py"), base + "/", "--limit", str(limit), "--out", str(out)],
                    out, gleaner_env(data_dir, shared), rss_also=str((data_dir / "pg").resolve()), spy=spy)


def cli_crawl(base: str, data_dir: Path, limit: int, shared: Path = REPO / "shared",
              site_domain: str | None = None) -> dict[str, Any]:
    """One ``gleaner crawl URL --json`` as a user runs it, a whole process: its wall seconds from start to
    exit, CPU by role (the command's tree, the embedded PostgreSQL) and its JSON summary."""
    cmd = [python(), "-m", "gleaner.cli", "crawl", base + "/", "--limit", str(limit), "--json",
           *(["--site-domain", site_domain] if site_domain else [])]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=gleaner_env(data_dir, shared), cwd=HERE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    with RssSampler(proc.pid, str((data_dir / "pg").resolve())) as rss:
        out, err = proc.communicate(timeout=3600)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    summary = json.loads(out)
    cpu = {role: round(sum(c for r, c in rss.cpu.values() if r == role), 2)
           for role in ("main", "children", "postgres")}
    # Processes seen in the command's tree: the extraction processes, pgserver's pg_ctl calls.
    return {"wall_seconds": round(wall, 3), "cpu_seconds": cpu, "processes": len(rss.cpu),
            "summary": {k: summary.get(k) for k in ("status", "fetched", "not_modified", "snapshots")}}


def ceiling(root: Path, workers: int, out: Path) -> dict[str, Any]:
    return run_json([python(), str(HERE / "ceiling.py"), str(root), "--workers", str(workers), "--out", str(out)],
                    out)


def baseline(base: str, out: Path) -> dict[str, Any]:
    return run_json([python(), str(HERE / "baseline_scrapy.py"), base, "--concurrency", str(CONCURRENCY),
                     "--out", str(out)], out)


def server_check(base: str, path: str, seconds: int = 3) -> dict[str, Any]:
    """nginx's own pages/s on one corpus page at the crawlers' concurrency (wrk), to show it is not the limit."""
    wrk = shutil.which("wrk")
    if not wrk:
        return {"tool": None, "note": "wrk not installed; server throughput not measured"}
    proc = subprocess.run([wrk, "-t1", f"-c{CONCURRENCY}", f"-d{seconds}s", base + path], capture_output=True,
                          text=True, timeout=seconds + 20)
    rate = None
    for line in proc.stdout.splitlines():
        if line.startswith("Requests/sec:"):
            rate = float(line.split()[1])
    return {"tool": f"wrk -t1 -c{CONCURRENCY} -d{seconds}s", "path": path, "pages_per_second": rate}


class Servers:
    """nginx for the benchmark; Gleaner's TestSite where nginx is unavailable (--server testsite)."""

    def __init__(self, kind: str, workdir: Path) -> None:
        self.kind, self.workdir = kind, workdir
        self.sites: dict[int, Path] = {}
        self._nginx: server.Nginx | None = None
        self._testsites: dict[int, Any] = {}

    def add(self, root: Path) -> tuple[int, str]:
        port = server.free_port()
        while port in self.sites:  # a port freed after probing can be handed out again: never serve two corpora on one
            port = server.free_port()
        self.sites[port] = root
        return port, f"http://127.0.0.1:{port}"

    def start(self) -> None:
        if self.kind == "nginx":
            self._nginx = server.Nginx(self.workdir / "nginx", self.sites).start()
            return
        from gleaner.demosite.testsite import TestSite

        for port, root in self.sites.items():
            site = server.testsite_for(root)
            site._server.server_close()  # rebind on the port we already advertised in the sitemaps
            site._server = type(site._server)(("127.0.0.1", port), site._server.RequestHandlerClass)
            site._server.daemon_threads = True
            self._testsites[port] = site.start()
        assert TestSite

    def refresh(self, root: Path) -> None:
        """After files change: nginx reads them anew; TestSite must reload its pages."""
        for port, site in self._testsites.items():
            if self.sites[port] == root:
                site.pages.clear()
                site.pages.update(server.testsite_for(root).pages)

    def stop(self) -> None:
        if self._nginx is not None:
            self._nginx.stop()
        for site in self._testsites.values():
            site.stop()


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for mod in ("trafilatura", "scrapy", "httpx", "lxml"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:
            versions[mod] = None
    nginx = subprocess.run(["nginx", "-v"], capture_output=True, text=True) if shutil.which("nginx") else None
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "platform": platform.platform(), "python": platform.python_version(), "versions": versions,
            "nginx": (nginx.stderr.strip() if nginx else None), "note": "shared, noisy machine: compare ratios"}


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def bench_corpus(name: str, root: Path, base: str, pages: int, servers: Servers, work: Path, *,
                 recrawl: bool, mutate_percent: float, skip_baseline: bool, repeat: int) -> dict[str, Any]:
    """Ceiling, baseline and Gleaner's first crawl, repeated in turn; recrawls after the last round.

    Ratios are the median over rounds of the ratio within a round, so a slow minute on a shared
    machine weighs on both sides of a ratio rather than on one figure.
    """
    limit = pages * 2 + 100
    result: dict[str, Any] = {"pages": pages, "repeat": repeat, "rounds": []}
    parts = ["ceiling_1", "ceiling_2", *([] if skip_baseline else ["baseline"]), "gleaner_first"]
    data_dir = work / f"{name}-gleaner"
    cli_dir = work / f"{name}-cli"
    for r in range(repeat):
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(cli_dir, ignore_errors=True)
        log(f"[{name}] round {r + 1}/{repeat}: extraction ceiling (1 and 2 processes), baseline, Gleaner first crawl")
        runs = {
            "ceiling_1": lambda: ceiling(root, 1, work / f"{name}-ceiling1.json"),
            "ceiling_2": lambda: ceiling(root, 2, work / f"{name}-ceiling2.json"),
            "baseline": lambda: baseline(base, work / f"{name}-baseline.json"),
            "gleaner_first": lambda: gleaner_crawl(base, data_dir, work / f"{name}-first.json", limit),
        }
        for part in parts:
            result[part] = runs[part]()
        result["rounds"].append({part: round(result[part]["pages_per_second"], 2) for part in parts})
        # Gleaner as a user runs it, for the whole-process figures: `gleaner crawl` into a new data dir (its
        # own site domain, so a shared --database-url sees a first crawl in every round).
        log(f"[{name}] round {r + 1}/{repeat}: gleaner crawl as a whole process")
        cli = result["gleaner_cli_first"] = cli_crawl(base, cli_dir, limit, site_domain=f"cli{r}.{name}.bench")
        whole = {part: round(_pages(result[part]) / result[part]["whole_process_seconds"], 2)
                 for part in parts if part != "gleaner_first"}
        whole["gleaner_first"] = round(int(cli["summary"]["fetched"] or 0) / cli["wall_seconds"], 2)
        result.setdefault("rounds_whole_process", []).append(whole)
    first = result["gleaner_first"]
    if recrawl:
        log(f"[{name}] Gleaner unchanged recrawl")
        same = result["gleaner_recrawl_unchanged"] = gleaner_crawl(base, data_dir, work / f"{name}-same.json", limit)
        cli_first = result["gleaner_cli_first"]
        cli_same = result["gleaner_cli_recrawl_unchanged"] = cli_crawl(
            base, cli_dir, limit, site_domain=f"cli{repeat - 1}.{name}.bench")
        cli_same["whole_process_fraction_of_first"] = ratio(cli_same["wall_seconds"], cli_first["wall_seconds"])
        mutated = corpus.mutate(root, mutate_percent)
        servers.refresh(root)
        log(f"[{name}] Gleaner recrawl after {len(mutated)} pages ({mutate_percent}%) changed")
        changed = result["gleaner_recrawl_mutated"] = gleaner_crawl(base, data_dir, work / f"{name}-mut.json", limit)
        changed["mutated_pages"] = len(mutated)
        changed["exactly_mutated_pages_versioned"] = sorted(changed["changed_paths"]) == sorted(mutated)
        for run in (same, changed):
            run["time_fraction_of_first"] = ratio(run["crawl_seconds"], first["crawl_seconds"])
            run["harness_whole_process_fraction_of_first"] = ratio(run["whole_process_seconds"],
                                                                   first["whole_process_seconds"])
        same.pop("changed_paths", None)
        changed["changed_paths"] = changed["changed_paths"][:20]
    first.pop("changed_paths", None)

    def median_ratio(a: str, b: str, rounds: str = "rounds") -> float | None:
        pairs = [x[a] / x[b] for x in result[rounds] if x.get(a) and x.get(b)]
        return round(statistics.median(pairs), 3) if pairs else None

    result["median_pages_per_second"] = {part: round(statistics.median(x[part] for x in result["rounds"]), 2)
                                         for part in parts}
    result["ratios"] = {
        "gleaner_over_baseline": median_ratio("gleaner_first", "baseline"),
        "gleaner_over_ceiling_2": median_ratio("gleaner_first", "ceiling_2"),
        "gleaner_over_ceiling_1": median_ratio("gleaner_first", "ceiling_1"),
        "baseline_over_ceiling_1": median_ratio("baseline", "ceiling_1"),
        # How much of the second core the runs got: 2.0 on an idle machine with perfectly even work.
        "ceiling_2_over_ceiling_1": median_ratio("ceiling_2", "ceiling_1"),
    }
    # The same ratios over whole processes (what the targets are stated on): each side's start-up
    # (interpreter, imports; Gleaner's embedded PostgreSQL, its first start included) counts. Gleaner's side
    # is `gleaner crawl` itself (rounds_whole_process), not the harness.
    result["ratios_whole_process"] = {
        "gleaner_over_baseline": median_ratio("gleaner_first", "baseline", "rounds_whole_process"),
        "gleaner_over_ceiling_2": median_ratio("gleaner_first", "ceiling_2", "rounds_whole_process"),
    }
    return result


def _pages(run: dict[str, Any]) -> int:
    """Pages a run extracted: Gleaner's fetched pages, the baseline's and the ceiling's pages."""
    return int(run.get("pages_fetched", run.get("pages", 0)))


def print_table(report: dict[str, Any]) -> None:
    for name, r in report["corpora"].items():
        print(f"\n== {name}: {r['pages']} pages; pages/s are medians of {r['repeat']} rounds, other figures"
              " from the last ==")
        rows = [("extraction ceiling, 1 process", "ceiling_1"), ("extraction ceiling, 2 processes", "ceiling_2"),
                ("baseline Scrapy + trafilatura", "baseline"), ("Gleaner first crawl", "gleaner_first"),
                ("Gleaner unchanged recrawl", "gleaner_recrawl_unchanged"),
                ("Gleaner 5% mutated recrawl", "gleaner_recrawl_mutated")]
        for label, key in rows:
            d = r.get(key)
            if not d:
                continue
            secs = d.get("crawl_seconds", d.get("seconds"))
            extra = ""
            if "snapshot_rows_written" in d:
                extra = (f"  rows {d['snapshot_rows_written']}, snapshot blobs {d['blobs_written']['snapshot']},"
                         f" run blobs {d['blobs_written']['run']}, 304s {d['not_modified']}")
            if "time_fraction_of_first" in d:
                extra += f", {d['time_fraction_of_first']:.1%} of first crawl time"
            if "exactly_mutated_pages_versioned" in d:
                extra += (f", exactly the {d['mutated_pages']} mutated pages versioned:"
                          f" {d['exactly_mutated_pages_versioned']}")
            rss = f"  peak RSS {d['peak_rss_mb']} MB" + (f" (+PostgreSQL {d['peak_rss_postgres_mb']} MB)"
                                                        if "peak_rss_postgres_mb" in d else "")
            rate = r["median_pages_per_second"].get(key, d.get("pages_per_second", 0))
            cpu = d.get("cpu_seconds", {})
            cpu_text = f"  cpu main {cpu.get('main', 0):.1f} s + children {cpu.get('children', 0):.1f} s"
            print(f"  {label:<34} {rate:8.1f} pages/s  {secs:7.2f} s{rss}{cpu_text}{extra}")
        print("  ratios: " + ", ".join(f"{k} {v}" for k, v in r["ratios"].items()))
        print("  ratios, whole processes: " + ", ".join(f"{k} {v}" for k, v in r["ratios_whole_process"].items()))
        cli = r["gleaner_cli_first"]
        print(f"  gleaner crawl, whole process: {cli['wall_seconds']:.2f} s for {cli['summary']['fetched']} pages"
              + (f"; unchanged recrawl {r['gleaner_cli_recrawl_unchanged']['wall_seconds']:.2f} s ="
                 f" {r['gleaner_cli_recrawl_unchanged']['whole_process_fraction_of_first']:.1%}"
                 if "gleaner_cli_recrawl_unchanged" in r else ""))
        print("  Gleaner first-crawl stage shares: " + ", ".join(
            f"{k} {v:.0%}" for k, v in r["gleaner_first"]["stage_shares"].items()))
        if r.get("server"):
            print(f"  server check: {r['server']}")
    if report.get("memory"):
        m = report["memory"]
        print(f"\n== memory: peak RSS {m['small_pages']} pages {m['small_rss_mb']} MB, {m['large_pages']} pages"
              f" {m['large_rss_mb']} MB: growth {m['growth']}x"
              f" (PostgreSQL {m['small_pg_mb']} -> {m['large_pg_mb']} MB),"
              f" {m['large_pages_per_second']:.1f} pages/s ==")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--memory-pages", type=int, default=0, help="also a first crawl of this many pages (20000)")
    parser.add_argument("--quick", action="store_true", help="200 pages, no real corpus, no memory run")
    parser.add_argument("--no-real", action="store_true", help="skip the real-documentation corpus")
    parser.add_argument("--no-cheap", action="store_true", help="skip the cheap-to-extract synthetic profile")
    parser.add_argument("--memory-profile", choices=("standard", "cheap"), default="standard",
                        help="the synthetic profile of the --memory-pages crawl (compared with that profile's run)")
    parser.add_argument("--real-limit", type=int, default=0, help="at most this many real pages (0: all)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--mutate", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of ceiling, baseline and first crawl")
    parser.add_argument("--server", choices=("nginx", "testsite"), default="nginx")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--name", default=None, help="results/NAME.json (default: a timestamp)")
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument("--workdir", type=Path, default=None, help="corpora and data (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    parser.add_argument("--database-url", help="a PostgreSQL for Gleaner instead of the embedded one (tests)")
    args = parser.parse_args(argv)
    global DATABASE_URL
    DATABASE_URL = args.database_url
    if args.quick:
        args.pages = min(args.pages, 200)
        args.no_real = True
        args.memory_pages = 0
        args.repeat = 1
    started = time.monotonic()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="gleaner-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o755)  # nginx's worker (not root) reads the corpora
    servers = Servers(args.server, work)
    corpora: dict[str, tuple[Path, str, int]] = {}
    try:
        root = work / "synthetic"
        _, base = servers.add(root)
        log(f"generating {args.pages} synthetic pages")
        manifest = corpus.generate_synthetic(root, base, args.pages, args.seed)
        corpora["synthetic"] = (root, base, args.pages)
        if not args.no_cheap:
            root_c = work / "cheap"
            _, base_c = servers.add(root_c)
            log(f"generating {args.pages} cheap synthetic pages")
            cheap = corpus.generate_synthetic(root_c, base_c, args.pages, args.seed, profile="cheap")
            corpora["cheap"] = (root_c, base_c, args.pages)
        if not args.no_real:
            root_r = work / "real"
            _, base_r = servers.add(root_r)
            m = corpus.generate_real(root_r, base_r, limit=args.real_limit or None)
            corpora["real"] = (root_r, base_r, int(m["pages"]))
        if args.memory_pages:
            root_m = work / "large"
            _, base_m = servers.add(root_m)
            log(f"generating {args.memory_pages} {args.memory_profile} synthetic pages for the memory check")
            corpus.generate_synthetic(root_m, base_m, args.memory_pages, args.seed, profile=args.memory_profile)
            corpora["large"] = (root_m, base_m, args.memory_pages)
        servers.start()
        pg_template = warm_pg_templates(work)
        report: dict[str, Any] = {
            "name": args.name, "when": datetime.now(UTC).isoformat(timespec="seconds"), "commit": git_commit(),
            "command": "infra/bench/run.sh " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": machine(), "server": args.server, "concurrency": CONCURRENCY,
            "gleaner_env": {k: v for k, v in gleaner_env(work).items() if k.startswith("GLEANER_")
                            and k not in ("GLEANER_HOME", "GLEANER_DATA_DIR", "GLEANER_PG_TEMPLATE_DIR")},
            "pg_template": pg_template,
            "synthetic_bytes": manifest["page_bytes"], "corpora": {},
            "cheap_bytes": cheap["page_bytes"] if not args.no_cheap else None,
        }
        for name in ("synthetic", "cheap", "real"):
            if name not in corpora:
                continue
            root, base, pages = corpora[name]
            check = server_check(base, json.loads((root / "manifest.json").read_text())["paths"][0]) \
                if args.server == "nginx" else {"tool": None, "note": "TestSite (smoke mode): not a benchmark server"}
            r = bench_corpus(name, root, base, pages, servers, work, recrawl=(name in ("synthetic", "cheap")),
                             mutate_percent=args.mutate, skip_baseline=args.no_baseline, repeat=args.repeat)
            r["server"] = check
            report["corpora"][name] = r
        if "large" in corpora:
            root, base, pages = corpora["large"]
            log(f"[large] Gleaner first crawl of {pages} pages (memory growth)")
            large = gleaner_crawl(base, work / "large-gleaner", work / "large-first.json", pages * 2 + 100)
            large.pop("changed_paths", None)
            small_corpus = "cheap" if args.memory_profile == "cheap" and "cheap" in report["corpora"] else "synthetic"
            small = report["corpora"][small_corpus]["gleaner_first"]
            small_rate = report["corpora"][small_corpus]["median_pages_per_second"].get(
                "gleaner_first", small["pages_per_second"])
            report["memory"] = {
                "profile": small_corpus, "small_pages": args.pages, "large_pages": pages,
                "small_pages_per_second": small_rate,
                "pages_per_second_ratio": ratio(large["pages_per_second"], small_rate),
                "small_rss_mb": small["peak_rss_mb"],
                "large_rss_mb": large["peak_rss_mb"], "growth": ratio(large["peak_rss_mb"], small["peak_rss_mb"]),
                "small_pg_mb": small.get("peak_rss_postgres_mb"), "large_pg_mb": large.get("peak_rss_postgres_mb"),
                "large_pages_per_second": large["pages_per_second"], "large_run": large,
            }
        report["bench_seconds"] = round(time.monotonic() - started, 1)
    finally:
        servers.stop()
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print_table(report)
    args.results.mkdir(parents=True, exist_ok=True)
    name = args.name or datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.results / f"{name}.json"
    out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    log(f"wrote {out}")
    return report


if __name__ == "__main__":
    main()
