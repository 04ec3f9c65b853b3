#!/usr/bin/env bash
# The Gleaner benchmark, on a fresh Debian machine: installs what it needs, then runs infra/bench/bench.py.
#   infra/bench/run.sh                       2,000 synthetic pages + the real-docs corpus, results/<timestamp>.json
#   infra/bench/run.sh --memory-pages 20000  also a 20,000-page first crawl for the memory-growth check
#   infra/bench/run.sh --quick               200 pages, synthetic corpus only
# Installs with apt (as root): nginx-light (the corpus server), wrk (the server check), python3-doc (the real
# HTML corpus); and the project's `bench` extra (Scrapy) into the venv. Set GLEANER_VENV to use another venv.
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=${GLEANER_VENV:-.venv}
need=()
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v wrk >/dev/null || need+=(wrk)
[ -d /usr/share/doc/python3.11/html ] || need+=(python3-doc)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bench: installing ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "bench: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
    exit 1
  fi
fi
if [ ! -x "$VENV/bin/python" ]; then
  ./infra/dev.sh setup
fi
if ! "$VENV/bin/python" -c 'import scrapy, psutil' 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q -e '.[bench]' >&2
fi
exec env PYTHONPATH="$PWD/shared${PYTHONPATH:+:$PYTHONPATH}" "$VENV/bin/python" infra/bench/bench.py "$@"
