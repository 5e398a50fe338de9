#!/usr/bin/env bash
# What the run plot draws is what was measured: constant-rate flows (TCP and UDP, both
# directions) of a real loopback run of netperfmeter whose runtime is not a whole number of
# seconds (3.5 s: three full intervals and a half one), read by the package as
# plot-netperfmeter-results reads them; every interval of the bit-rate and frame-rate figures,
# the last one included, must show the configured rate within 1 %. (Before, the last half
# second was drawn over the stop after the runtime too, or merged into the interval before it,
# 8-17 % low: a drop that did not happen.)
# The rates put at least 200 frames into the shortest interval: a frame more or less in an
# interval (a frame sent at the instant a vector block is written falls on either side) is
# then at most 0.5 %. The TCP flow sets nodelay: without it, Nagle's algorithm and the delayed
# ACK of the receiver held the flow's last frame back (measured: the last of 1751 frames
# arrived 40 ms after it was sent, the others within 2 ms), so that the passive really received
# the last half second's frames in 0.54 s, as the figure then says.
# Usage: e2e-interval-rates.sh NETPERFMETER BUILD_RPLOT_DIR TESTS_DIR WORK_DIR PORT_BASE
set -euo pipefail
npm=$1 tests=$3 work=$4 port=$5  # $2, BUILD_RPLOT_DIR, is not used: the package is loaded from $NPM_RPLOT_LIBRARY
. "$tests/lib.sh"
need Rscript r-base-core
need_npmplot
[[ -x $npm ]] || fail "$npm is not an executable"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
port=$(free_port "$port")

# (its userland SCTP, unused here, on a UDP port of its own instead of the default 9899)
"$npm" "$port" -nodisplay --sctp-udp-port=$((port + 1)) >passive.log 2>&1 &
passive=$!
trap 'kill "$passive" 2>/dev/null || true; wait "$passive" 2>/dev/null || true' EXIT
wait_passive passive.log "$passive"

# FRAMES/S:BYTES outbound (active to passive), then inbound
tcp_out=(500 1000) tcp_in=(400 1200) udp_out=(400 500) udp_in=(450 800)
timeout 60 "$npm" "127.0.0.1:$port" -control-over-tcp -runtime=3.5 -nodisplay \
  -config=run.config -vector=run.vec.bz2 -scalar=run.sca.bz2 \
  -tcp "const${tcp_out[0]}:const${tcp_out[1]}:const${tcp_in[0]}:const${tcp_in[1]}:nodelay=on:description=TCP" \
  -udp "const${udp_out[0]}:const${udp_out[1]}:const${udp_in[0]}:const${udp_in[1]}:id=5:description=UDP" \
  >active.log 2>&1 || fail "active netperfmeter (port $port) failed: $(tail -5 active.log) / passive: $(tail -5 passive.log)"

Rscript "$tests/check-interval-rates.R" run.config 3.5 \
  "TCP (TCP, ID 0)" "${tcp_out[0]}" "${tcp_out[1]}" "${tcp_in[0]}" "${tcp_in[1]}" \
  "UDP (UDP, ID 5)" "${udp_out[0]}" "${udp_out[1]}" "${udp_in[0]}" "${udp_in[1]}" ||
  fail "the plotted rates differ from the configured ones (above)"
echo "PASS"
