"""Measure `gleaner serve` under the attacks of issue 13: RSS and threads of the server process.

    GLEANER_DATABASE_URL=postgresql://... .venv/bin/python infra/bench/serve_attacks.py [--source DIR] [--json]

``--source`` points at another checkout's ``shared/`` directory (the code before a change), so the
same attacks measure before and after. The server runs as a subprocess bound to 127.0.0.1 and is
stopped at the end; every attack is bounded in bytes, connections and seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
SECRET = "bench-secret-0123456789abcdef0123456789abcdef"


def start(source: Path, data_dir: str) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "PYTHONPATH": str(source), "GLEANER_WEBHOOK_SECRET": SECRET, "GLEANER_DATA_DIR": data_dir}
    process = subprocess.Popen([sys.executable, "-m", "gleaner.cli", "serve", "--port", "0"], env=env,
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        match = re.search(r"on http://127\.0\.0\.1:(\d+)/", line)
        if match:
            return process, int(match.group(1))
        if not line and process.poll() is not None:
            break
    process.kill()
    raise SystemExit("gleaner serve did not start")


def sample(pid: int) -> dict[str, float]:
    proc = psutil.Process(pid)
    return {"rss_mb": round(proc.memory_info().rss / 2**20, 1), "threads": proc.num_threads()}


def stream_unauthenticated(port: int, header: bytes, total: int, chunked: bool) -> str:
    """Send a request head and up to `total` body bytes without a bearer; what the server answered."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(header)
    block = b"x" * (1 << 20)
    sent = 0
    try:
        while sent < total:
            sock.sendall(b"100000\r\n" + block + b"\r\n" if chunked else block)
            sent += len(block)
        if chunked:
            sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # the server closed the connection: it stopped reading
    try:
        answer = sock.recv(200).split(b"\r\n", 1)[0].decode("latin-1")
    except OSError as exc:
        answer = f"connection error {exc.__class__.__name__}"
    sock.close()
    return f"{answer} after {sent >> 20} MiB sent"


def run(source: Path) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as data_dir:
        process, port = start(source, data_dir)
        try:
            figures["idle"] = sample(process.pid)
            head = (b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: -1\r\n\r\n")
            figures["content_length_-1_300MiB"] = {"answer": stream_unauthenticated(port, head, 300 << 20, False),
                                                   **sample(process.pid)}
            head = b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            figures["chunked_300MiB"] = {"answer": stream_unauthenticated(port, head, 300 << 20, True),
                                         **sample(process.pid)}
            idle = []
            for _ in range(500):
                try:
                    idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                except OSError:
                    break
            time.sleep(2)
            figures["500_idle_connections"] = {"opened": len(idle), **sample(process.pid)}
            for sock in idle:
                sock.close()
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT / "shared")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = run(args.source.resolve())
    print(json.dumps(figures, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
