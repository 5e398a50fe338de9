#!/usr/bin/env bash
# The trace figures (plot-netperfmeter-results --traces) draw what the per-path vectors
# recorded: a real two-path CMT-SCTP run (userland SCTP, two addresses on the loopback of a
# network namespace of its own, 3 s, paths sampled every 20 ms), plotted; every sample of
# every path and of the association must be one point of the figure, at its recorded time,
# with the vector's value in the panel's unit (check-traces.R reads the file itself); then
# the bad input: a run without per-path vectors, a truncated per-path vector, a missing one.
# Needs root (ip netns) for the second address; skipped otherwise.
# Usage: e2e-traces.sh NETPERFMETER BUILD_RPLOT_DIR TESTS_DIR WORK_DIR PORT_BASE
set -euo pipefail
npm=$1 rplot=$2 tests=$3 work=$4 port=$5
. "$tests/lib.sh"
need Rscript r-base-core
need_npmplot
need pdfinfo poppler-utils
need bzip2
[[ -x $npm ]] || fail "$npm is not an executable"
[[ $(id -u) -eq 0 ]] || skip "needs root for a network namespace with two loopback addresses"
need ip iproute2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
ns=npm-rplot-traces-$$
ip netns add "$ns" || skip "cannot create a network namespace"
passive=
cleanup() {
  [[ -n $passive ]] && { kill "$passive" 2>/dev/null || true; wait "$passive" 2>/dev/null || true; }
  ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT
ip -n "$ns" link set lo up
ip -n "$ns" addr add 127.0.0.2/8 dev lo
udp=$((port + 50))

ip netns exec "$ns" "$npm" "$port" -nodisplay --sctp-udp-port=$udp >passive.log 2>&1 &
passive=$!
wait_passive passive.log "$passive"
timeout 60 ip netns exec "$ns" "$npm" "127.0.0.1:$port" -control-over-tcp -runtime=3 -nodisplay \
  --sctp-remote-udp-port=$udp -L127.0.0.1,127.0.0.2 --path-interval=20 \
  -config=run.config -vector=run.vec.bz2 -scalar=run.sca.bz2 \
  -sctp "const0:const1444:const0:const0:cmt=cmt:unordered=1:sndbuf=300000:rcvbuf=100000:description=CMT" \
  >active.log 2>&1 || fail "active netperfmeter (port $port) failed: $(tail -5 active.log) / passive: $(tail -5 passive.log)"
paths=run-paths-active-00000000-0000.vec.bz2
[[ -s $paths ]] || fail "netperfmeter did not write $paths"

# Every sample drawn, with its value (the figure's data against the file, read independently).
Rscript "$tests/check-traces.R" run.config "$paths" || fail "the trace figure differs from the per-path vector (above)"

# The program: one page per node asked for, a PDF that pdfinfo accepts.
"$rplot/plot-netperfmeter-results" run.config --traces -o traces.pdf -q
check_pdf_pages traces.pdf 1
"$rplot/plot-netperfmeter-results" run.config --traces --node=both --time-range=1:2 -o both.pdf -q
check_pdf_pages both.pdf 2
"$rplot/plot-netperfmeter-results" run.config --traces --quantities=cwnd,rwnd --flow=0 -o some.pdf -q
check_pdf_pages some.pdf 1
echo "ok: the figures"

# Bad input: one line naming the file, a non-zero exit, no output file left behind.
grep -v '_PATHS_VECTOR_' run.config >nopaths.config
expect_error "nopaths.config names no per-path vector" \
  "$rplot/plot-netperfmeter-results" nopaths.config --traces -o nopaths.pdf
[[ ! -e nopaths.pdf ]] || fail "nopaths.pdf was written"
mkdir truncated && cp run.config truncated/
bzcat "$paths" >full.vec
# Cut off in the middle of a row: the rows the first 5000 bytes hold, then the first 10 of the
# next row's 28 columns without its line end (a cut at byte 5000 itself fell on a row's end
# now and then, leaving a shorter but well-formed file).
awk -F '\t' -v OFS='\t' '{ bytes += length($0) + 1 }
  bytes > 5000 { NF = 10; printf "%s", $0; exit } { print }' full.vec | bzip2 >"truncated/$paths"
expect_error "per-path vector truncated/$paths is truncated or malformed" \
  "$rplot/plot-netperfmeter-results" truncated/run.config --traces -o truncated/traces.pdf
mkdir missing && cp run.config missing/
# (from its own directory: a name is also looked up relative to the working directory)
(cd missing && expect_error "run.config: the active per-path vector $paths of flow 0 does not exist" \
  "$rplot/plot-netperfmeter-results" run.config --traces -o traces.pdf)
expect_error "no samples between 5 and 6 s" \
  "$rplot/plot-netperfmeter-results" run.config --traces --time-range=5:6
expect_error "run.config has no flow 3" "$rplot/plot-netperfmeter-results" run.config --traces --flow=3
expect_error "unknown trace quantity flight" \
  "$rplot/plot-netperfmeter-results" run.config --traces --quantities=cwnd,flight
expect_error "--node needs --traces" "$rplot/plot-netperfmeter-results" run.config --node=both
echo "PASS"
