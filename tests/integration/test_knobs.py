"""Every transport knob a FLOWSPEC can set, shown in effect where it acts: on the wire (real
captures decoded by tshark) or in the kernel's own state (ss), never only as a parsed option.

Userland SCTP (usrsctp over UDP) on loopback: nrsack= (INIT and INIT-ACK list NR-SACK, the
receiver sends NR-SACK chunks; off: neither), rcvbuf= (the receiver's a_rwnd, in both
directions: the passive applies ADD_FLOW's size to its association), sndbuf= (what the sender
keeps outstanding), dac= (CMT's delayed-ack bits in the receiver's SACKs), rtomin= (the path's
RTO in the stack's own state). TCP and MPTCP: rcvbuf= (the receiver's advertised window, both sides),
cc= (the congestion control of the connection on both sides). Buffer splitting and DAC: with the
bundled usrsctp (patch 0001) per association — two CMT associations of one process with
different values both run, each side's stack holds each association's own values, and only the
one with dac=on has DAC bits in its SACKs; with the system's usrsctp process-wide — CMT flows
that would need different values in one process are refused with one line, on the active
before anything connects and on a passive that serves a CMT association with other values; a
flow without CMT leaves them alone."""

import os
import re
import subprocess
import tempfile
import time
import unittest

from harness import (Active, Capture, Passive, WithPassive, bundled_usrsctp, free_base_port, main, number, read_paths,
                     run_active)

# usrsctp's default receive buffer (sb_hiwat of a new socket): what a_rwnd starts from without rcvbuf=.
USRSCTP_DEFAULT_RCVBUF = 128 * 1024
MESSAGE = 1400
# Rate-driven (about 22 Mbit/s): every knob but sndbuf= shows without saturating loopback, and
# the captures stay small enough to decode in seconds.
RATE = "const2000"


def tshark_available():
    return subprocess.run(["which", "tshark"], capture_output=True).returncode == 0


BUNDLED = bundled_usrsctp()


@unittest.skipUnless(os.geteuid() == 0, "capturing on lo needs root")
@unittest.skipUnless(tshark_available(), "tshark is not installed")
class UserlandSctpKnobs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.port, (cls.udp,) = free_base_port(udp_ports=1)
        cls.dir = tempfile.mkdtemp(prefix="npm-knobs-")
        cls.passive = Passive(cls.port, "--sctp-stack=userland", f"--sctp-udp-port={cls.udp}").__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.passive.__exit__(None, None, None)

    def run_captured(self, name, *flows, runtime=1):
        """One run with `flows` (-sctp ...), its SCTP packets captured whole (tshark does not
        show the chunks of a truncated packet): the Capture (the active's result in .active)."""
        pcap = os.path.join(self.dir, name + ".pcapng")
        with Capture(pcap, f"udp port {self.udp}") as capture:
            capture.active = run_active(f"127.0.0.1:{self.port}", "-control-over-tcp", "--sctp-stack=userland",
                                        f"--sctp-remote-udp-port={self.udp}", f"-runtime={runtime}", *flows,
                                        cwd=self.dir)
        self.assertTrue(self.passive.alive(), self.passive.output()[-2000:])
        return capture

    def chunks(self, capture, display_filter, *fields):
        return capture.fields(display_filter, "udp.srcport", *fields, decode=[f"udp.port=={self.udp},sctp"])

    def from_passive(self, rows):
        return [r[1:] for r in rows if r[0] == str(self.udp)]

    def from_active(self, rows):
        return [r[1:] for r in rows if r[0] != str(self.udp)]

    @staticmethod
    def numbers(rows, column=0):
        return [int(v) for r in rows for v in r[column].split(",") if v]

    def supported_chunks(self, capture, chunk_type):
        """The chunk types listed in the Supported Extensions parameter of INIT (1) / INIT-ACK (2)."""
        rows = self.chunks(capture, f"sctp.chunk_type == {chunk_type}", "sctp.supported_chunk_type")
        self.assertTrue(rows, f"no chunk of type {chunk_type} captured")
        return {int(v) for r in rows for v in r[1].split(",") if v}

    def test_nrsack_on_is_negotiated_and_the_receiver_sends_nr_sacks(self):
        capture = self.run_captured("nrsack-on", "-sctp", f"{RATE}:const1400:nrsack=on")
        self.assertIn(16, self.supported_chunks(capture, 1), "the active's INIT does not offer NR-SACK")
        self.assertIn(16, self.supported_chunks(capture, 2), "the passive's INIT-ACK does not offer NR-SACK")
        types = self.chunks(capture, "sctp.chunk_type == 16 or sctp.chunk_type == 3", "sctp.chunk_type")
        from_passive = self.numbers(self.from_passive(types))
        self.assertGreater(from_passive.count(16), 10, "the receiver sent (almost) no NR-SACK chunks")
        self.assertEqual(from_passive.count(3), 0, "the receiver sent plain SACKs in an NR-SACK association")

    def test_nrsack_off_is_not_offered_and_the_receiver_sends_sacks(self):
        capture = self.run_captured("nrsack-off", "-sctp", f"{RATE}:const1400")
        self.assertNotIn(16, self.supported_chunks(capture, 1), "the active's INIT offers NR-SACK")
        types = self.numbers(self.from_passive(
            self.chunks(capture, "sctp.chunk_type == 16 or sctp.chunk_type == 3", "sctp.chunk_type")))
        self.assertEqual(types.count(16), 0, "NR-SACK chunks without NR-SACK negotiated")
        self.assertGreater(types.count(3), 10)

    def test_pktdrop_on_is_negotiated_and_held(self):
        # Packet-drop reporting is offered like NR-SACK (PKTDROP, chunk type 129, in the
        # Supported Extensions of INIT and INIT-ACK) and in force on both sides; its effect on
        # damaged packets: test_sctp.PacketDropReporting.
        capture = self.run_captured("pktdrop-on", "-sctp", f"{RATE}:const1400:pktdrop=on")
        self.assertIn(129, self.supported_chunks(capture, 1), "the active's INIT does not offer packet-drop reporting")
        self.assertIn(129, self.supported_chunks(capture, 2), "the passive's INIT-ACK does not offer it")
        for side, log in (("active", capture.active.stderr), ("passive", self.passive.output())):
            self.assertRegex(log, r"Flow #0: SCTP association .*the stack holds .* pktdrop=on ", f"{side} log")
        self.assertNotIn("did not agree to packet-drop reporting", capture.active.stderr)
        capture = self.run_captured("pktdrop-off", "-sctp", f"{RATE}:const1400")
        self.assertNotIn(129, self.supported_chunks(capture, 1), "the active's INIT offers packet-drop reporting")

    def a_rwnd(self, capture, side):
        """The a_rwnd of `side`'s SACKs and NR-SACKs once data flows (after the 20th DATA chunk
        of the other side: the set-up's first SACKs come from before the flow's options)."""
        rows = self.chunks(capture, "sctp.chunk_type == 0 or sctp.chunk_type == 3 or sctp.chunk_type == 16",
                           "frame.number", "sctp.chunk_type", "sctp.sack_a_rwnd", "sctp.nr_sack_a_rwnd")
        mine = self.from_passive(rows) if side == "passive" else self.from_active(rows)
        theirs = self.from_active(rows) if side == "passive" else self.from_passive(rows)
        data = sorted(int(r[0]) for r in theirs if "0" in r[1].split(","))
        self.assertGreater(len(data), 100, f"too little data towards the {side}")
        start = data[20]
        windows = [int(v) for r in mine if int(r[0]) > start for v in (r[2] + "," + r[3]).split(",") if v]
        self.assertGreater(len(windows), 10, f"too few SACKs from the {side}")
        return windows

    def test_rcvbuf_is_the_receivers_window_in_both_directions(self):
        n = 60000
        capture = self.run_captured("rcvbuf", "-sctp", f"{RATE}:const{MESSAGE}:{RATE}:const{MESSAGE}:rcvbuf={n}")
        for side in ("passive", "active"):
            windows = self.a_rwnd(capture, side)
            # a_rwnd is the free receive buffer: at most N, and N less what is unread
            self.assertLessEqual(max(windows), n, f"the {side} advertises more than rcvbuf={n}")
            self.assertGreaterEqual(max(windows), n - 4 * MESSAGE, f"the {side}'s window never comes near {n}")
        default = self.run_captured("rcvbuf-default", "-sctp", f"{RATE}:const{MESSAGE}")
        self.assertGreater(max(self.a_rwnd(default, "passive")), n + 20000,
                           "without rcvbuf= the window is that small too: the test would not see the knob")

    def test_sndbuf_bounds_what_the_sender_keeps_outstanding(self):
        n = 30000

        def outstanding(capture):
            """The most bytes of DATA sent by the active and not yet cumulatively acknowledged."""
            rows = self.chunks(capture, "sctp.chunk_type == 0 or sctp.chunk_type == 3 or sctp.chunk_type == 16",
                               "sctp.data_tsn", "sctp.sack_cumulative_tsn_ack", "sctp.nr_sack_cumulative_tsn_ack")
            sent, acked, most = {}, None, 0
            for src, tsns, cum, nrcum in rows:
                if src != str(self.udp):
                    for tsn in tsns.split(","):
                        if tsn:
                            sent[int(tsn)] = MESSAGE  # one unfragmented message per chunk
                else:
                    for c in (cum + "," + nrcum).split(","):
                        if c:
                            acked = int(c) if acked is None else max(acked, int(c))
                    for tsn in [t for t in sent if acked is not None and t <= acked]:
                        del sent[tsn]
                most = max(most, sum(sent.values()))
            return most
        small = outstanding(self.run_captured("sndbuf", "-sctp", f"const0:const{MESSAGE}:sndbuf={n}:rcvbuf=1000000",
                                              runtime=0.3))
        self.assertLessEqual(small, n + MESSAGE, f"sndbuf={n}: {small} bytes outstanding")
        large = outstanding(self.run_captured("sndbuf-large", "-sctp", f"const0:const{MESSAGE}:rcvbuf=1000000",
                                              runtime=0.3))
        self.assertGreater(large, 2 * n, f"without sndbuf= only {large} bytes outstanding: the test would not see it")

    def rto(self, spec):
        """The RTO (ms) of the association's path, from the active's per-path vector: the stack's
        own state (SCTP_GET_PEER_ADDR_INFO), sampled every 100 ms."""
        d = tempfile.mkdtemp(dir=self.dir)
        run_active(f"127.0.0.1:{self.port}", "-control-over-tcp", "--sctp-stack=userland",
                   f"--sctp-remote-udp-port={self.udp}", "-runtime=1", "-vector=run.vec", "-sctp", spec, cwd=d)
        rows = [r for rows in read_paths(os.path.join(d, "run-paths-active-00000000-0000.vec")).values() for r in rows]
        values = [number(r["RTO"]) for r in rows if number(r["RTO"]) is not None]
        self.assertGreater(len(values), 5)
        return values

    def test_rtomin_is_the_paths_rto(self):
        # On loopback the RTT is far below a millisecond, so the RTO is RTO.min
        tuned = self.rto(f"{RATE}:const1400:rtomin=200")
        self.assertEqual(sorted(tuned)[len(tuned) // 2], 200, tuned)  # (before a first RTT: RTO.initial, 1 s)
        self.assertGreaterEqual(min(self.rto(f"{RATE}:const1400")), 1000, "usrsctp's default RTO.min is 1 s")

    def dac_flags_per_association(self, capture, count):
        """For the `count` associations that carry the most DATA from the active, busiest first: of
        the SACKs the passive sends on it, how many have CMT's delayed-ack bits (chunk flags 0xc0:
        packets received since the last SACK), and how many there are."""
        rows = self.chunks(capture, "sctp.chunk_type == 0 or sctp.chunk_type == 3 or sctp.chunk_type == 16",
                           "sctp.srcport", "sctp.dstport", "sctp.chunk_type", "sctp.chunk_flags")
        data = {}
        for sport, dport, types, _ in self.from_active(rows):
            data[(sport, dport)] = data.get((sport, dport), 0) + types.split(",").count("0")
        result = []
        for ports in sorted(data, key=data.get, reverse=True)[:count]:
            sacks = [(t, f) for sport, dport, types, flags in self.from_passive(rows) if (dport, sport) == ports
                     for t, f in zip(types.split(","), flags.split(",")) if t in ("3", "16")]
            self.assertGreater(len(sacks), 10, f"association {ports}")
            result.append((sum(1 for _, f in sacks if int(f, 16) & 0xC0), len(sacks)))
        return result

    def dac_flags(self, capture):
        """Of the SACKs on the association that carries the most DATA: (with DAC bits, all)."""
        return self.dac_flags_per_association(capture, 1)[0]

    def test_dac_is_in_force_for_the_cmt_association_beside_a_flow_without_it(self):
        # The CMT association asks for DAC; a flow without CMT (set up after it, with DAC off) must
        # not turn it off in either process.
        on, total = self.dac_flags(self.run_captured("dac-on", "-sctp", f"{RATE}:const1400:cmt=cmt:dac=on",
                                                     "-sctp", "const10:const200"))
        self.assertGreater(on, total // 4, f"only {on} of {total} SACKs carry DAC bits")
        off, total = self.dac_flags(self.run_captured("dac-off", "-sctp", f"{RATE}:const1400:cmt=cmt",
                                                      "-sctp", "const10:const200"))
        self.assertEqual(off, 0, f"{off} of {total} SACKs carry DAC bits without dac=on")

    @unittest.skipUnless(BUNDLED, "the system's usrsctp has buffer splitting and DAC only process-wide "
                                  "(ProcessWideSettings tests that build)")
    def test_cmt_associations_differ_in_one_process(self):
        # Two CMT associations of one process (on each side), at the same time, with different
        # buffer splitting (the first on buffered bytes, patch 0004, with smart fast
        # retransmission, patch 0005, and chunk rescheduling, patch 0006: all passed in ADD_FLOW)
        # and DAC:
        # both run, each side's stack holds each association's own values, and the SACKs show
        # DAC on the first association only.
        capture = self.run_captured("per-association",
                                    "-sctp", f"{RATE}:const1400:cmt=cmt:bufsplit=both:bufsplit-on=buffered:dac=on:"
                                             "smartfr=on:reschedule=on",
                                    "-sctp", "const500:const1400:cmt=cmtrpv2:bufsplit=none:dac=off")
        wanted = {0: "cmt=cmt cc=rfc2581 bufsplit=both bufsplit-on=buffered dac=on smartfr=on reschedule=on",
                  1: "cmt=cmtrpv2 cc=rfc2581 bufsplit=none dac=off"}
        for side, log in (("active", capture.active.stderr), ("passive", self.passive.output())):
            for flow, held in wanted.items():
                self.assertRegex(log, rf"Flow #{flow}: SCTP association .*the stack holds {held} ",
                                 f"{side} log:\n{log[-3000:]}")
        self.assertNotIn("process-wide", capture.active.stderr)
        (on, total), (other, other_total) = self.dac_flags_per_association(capture, 2)
        self.assertGreater(on, total // 4, f"dac=on: only {on} of {total} SACKs carry DAC bits")
        self.assertEqual(other, 0, f"dac=off: {other} of {other_total} SACKs carry DAC bits")


@unittest.skipUnless(os.geteuid() == 0, "capturing on lo needs root")
@unittest.skipUnless(tshark_available(), "tshark is not installed")
class StreamKnobs(WithPassive):
    """TCP and MPTCP: rcvbuf= is the receiver's window on both sides, cc= the congestion control
    of the connection (every subflow) on both sides."""

    DIR_PREFIX = "npm-knobs-"

    def windows(self, protocol, spec):
        """{side: [advertised windows in bytes]} while a bidirectional saturated flow runs."""
        port = self.port - 1 if protocol == "mptcp" else self.port
        pcap = os.path.join(self.dir, f"{protocol}-{len(os.listdir(self.dir))}.pcapng")
        with Capture(pcap, f"tcp port {port}", snaplen=96) as capture:
            run_active(f"127.0.0.1:{self.port}", "-control-over-tcp", "-runtime=1.5", f"-{protocol}", spec,
                       cwd=self.dir)
        rows = capture.fields("tcp.flags.syn == 0", "tcp.srcport", "tcp.window_size")
        out = {"passive": [], "active": []}
        for src, window in rows:
            out["passive" if src == str(port) else "active"].append(int(window))
        return out

    def check_rcvbuf(self, protocol):
        n = 100000
        message = "const0:const1400:const0:const1400"
        small = self.windows(protocol, f"{message}:rcvbuf={n}")
        default = self.windows(protocol, message)
        for side in ("passive", "active"):
            # Linux doubles SO_RCVBUF for its bookkeeping and advertises a share of it
            self.assertGreater(len(small[side]), 10)
            self.assertLessEqual(max(small[side]), 2 * n, f"{protocol} {side}: window above rcvbuf={n}")
            self.assertGreaterEqual(max(small[side]), n // 4, f"{protocol} {side}: window far below rcvbuf={n}")
            self.assertGreater(max(default[side]), 4 * n,
                               f"{protocol} {side}: without rcvbuf= the window stays small too; "
                               "the test would not see it")

    def test_tcp_rcvbuf_is_the_receivers_window(self):
        self.check_rcvbuf("tcp")

    def test_mptcp_rcvbuf_is_the_receivers_window(self):
        self.check_rcvbuf("mptcp")

    def congestion_controls(self, protocol, cc):
        """{side: {cc names of the connections (subflows) seen by ss}} while a measurement with
        cc=`cc` runs (the passive sets it on the connection it accepts, at IDENTIFY, before
        START: from START on, every byte is sent under it)."""
        port = self.port - 1 if protocol == "mptcp" else self.port
        active = Active(f"127.0.0.1:{self.port}", "-control-over-tcp", "-runtime=1.5", f"-{protocol}",
                        f"const0:const1400:const0:const1400:cc={cc}", cwd=self.dir).started()
        seen = {"passive": set(), "active": set()}
        names = re.compile(r"\b(reno|cubic|bbr|htcp|vegas|npm_\w+)\b")
        try:
            for _ in range(5):
                for side, selector in (("passive", f"sport = :{port}"), ("active", f"dport = :{port}")):
                    out = subprocess.run(["ss", "-tinH", "state", "established", selector],
                                         capture_output=True, text=True).stdout
                    seen[side].update(names.findall(out))
                time.sleep(0.1)
        finally:
            code = active.proc.wait(timeout=30)
            err = active.output()
            active.finish()
        self.assertEqual(code, 0, err)
        return seen

    def test_cc_is_in_force_on_both_sides(self):
        default = open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip()
        cc = "reno" if default != "reno" else "cubic"
        for protocol in ("tcp", "mptcp"):
            seen = self.congestion_controls(protocol, cc)
            for side in ("passive", "active"):
                self.assertEqual(seen[side], {cc}, f"{protocol} {side}: ss shows {seen[side] or 'nothing'}")


@unittest.skipIf(BUNDLED, "the bundled usrsctp keeps buffer splitting and DAC per association "
                          "(UserlandSctpKnobs.test_cmt_associations_differ_in_one_process)")
class ProcessWideSettings(unittest.TestCase):
    """The system's usrsctp has buffer splitting and DAC process-wide; flows needing different
    values in one process are refused, and a flow without CMT does not count."""

    def test_the_active_refuses_cmt_flows_with_different_process_wide_settings(self):
        with tempfile.TemporaryDirectory() as d:
            r = run_active("127.0.0.1:9", "-runtime=1", "-sctp", "const0:const1400:cmt=cmt:bufsplit=both",
                           "-sctp", "const0:const1400:cmt=cmtrpv2:bufsplit=none", cwd=d, check=False)
            self.assertNotEqual(r.returncode, 0)
            lines = [line for line in r.stderr.splitlines() if line.strip()]
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertRegex(lines[0], r"flows #0 and #1 .*bufsplit=both dac=off.*bufsplit=none dac=off.*separate")
            self.assertEqual(os.listdir(d), [], "something was written before the refusal")

    def test_what_only_the_bundled_stack_has_is_refused(self):
        for options, knob in (("bufsplit=both:bufsplit-on=buffered", "bufsplit-on=buffered"),
                              ("smartfr=on", "smartfr=on"), ("reschedule=on", "reschedule=on")):
            with tempfile.TemporaryDirectory() as d:
                r = run_active("127.0.0.1:9", "-runtime=1", "-sctp", f"const0:const1400:cmt=cmt:{options}", cwd=d,
                               check=False)
                self.assertNotEqual(r.returncode, 0)
                lines = [line for line in r.stderr.splitlines() if line.strip()]
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn(f"{knob} needs the bundled SCTP stack", lines[0])
                self.assertEqual(os.listdir(d), [], "something was written before the refusal")

    def test_a_flow_without_cmt_does_not_conflict(self):
        port, (udp,) = free_base_port(udp_ports=1)
        with Passive(port, "--sctp-stack=userland", f"--sctp-udp-port={udp}") as passive, \
                tempfile.TemporaryDirectory() as d:
            r = run_active(f"127.0.0.1:{port}", "-control-over-tcp", f"--sctp-remote-udp-port={udp}", "-runtime=1",
                           "-sctp", "const20:const1000:cmt=cmt:bufsplit=both:dac=on", "-sctp", "const20:const1000",
                           cwd=d)
            self.assertNotIn("process-wide", r.stderr)
            self.assertNotIn("process-wide", passive.output())

    def test_runs_one_after_the_other_may_differ(self):
        # An association that its users are done with no longer holds the settings while its
        # shutdown completes: a next run a few milliseconds later was refused.
        port, (udp,) = free_base_port(udp_ports=1)
        with Passive(port, "--sctp-stack=userland", f"--sctp-udp-port={udp}") as passive, \
                tempfile.TemporaryDirectory() as d:
            for dac in ("on", "off", "on", "off"):
                run_active(f"127.0.0.1:{port}", "-control-over-tcp", f"--sctp-remote-udp-port={udp}", "-runtime=0.3",
                           "-sctp", f"const200:const1000:cmt=cmt:dac={dac}", cwd=d)
            self.assertNotIn("process-wide", passive.output())

    def test_the_passive_refuses_a_cmt_flow_that_conflicts_with_one_it_serves(self):
        port, (udp,) = free_base_port(udp_ports=1)
        with Passive(port, "--sctp-stack=userland", f"--sctp-udp-port={udp}") as passive, \
                tempfile.TemporaryDirectory() as d:
            target = [f"127.0.0.1:{port}", "-control-over-tcp", f"--sctp-remote-udp-port={udp}"]
            first = subprocess.Popen([os.environ.get("NETPERFMETER", "netperfmeter"), *target, "-nodisplay",
                                      "-runtime=3", "-sctp", "const50:const1000:cmt=cmt:bufsplit=both"],
                                     cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                deadline = time.monotonic() + 10
                while "Starting measurement" not in passive.output() and time.monotonic() < deadline:
                    self.assertIsNone(first.poll(), "the first active ended before its measurement started")
                    time.sleep(0.02)
                second = run_active(*target, "-runtime=1", "-sctp", "const50:const1000:cmt=cmt:bufsplit=none",
                                    cwd=d, check=False)
            finally:
                _, first_err = first.communicate(timeout=30)
            self.assertEqual(first.returncode, 0, first_err)
            self.assertNotEqual(second.returncode, 0)
            self.assertIn("other buffer splitting or DAC settings", second.stderr)
            self.assertIn("bufsplit=both dac=off", passive.output())
            self.assertTrue(passive.alive())


if __name__ == "__main__":
    main()
