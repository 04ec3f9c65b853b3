#!/usr/bin/env bash
# Local emulator mode: the Pub/Sub and GCS emulators plus the five functions under
# functions-framework on 127.0.0.1, wired by push subscriptions. Ctrl-C stops everything.
# See docs/emulators.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${GLEANER_PYTHON:-.venv/bin/python}
[ -x "$PY" ] || { ./infra/dev.sh setup; PY=.venv/bin/python; }
exec env PYTHONPATH="$PWD/shared${PYTHONPATH:+:$PYTHONPATH}" "$PY" infra/emulators.py "$@"
