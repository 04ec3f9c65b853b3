#!/usr/bin/env bash
# Set up Gleaner in ./.venv on a fresh Debian/Ubuntu machine and run it.
#   infra/dev.sh demo [ARGS]   crawl the bundled demo site on the embedded defaults
#   infra/dev.sh test [ARGS]   run the test suite (pytest ARGS)
#   infra/dev.sh setup         only install
# Needs python3 (3.11+); installs python3-venv with apt when it is missing and we are root.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${GLEANER_VENV:-.venv}

setup() {
  if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "gleaner: needs Python 3.11 or newer as '$PY'" >&2; exit 1
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    if ! "$PY" -m venv "$VENV" 2>/dev/null; then
      rm -rf "$VENV"
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
        "$PY" -m venv "$VENV"
      else
        echo "gleaner: '$PY -m venv' failed; install python3-venv" >&2; exit 1
      fi
    fi
  fi
  local stamp="$VENV/.gleaner-installed"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    "$VENV/bin/python" -m pip install -q -e '.[dev]' >&2
    # The default embedding model's table is distilled from the packaged transformer once per machine
    # (about a minute of CPU, docs/retrieval.md): here at install, not in the middle of a first crawl.
    "$VENV/bin/python" -c "from gleaner.retrieval.embedder import default_embedder; default_embedder(threads=2)" >&2
    touch "$stamp"
  fi
}

run_tests() {
  if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    echo "gleaner: chromium or chromedriver is missing, so the browser tests (tests/backoffice/test_browser*.py)" \
         "are skipped; 'apt-get install chromium chromium-driver' runs them" >&2
  fi
  # pytest in a process group of its own: Ctrl-C and SIGTERM go to the whole group, and whatever the run
  # started and left (an embedded PostgreSQL whose fixture never ran its teardown) is stopped with it.
  setsid "$VENV/bin/python" -m pytest "$@" &
  local pid=$! code=0
  trap 'kill -INT -- "-$pid" 2>/dev/null' INT
  trap 'kill -TERM -- "-$pid" 2>/dev/null' TERM
  while :; do
    wait "$pid" && code=0 || code=$?
    kill -0 "$pid" 2>/dev/null || break  # a trapped signal ended the wait, not the run: wait again
  done
  trap - INT TERM
  kill -TERM -- "-$pid" 2>/dev/null || true
  exit "$code"
}

cmd=${1:-demo}
shift || true
case "$cmd" in
  setup) setup ;;
  demo) setup; exec "$VENV/bin/gleaner" demo "$@" ;;
  test) setup; run_tests "$@" ;;
  *) echo "usage: infra/dev.sh demo|test|setup [ARGS]" >&2; exit 2 ;;
esac
