"""The corpus servers: nginx from Debian on 127.0.0.1 (the benchmark), or Gleaner's TestSite (the smoke test).

nginx serves static files with ETag (mtime-size) and Last-Modified and answers
conditional GETs with 304 by itself; one worker process keeps it off the
crawler's second core as much as a server can be.
"""

from __future__ import annotations

import mimetypes
import shutil
import socket
import subprocess
import time
from email.utils import formatdate
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {seconds}s")


class Nginx:
    """``with Nginx(workdir, {port: root, ...}):`` serves each root on 127.0.0.1:port."""

    def __init__(self, workdir: Path, sites: dict[int, Path]) -> None:
        self.workdir = workdir
        self.sites = sites
        self.process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def binary() -> str:
        found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
        if not found:
            raise SystemExit("bench: nginx is not installed (apt-get install nginx-light); infra/bench/run.sh does it")
        return found

    def _config(self) -> str:
        w = self.workdir
        servers = "".join(
            f"  server {{ listen 127.0.0.1:{port}; root {root}; index index.html; etag on; }}\n"
            for port, root in self.sites.items())
        temps = "".join(f"  {name}_temp_path {w}/{name}_temp;\n"
                        for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        return (
            f"worker_processes 1;\ndaemon off;\npid {w}/nginx.pid;\nerror_log {w}/error.log warn;\n"
            "events { worker_connections 1024; }\n"
            "http {\n  include /etc/nginx/mime.types;\n  default_type application/octet-stream;\n"
            "  access_log off;\n  sendfile on;\n  tcp_nopush on;\n  keepalive_requests 1000000;\n"
            f"  keepalive_timeout 60s;\n{temps}{servers}}}\n"
        )

    def start(self) -> Nginx:
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "nginx.conf"
        conf.write_text(self._config())
        self.process = subprocess.Popen([self.binary(), "-p", str(self.workdir), "-c", str(conf)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for port in self.sites:
            try:
                _wait_for_port(port)
            except RuntimeError:
                self.stop()
                raise
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def testsite_for(root: Path, max_seconds: float = 600.0):  # type: ignore[no-untyped-def]
    """Gleaner's own loopback server over a corpus directory (the smoke test's fallback: no nginx needed)."""
    from gleaner.demosite.testsite import Page, TestSite

    pages: dict[str, Page] = {}
    for f in sorted(root.rglob("*")):
        if not f.is_file() or f.name == "manifest.json":
            continue
        rel = "/" + f.relative_to(root).as_posix()
        ctype = mimetypes.guess_type(f.name)[0] or "application/octet-stream"
        if ctype.startswith("text/"):
            ctype += "; charset=utf-8"
        page = Page(f.read_bytes(), content_type=ctype, modified=f.stat().st_mtime)
        pages[rel] = page
        if f.name == "index.html":
            pages[rel[: -len("index.html")] or "/"] = page
    return TestSite(pages, max_requests=10_000_000, max_seconds=max_seconds)


def http_date(ts: float) -> str:
    return formatdate(ts, usegmt=True)
