# shellcheck shell=bash
# Helpers of the autopkgtests (sourced).
set -euo pipefail
work=${AUTOPKGTEST_TMP:-$(mktemp -d)}
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
# A free port BASE with BASE-1 and BASE+1 free as well.
free_port() {
  local p
  for p in $(shuf -i 30000-39990 -n 50); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null &&
       ! (exec 3<>"/dev/tcp/127.0.0.1/$((p - 1))") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  fail "no free port"
}
# Starts a passive on $port in the background (its PID in $passive), waits for its control port.
# $port is the sourcing test's, set before it calls this (not assigned in this file).
# shellcheck disable=SC2154
start_passive() {
  netperfmeter "$port" -nodisplay "$@" >passive.log 2>&1 &
  passive=$!
  trap 'kill -INT "$passive" 2>/dev/null || true; wait "$passive" 2>/dev/null || true' EXIT
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$((port + 1))") 2>/dev/null && return
    kill -0 "$passive" 2>/dev/null || fail "the passive exited: $(tail -3 passive.log)"
    sleep 0.2
  done
  fail "the passive does not listen on $((port + 1))"
}
