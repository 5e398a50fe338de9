#!/usr/bin/env bash
# createsummary --batch on a generated 600-file parameter study vs the bzip2 floor
# (called by tests/bench/run-all.sh with the build directory).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec python3 "$here/bench_createsummary.py" "${1:-$here/../../../build}" --runs 300 --repeat 3
