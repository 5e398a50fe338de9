# shellcheck shell=bash
# Helpers of the rplot end-to-end tests (sourced by bash scripts).
# A test that lacks a precondition prints the reason and exits 77 (ctest: skipped).
# BUILD_RPLOT_DIR in the scripts' usage lines is the build tree's rplot/, where the programs
# are configured to load the R package built into its library/.

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
need() { command -v "$1" >/dev/null 2>&1 || skip "$1 is missing${2:+ ($2)}"; }

# The source tree's rplot/ and the writer of synthetic runs (the package's tests use it too).
RPLOT_SOURCE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../rplot" && pwd)
# shellcheck disable=SC2034  # read by the sourcing tests (e2e-results.sh, e2e-errors.sh, e2e-install.sh)
SYNTHETIC_RUN=$RPLOT_SOURCE/npmplot/tests/testthat/make-synthetic-run.R

# The programs of the build tree load the R package built into $NPM_RPLOT_LIBRARY.
need_npmplot() {
  [[ -n ${NPM_RPLOT_LIBRARY:-} && -d $NPM_RPLOT_LIBRARY/npmplot ]] ||
    skip "the R package npmplot was not built (R, r-cran-data.table or r-cran-ggplot2 was missing when the build was configured)"
}

# pdf_pages FILE -> number of pages (pdfinfo must accept the file without complaint)
pdf_pages() {
  local out
  out=$(pdfinfo "$1" 2>&1) || fail "pdfinfo rejects $1: $out"
  if grep -qi "syntax error\|syntax warning" <<<"$out"; then fail "pdfinfo complains about $1: $out"; fi
  sed -n 's/^Pages: *//p' <<<"$out"
}

check_pdf_pages() {
  local n
  n=$(pdf_pages "$1")
  [[ $n == "$2" ]] || fail "$1 has $n pages, expected $2"
}

# png_size FILE -> "WIDTHxHEIGHT" from the IHDR chunk, after checking the signature
png_size() {
  local sig
  sig=$(od -An -tx1 -N8 "$1" | tr -d ' \n')
  [[ $sig == 89504e470d0a1a0a ]] || fail "$1 is not a PNG (signature $sig)"
  local b
  read -r -a b <<<"$(od -An -tu1 -j16 -N8 "$1")"
  echo "$(( (b[0]<<24) + (b[1]<<16) + (b[2]<<8) + b[3] ))x$(( (b[4]<<24) + (b[5]<<16) + (b[6]<<8) + b[7] ))"
}

check_png() {
  local s
  s=$(png_size "$1")
  [[ $s == "$2" ]] || fail "$1 is $s pixels, expected $2"
}

check_svg() {
  grep -q "<svg" <<<"$(head -c 400 "$1")" || fail "$1 is not an SVG file"
  grep -q "</svg>" <<<"$(tail -c 100 "$1")" || fail "$1 is not a complete SVG file"
}

# expect_error PATTERN CMD... : CMD must fail with exactly one line on stderr that
# matches PATTERN, and no R traceback.
expect_error() {
  local pattern=$1; shift
  local err rc=0
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  [[ $rc -ne 0 ]] || fail "expected an error from: $*"
  [[ $(printf '%s\n' "$err" | wc -l) -eq 1 ]] || fail "expected one line from: $*; got:
$err"
  grep -q -- "$pattern" <<<"$err" || fail "expected /$pattern/ from: $*; got: $err"
  if grep -q "Execution halted\|Traceback\|Error in " <<<"$err"; then fail "R traceback from: $*"; fi
  echo "ok (exit $rc): $err"
}

# free_port BASE: the first port P in BASE, BASE+3, ... (20 tries) where nothing listens
# on P-1 (MPTCP data), P (data) or P+1 (control), so that concurrent tests do not meet.
free_port() {
  local p q busy
  for ((p = $1; p < $1 + 60; p += 3)); do
    busy=0
    for q in $((p - 1)) "$p" $((p + 1)); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$q") 2>/dev/null; then busy=1; break; fi
    done
    if ((busy == 0)); then echo "$p"; return 0; fi
  done
  fail "no free port from $1 on"
}

# wait_passive LOG PID: until the passive netperfmeter writing LOG listens (at most 10 s);
# fails when it exits first or does not listen in time.
wait_passive() {
  local log=$1 pid=$2 i
  for ((i = 0; i < 100; i++)); do
    grep -qs "waiting for incoming connections" "$log" && return 0
    kill -0 "$pid" 2>/dev/null || fail "passive netperfmeter exited: $(tail -3 "$log")"
    sleep 0.1
  done
  fail "the passive is not listening after 10 s: $(tail -3 "$log")"
}
