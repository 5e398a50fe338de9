"""Kernel SCTP multi-homing with failover, in a VM running Debian's own kernel (these hosts'
kernel has no SCTP): two network namespaces joined by two veth pairs on different subnets, a
passive and an active that both bind two data addresses (-L), a bidirectional rate-driven flow
on one association, and mid-run the link of the primary path goes down. The run must complete,
both directions must keep receiving, and the per-path vectors must show the cut path leave the
active state while the other one stays active and carries the traffic (interface counters)."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

import npmvm  # noqa: E402
from harness import FLOW_COLUMNS, read_connection, read_paths, read_scalars, read_vector  # noqa: E402

NETPERFMETER = os.path.abspath(os.environ.get("NETPERFMETER", "netperfmeter"))

RUNTIME = 8      # s of measurement
CUT_AFTER = 3    # s after "Starting measurement" the primary path's link goes down
RATE = 100       # messages per second in each direction
SIZE = 500       # bytes per message
MAX_GAP = 3.0    # s: the longest pause of reception the failover may cause
# Path 1 (the primary: the active connects to 10.1.1.2) and path 2.
ACTIVE_ADDRESSES = ("10.1.1.1", "10.1.2.1")
PASSIVE_ADDRESSES = ("10.1.1.2", "10.1.2.2")
# Per network namespace: quick failure detection (path inactive after 3 missed heartbeats or
# retransmission timeouts) and quick heartbeats.
SYSCTLS = ("net.sctp.rto_min=200 net.sctp.rto_max=1000 net.sctp.rto_initial=500 "
           "net.sctp.path_max_retrans=2 net.sctp.hb_interval=500")

SCRIPT = f"""
set -u
NPM={NETPERFMETER}
O=/mnt/out
# The result files are written on a tmpfs of the guest and copied to $O at the end: on the 9p
# share, ftruncate() of the unlinked scratch file that spools per-flow vectors fails (ENOENT).
mkdir -p /run/failover && cd /run/failover || exit 3
modprobe sctp || exit 3
ip netns add act && ip netns add pas || exit 3
# veth a1 (act) <-> p1 (pas): 10.1.1.0/24, the primary path; a2 <-> p2: 10.1.2.0/24
for i in 1 2; do
  ip link add a$i type veth peer name p$i || exit 3
  ip link set a$i netns act && ip link set p$i netns pas || exit 3
  ip -n act addr add 10.1.$i.1/24 dev a$i && ip -n pas addr add 10.1.$i.2/24 dev p$i || exit 3
  ip -n act link set a$i up && ip -n pas link set p$i up || exit 3
done
for ns in act pas; do
  ip -n $ns link set lo up
  # SCTP's sysctls are per namespace (the module must be loaded before the namespace uses them)
  ip netns exec $ns sysctl -qw {SYSCTLS} || exit 3
  ip netns exec $ns sysctl net.sctp.rto_min net.sctp.rto_max net.sctp.rto_initial \\
    net.sctp.path_max_retrans net.sctp.pf_retrans net.sctp.hb_interval >$O/sysctl-$ns.txt
done
# A process that stays in act: its /proc/PID/net/dev shows act's interfaces (read with shell
# builtins only, as starting programs is slow under emulation)
ip netns exec act sleep 3600 &
S=$!
counters() {{  # the interface statistics of act, then pas
  for pid in $S $P; do while IFS= read -r line; do echo "$line"; done </proc/$pid/net/dev; done
}}
ip netns exec pas $NPM 9000 -nodisplay -loglevel=2 --sctp-stack=kernel -L {",".join(PASSIVE_ADDRESSES)} \\
  >$O/passive.log 2>&1 &
P=$!
# Under emulation the passive takes seconds to come up: wait for it (at most 60 s).
for i in $(seq 600); do grep -q 'waiting for incoming connections' $O/passive.log && break; sleep 0.1; done
ip netns exec act $NPM {PASSIVE_ADDRESSES[0]}:9000 -x -nodisplay --sctp-stack=kernel \\
  -L {",".join(ACTIVE_ADDRESSES)} -runtime={RUNTIME} --path-interval=100 \\
  -config=run.config -scalar=run.sca -vector=run.vec \\
  -sctp const{RATE}:const{SIZE}:const{RATE}:const{SIZE} >$O/active.log 2>&1 &
A=$!
for i in $(seq 1200); do grep -q 'Starting measurement' $O/active.log && break; sleep 0.1; done
sleep {CUT_AFTER}
counters >$O/counters-cut.txt
ip -n act link set a1 down
date +%s%N >$O/cut.txt  # after the cut: every reception later than this one came over path 2
echo "link a1 down by $(cat $O/cut.txt)"
wait $A
rc=$?
counters >$O/counters-end.txt
kill -INT $P
wait $P
echo "passive exit $?" >>$O/passive.log
kill $S
echo "active exit $rc" >>$O/active.log
cp -p /run/failover/* $O/
exit $rc
"""


def logs_of(directory):
    text = ""
    for name in ("passive.log", "active.log", "sysctl-act.txt", "sysctl-pas.txt"):
        path = os.path.join(directory, name)
        text += f"--- {name}\n"
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                text += f.read()
    return text


def rx_bytes(path):
    """{interface: received bytes} of /proc/net/dev texts."""
    counters = {}
    with open(path) as f:
        for line in f:
            name, colon, fields = line.partition(":")
            if colon and fields.split() and fields.split()[0].isdigit():
                counters[name.strip()] = int(fields.split()[0])
    return counters


def receptions(work, role):
    """AbsTime (µs) of every message `role` received on flow 0 (its per-flow vector)."""
    rows = read_vector(os.path.join(work, f"run-{role}-00000000-0000.vec"), FLOW_COLUMNS)
    return [int(r["AbsTime"]) for r in rows]


def transitions(rows):
    """[(AbsTime, state)] where a path's state changes, the first row included."""
    out = []
    for r in rows:
        if not out or out[-1][1] != r["State"]:
            out.append((int(r["AbsTime"]), r["State"]))
    return out


class SctpFailover(unittest.TestCase):
    def test_kernel_sctp_dual_homed_failover(self):
        vm = npmvm.VM()
        with tempfile.TemporaryDirectory(dir="/var/tmp") as work:
            rc, output = vm.run(SCRIPT, timeout=420, workdir=work)
            log = output + logs_of(work)
            self.assertEqual(rc, 0, log)
            self.assertIn("SCTP: kernel stack", log)
            self.assertIn("connecting SCTP association (kernel stack) to", log)
            self.assertIn("from " + ",".join(ACTIVE_ADDRESSES), log)
            self.assertIn("passive exit 0", log)
            self.assertNotIn("ERROR", log)

            with open(os.path.join(work, "cut.txt")) as f:
                cut = int(f.read()) // 1000  # µs since the epoch, the guest's clock as the vectors'
            paths_file = {role: os.path.join(work, f"run-paths-{role}-00000000-0000.vec")
                          for role in ("active", "passive")}
            any_row = read_connection(paths_file["active"])[0]
            start = int(any_row["AbsTime"]) - round(float(any_row["RelTime"]) * 1e6)  # START
            rel = lambda t: (t - start) / 1e6  # noqa: E731
            report = [f"cut: link a1 ({ACTIVE_ADDRESSES[0]} <-> {PASSIVE_ADDRESSES[0]}) down at "
                      f"{rel(cut):.3f} s after START (runtime {RUNTIME} s)"]

            # Both directions kept receiving: the longest pause around and after the cut is short,
            # and messages still arrived in the last second before the end of the sending.
            for role in ("passive", "active"):
                times = receptions(work, role)
                before = [t for t in times if t < cut]
                after = [t for t in times if t >= cut]
                self.assertGreater(len(before), RATE * (CUT_AFTER - 1), f"{role}: {len(before)} before the cut")
                self.assertGreater(len(after), 0.8 * RATE * (RUNTIME - CUT_AFTER - MAX_GAP),
                                   f"{role}: {len(after)} after the cut\n{log}")
                window = [before[-1]] + after
                gaps = [(b - a, a) for a, b in zip(window, window[1:])]
                gap, gap_at = max(gaps)
                self.assertLess(gap / 1e6, MAX_GAP,
                                f"{role}: no reception for {gap / 1e6:.3f} s from {rel(gap_at):.3f} s")
                self.assertGreater(rel(after[-1]), RUNTIME - 1.0, f"{role}: last reception at {rel(after[-1]):.3f} s")
                report.append(f"{role} received {len(before)} messages before the cut, {len(after)} after; "
                              f"last before the cut at {rel(before[-1]):.3f} s, first after at "
                              f"{rel(after[0]):.3f} s; longest pause {gap / 1e6:.3f} s from {rel(gap_at):.3f} s; "
                              f"last at {rel(after[-1]):.3f} s")

            # The per-path vectors: one row per peer address (both of them) and the association.
            for role, peers in (("active", PASSIVE_ADDRESSES), ("passive", ACTIVE_ADDRESSES)):
                by_address = {}
                for rows in read_paths(paths_file[role]).values():
                    for r in rows:
                        by_address.setdefault(r["Remote"].rsplit(":", 1)[0], []).append(r)
                self.assertEqual(sorted(by_address), sorted(peers), f"{role}: {sorted(by_address)}")
                cut_path, other = (sorted(by_address[p], key=lambda r: int(r["AbsTime"])) for p in peers)
                before = [r["State"] for r in cut_path if int(r["AbsTime"]) < cut]
                after = [r["State"] for r in cut_path if int(r["AbsTime"]) > cut]
                # The primary path was in use until the cut (under emulation a stalled guest may
                # let a retransmission timer expire: potentially-failed for a moment, never inactive)
                self.assertNotIn("inactive", before, f"{role}: {transitions(cut_path)}")
                self.assertGreaterEqual(before.count("active"), 0.8 * len(before), f"{role}: {transitions(cut_path)}")
                # then left the active state for good: inactive (path_max_retrans exceeded),
                # possibly potentially-failed on the way
                self.assertIn("inactive", after, f"{role}: {transitions(cut_path)}")
                self.assertNotEqual(after[-1], "active", f"{role}: {transitions(cut_path)}")
                # the other path was confirmed before the cut and is active after it
                self.assertIn("active", [r["State"] for r in other if int(r["AbsTime"]) < cut],
                              f"{role}: {transitions(other)}")
                # (under emulation, its last sample may catch it potentially-failed for a moment
                # as well: a stalled guest lets a retransmission timer expire; never inactive)
                other_after = [r["State"] for r in other if int(r["AbsTime"]) > cut]
                self.assertNotIn("inactive", other_after, f"{role}: {transitions(other)}")
                self.assertIn(other[-1]["State"], ("active", "potentially-failed"), f"{role}: {transitions(other)}")
                self.assertGreaterEqual(other_after.count("active"), 0.8 * len(other_after),
                                        f"{role}: {transitions(other)}")
                association = read_connection(paths_file[role])
                during = [r for r in association if int(r["AbsTime"]) <= start + RUNTIME * 1000000]
                self.assertTrue(all(r["State"] == "ESTABLISHED" for r in during), f"{role}: {transitions(association)}")
                primaries = [r["Remote"].rsplit(":", 1)[0] for r in association]
                self.assertLessEqual(set(primaries), set(peers), primaries)
                report.append(f"{role} paths: {peers[0]}: " + ", ".join(
                    f"{s} at {rel(t):.3f} s" for t, s in transitions(cut_path)) + f"; {peers[1]}: " + ", ".join(
                    f"{s} at {rel(t):.3f} s" for t, s in transitions(other)) + "; association primary address: " +
                    " -> ".join(dict.fromkeys(primaries)) + " (Linux keeps the primary address; the cut path is "
                    "no longer used)")

            # The traffic moved: path 1 carried the data before the cut, path 2 after it.
            at_cut = rx_bytes(os.path.join(work, "counters-cut.txt"))
            at_end = rx_bytes(os.path.join(work, "counters-end.txt"))
            a1, a2, p1, p2 = (at_cut[n] for n in ("a1", "a2", "p1", "p2"))
            e1, e2, f1, f2 = (at_end[n] for n in ("a1", "a2", "p1", "p2"))
            payload_before = RATE * SIZE * (CUT_AFTER - 1)   # bytes each way, lower bound
            payload_after = 0.8 * RATE * SIZE * (RUNTIME - CUT_AFTER - MAX_GAP)
            self.assertGreater(a1, payload_before, "a1 received little before the cut")
            self.assertGreater(p1, payload_before, "p1 received little before the cut")
            self.assertLess(a2, payload_before / 4, "a2 (path 2) carried data before the cut")
            self.assertLess(p2, payload_before / 4, "p2 (path 2) carried data before the cut")
            self.assertGreater(e2 - a2, payload_after, "a2 received little after the cut")
            self.assertGreater(f2 - p2, payload_after, "p2 received little after the cut")
            report.append(f"interface rx bytes at the cut / at the end: a1 {a1}/{e1}, a2 {a2}/{e2}, "
                          f"p1 {p1}/{f1}, p2 {p2}/{f2}")

            scalars = read_scalars(os.path.join(work, "run-passive.sca"))
            self.assertGreater(scalars[("netPerfMeter.passive.flow[0]", "Received Packets")],
                               0.8 * RATE * (RUNTIME - MAX_GAP))
            print("\n".join(report), flush=True)


if __name__ == "__main__":
    npmvm.run_tests()
