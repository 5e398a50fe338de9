# shellcheck shell=bash
# Helpers for the tools tests (sourced). Usage in a test:
#   source "$(dirname "$0")/lib.sh"; BIN=$1; DATA=$2; setup_tmp
set -u
FAILURES=0
TMP=""

setup_tmp() {
  TMP=$(mktemp -d /tmp/npm-tools-test.XXXXXX)
  trap cleanup EXIT
}

cleanup() {
  local rc=$?
  for m in "${MOUNTS[@]:-}"; do
    [ -n "$m" ] && umount "$m" 2>/dev/null
  done
  [ -n "$TMP" ] && rm -rf "$TMP"
  if [ $rc -eq 0 ] && [ "$FAILURES" -ne 0 ]; then exit 1; fi
  exit $rc
}
MOUNTS=()

fail() {
  echo "FAIL: $*" >&2
  FAILURES=$((FAILURES + 1))
}

pass() { echo "ok: $*"; }

# require COMMAND: skips the test (exit 77, ctest's SKIP_RETURN_CODE) where COMMAND is missing.
require() {
  if ! command -v "$1" >/dev/null; then
    echo "SKIP: $1 is not installed" >&2
    exit 77
  fi
}

# check_table <file (.bz2 or plain)> <expected plain file>
check_table() {
  local got=$1 expected=$2
  if [ ! -e "$got" ]; then
    fail "missing output $got"
    return
  fi
  local content
  case "$got" in
    *.bz2) content=$(bzip2 -dc "$got") || { fail "$got is not valid bzip2"; return; } ;;
    *.gz) content=$(gzip -dc "$got") || { fail "$got is not valid gzip"; return; } ;;
    *) content=$(cat "$got") ;;
  esac
  if [ "$content" == "$(cat "$expected")" ]; then
    pass "$(basename "$got") matches $(basename "$expected")"
  else
    fail "$(basename "$got") differs from $expected:"
    diff <(echo "$content") "$expected" >&2 || true
  fi
}

# expect_fail <what> <expected stderr pattern> <command...>: exit 1 and the message.
expect_fail() {
  local what=$1 pattern=$2
  shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -ne 1 ]; then
    fail "$what: exit code $rc, expected 1 (stderr: $err)"
  elif ! grep -qE -- "$pattern" <<<"$err"; then
    fail "$what: stderr does not match /$pattern/: $err"
  else
    pass "$what -> $(head -1 <<<"$err")"
  fi
}

finish() {
  if [ "$FAILURES" -ne 0 ]; then
    echo "$FAILURES check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
  exit 0
}
