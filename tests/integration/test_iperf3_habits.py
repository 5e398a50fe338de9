"""What an iperf3 user reaches for, checked where it acts.

* --interval (iperf3's -i): the persistent per-interval lines print the same figures as the
  measurement vector of the same run for the same intervals (they come from the same
  snapshots): a constant-rate UDP and TCP flow (bytes, rate, frames), and a UDP flood from the
  passive with real loss (lost frames per interval, and their sum against the scalars). -quiet
  prints none.
* transfer= / frames= (iperf3's -n / -k): exactly that many bytes or frames arrive, per the
  passive's scalars (TCP, UDP without loss at loopback, SCTP over UDP; one with a last message
  that has to be split so as not to be padded to a header), and a run of fixed-size flows alone
  ends when they are sent, before -runtime.
* tos= / dscp= (iperf3's -S): the DSCP byte is in the IP header of the data packets on the
  wire (tshark on lo): TCP, UDP, MPTCP, TCP over IPv6 (traffic class); the passive's direction
  keeps its default (ADD_FLOW has no field for it), and SCTP is refused (the userland stack
  does not put it into the UDP encapsulation's IP header).
"""

import os
import re
import subprocess
import tempfile
import time
import unittest

from harness import (MEASUREMENT_COLUMNS, NETPERFMETER, Capture, Passive, WithPassive, free_base_port, main,
                     read_scalars, read_vector, run_active, tool_available)

ROW = re.compile(r"^\s*(\d+) (out|in)\s+([\d.]+)-([\d.]+)\s+([\d.]+ \S*B)\s+([\d.]+ \S*bit/s)\s+(\d+)\s+(\S+)"
                 r"\s+([\d.]+ \S*B|\S+)\s+(\S+)\s*$")
BYTE_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
RATE_UNITS = {"bit/s": 1, "kbit/s": 1e3, "Mbit/s": 1e6, "Gbit/s": 1e9}


def scaled(text, units):
    value, unit = text.split()
    return float(value) * units[unit]


def interval_rows(output):
    """{(flow, dir): [dict]} of the per-interval lines in `output`."""
    rows = {}
    for line in output.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        flow, direction, begin, end, size, rate, frames, a, b, c = m.groups()
        rows.setdefault((int(flow), direction), []).append(
            {"begin": float(begin), "end": float(end), "bytes": scaled(size, BYTE_UNITS),
             "rate": scaled(rate, RATE_UNITS), "frames": int(frames), "a": a, "b": b, "c": c})
    return rows


def vector_blocks(path, flow, action):
    """The rows of one flow and action of a measurement vector after the first, the block at the
    start of the measurement: what arrived between START and then, which the first interval line
    counts (so that the lines add up to the totals), is added to the first block after it."""
    rows = [r for r in read_vector(path, MEASUREMENT_COLUMNS)
            if r["FlowID"] == str(flow) and r["Action"] == f'"{action}"']
    if len(rows) < 2:
        return []
    first = dict(rows[1])
    for column in ("RelBytes", "RelFrames"):
        first[column] = str(int(rows[0][column]) + int(rows[1][column]))
    return [first] + rows[2:]


class IntervalLines(WithPassive):
    DIR_PREFIX = "npm-interval-"

    def assertSameAsVector(self, printed, blocks, what):
        """Each printed interval against the vector's block for it: times, frames exactly; bytes
        and rate to the 4 digits printed."""
        self.assertEqual(len(printed), len(blocks), f"{what}: {len(printed)} lines, {len(blocks)} vector blocks")
        for line, block in zip(printed, blocks):
            rel, interval = float(block["RelTime"]), float(block["Interval"])
            self.assertAlmostEqual(line["end"], rel, delta=0.0051, msg=what)
            self.assertAlmostEqual(line["end"] - line["begin"], interval, delta=0.011, msg=what)
            self.assertEqual(line["frames"], int(block["RelFrames"]), f"{what} at {rel} s")
            nbytes = int(block["RelBytes"])
            self.assertLessEqual(abs(line["bytes"] - nbytes), max(0.0006 * nbytes, 0.051), f"{what} at {rel} s")
            rate = 8 * nbytes / interval if interval > 0 else 0
            self.assertLessEqual(abs(line["rate"] - rate), max(0.0006 * rate, 0.0006), f"{what} at {rel} s")

    def test_constant_rate_udp_and_tcp_match_the_vector(self):
        result = run_active(f"127.0.0.1:{self.port}", "-runtime=3.5", "--interval=1", "-vector=rate.vec",
                            "-udp", "const200:const1000:const100:const500", "-tcp", "const100:const1400",
                            cwd=self.dir)
        printed = interval_rows(result.stdout)
        vec = os.path.join(self.dir, "rate-active.vec")
        self.assertSameAsVector(printed[(0, "out")], vector_blocks(vec, 0, "Sent"), "UDP out")
        self.assertSameAsVector(printed[(0, "in")], vector_blocks(vec, 0, "Received"), "UDP in")
        self.assertSameAsVector(printed[(1, "out")], vector_blocks(vec, 1, "Sent"), "TCP out")
        self.assertNotIn((1, "in"), printed)  # no inbound traffic: no line
        # Whole seconds at a constant rate: 200 frames of 1000 bytes, 1.6 Mbit/s (the last
        # interval is partial and printed as such).
        full = [r for r in printed[(0, "out")] if abs(r["end"] - r["begin"] - 1.0) < 0.02]
        self.assertGreaterEqual(len(full), 3, result.stdout)
        for r in full:
            self.assertAlmostEqual(r["frames"], 200, delta=2)
        self.assertLess(printed[(0, "out")][-1]["end"] - printed[(0, "out")][-1]["begin"], 0.9)
        # The TCP sender's state from TCP_INFO: an RTT in ms, a window, retransmissions.
        for r in printed[(1, "out")]:
            self.assertRegex(r["a"], r"^\d+\.\d\d$")
            self.assertRegex(r["b"], r"^[\d.]+ (B|KiB|MiB)$")
            self.assertRegex(r["c"], r"^\d+$")
        for line in result.stdout.splitlines():
            self.assertLessEqual(len(line), 79, line)
        self.assertNotIn("CPU host", result.stdout)  # the lines replace the status line

    def test_udp_flood_loss_matches_the_receivers_counts(self):
        # The passive floods the active's small receive buffer: frames are lost at the active.
        result = run_active(f"127.0.0.1:{self.port}", "-runtime=2.5", "--interval=0.5", "-vector=loss.vec",
                            "-scalar=loss.sca", "-udp", "const0:const0:const0:const1400:rcvbuf=4096", cwd=self.dir)
        printed = interval_rows(result.stdout)[(0, "in")]
        vec = os.path.join(self.dir, "loss-active.vec")
        lost = [int(r["RelFrames"]) for r in vector_blocks(vec, 0, "Lost")]
        received = [int(r["RelFrames"]) for r in vector_blocks(vec, 0, "Received")]
        # Blocks come every second, lines every half second: each second's block is the sum of
        # the two lines that end with it (the same snapshot), the last block the rest.
        ends = [float(r["RelTime"]) for r in vector_blocks(vec, 0, "Lost")]
        line_lost = [int(r["a"]) for r in printed]
        line_frames = [r["frames"] for r in printed]
        i = 0
        for end, block_lost, block_received in zip(ends, lost, received):
            got_lost = got_frames = 0
            while i < len(printed) and printed[i]["end"] <= round(end, 2) + 0.001:
                got_lost += line_lost[i]
                got_frames += line_frames[i]
                i += 1
            self.assertEqual(got_lost, block_lost, f"lost frames in the block at {end} s")
            self.assertEqual(got_frames, block_received, f"received frames in the block at {end} s")
        self.assertEqual(i, len(printed))
        scalars = read_scalars(os.path.join(self.dir, "loss-active.sca"))
        total_lost = scalars[("netPerfMeter.active.flow[0]", "Lost Frames")]
        self.assertGreater(total_lost, 0, "the flood lost nothing: no loss to compare")
        self.assertEqual(sum(line_lost), total_lost)
        for r in printed:
            frames, lost_frames = r["frames"], int(r["a"])
            share = 100.0 * lost_frames / (frames + lost_frames) if frames + lost_frames else 0.0
            self.assertAlmostEqual(float(r["b"].rstrip("%")), share, delta=0.006)

    def test_quiet_prints_no_lines(self):
        result = run_active(f"127.0.0.1:{self.port}", "-runtime=1.2", "--interval=0.5", "-quiet",
                            "-udp", "const100:const1000", cwd=self.dir)
        self.assertEqual(interval_rows(result.stdout + result.stderr), {})

    def test_bad_interval_is_refused(self):
        for value in ("0.05", "3601", "-1", "1s", "nan"):
            r = subprocess.run([NETPERFMETER, f"127.0.0.1:{self.port}", f"--interval={value}",
                                "-udp", "const1:const100"], capture_output=True, text=True, timeout=30)
            self.assertNotEqual(r.returncode, 0, value)
            self.assertIn("expected seconds from 0.1 to 3600", r.stderr, value)
        r = subprocess.run([NETPERFMETER, str(self.port + 50), "--interval=1"], capture_output=True, text=True,
                           timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--interval", r.stderr)


class FixedSizeTransfer(WithPassive):
    DIR_PREFIX = "npm-transfer-"

    def received(self, name, flow):
        s = read_scalars(os.path.join(self.dir, f"{name}-passive.sca"))
        obj = f"netPerfMeter.passive.flow[{flow}]"
        return int(s[(obj, "Received Bytes")]), int(s[(obj, "Received Frames")]), int(s[(obj, "Lost Frames")])

    def sent(self, name, flow):
        s = read_scalars(os.path.join(self.dir, f"{name}-active.sca"))
        obj = f"netPerfMeter.active.flow[{flow}]"
        return int(s[(obj, "Transmitted Bytes")]), int(s[(obj, "Transmitted Frames")])

    def assert_udp_transfer(self, name, flow, frames, size, last_size):
        """A UDP transfer: the sender sends exactly `frames` frames (the last one `last_size`
        bytes); the receiver gets them less what its socket dropped. Loopback drops depend on how
        busy the passive is beside the saturated flows of the same run, so the receiver's side is
        checked by its sums: every frame received or counted lost (none invented), no byte more
        than was sent."""
        total = (frames - 1) * size + last_size
        self.assertEqual(self.sent(name, flow), (total, frames))
        rx_bytes, rx_frames, lost = self.received(name, flow)
        self.assertGreater(rx_frames, 0)
        # Frames lost after the last one received cannot be counted as lost by the receiver.
        self.assertLessEqual(rx_frames + lost, frames)
        self.assertLessEqual(rx_bytes, rx_frames * size)
        self.assertGreaterEqual(rx_bytes, (rx_frames - 1) * size + last_size)

    def test_exact_bytes_and_frames_and_the_run_ends_when_sent(self):
        began = time.monotonic()
        result = run_active(f"127.0.0.1:{self.port}", "-runtime=60", "-scalar=exact.sca",
                            "-tcp", "const0:const1400:transfer=10M",
                            "-udp", "const4000:const1000:transfer=1M",
                            "-tcp", "const0:const1000:maxmsgsize=1000:transfer=10010",
                            "-udp", "const2000:const1200:frames=1500",
                            "-sctp", "const0:const1400:transfer=2M", cwd=self.dir, timeout=90)
        elapsed = time.monotonic() - began
        self.assertIn("until the fixed-size transfers are sent, at most 60", result.stderr)
        self.assertLess(elapsed, 30, "the run did not end when its transfers were sent")
        self.assertEqual(self.received("exact", 0), (10 * 1024 * 1024, 7490, 0))
        self.assert_udp_transfer("exact", 1, 1049, 1000, 576)  # 1048 x 1000 and 576
        self.assertEqual(self.received("exact", 2), (10010, 11, 0))  # 9 x 1000, 962 and 48
        self.assert_udp_transfer("exact", 3, 1500, 1200, 1200)
        self.assertEqual(self.received("exact", 4), (2 * 1024 * 1024, 1498, 0))

    def test_other_traffic_keeps_the_run_to_its_runtime(self):
        began = time.monotonic()
        run_active(f"127.0.0.1:{self.port}", "-runtime=2", "-scalar=mixed.sca", "-tcp", "const0:const1400:transfer=1M",
                   "-udp", "const100:const500", cwd=self.dir)
        self.assertGreaterEqual(time.monotonic() - began, 2.0)
        self.assertEqual(self.received("mixed", 0), (1024 * 1024, 749, 0))

    def test_a_transfer_the_runtime_cuts_short_is_said(self):
        result = run_active(f"127.0.0.1:{self.port}", "-runtime=0.5", "-udp", "const100:const1000:frames=1000",
                            cwd=self.dir)
        self.assertIn("1 of 1 fixed-size transfers (transfer=, frames=) were not sent completely within the runtime",
                      result.stderr)


@unittest.skipUnless(os.geteuid() == 0, "capturing on lo needs root")
@unittest.skipUnless(tool_available("tshark"), "tshark is not installed")
class TosOnTheWire(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.port, _ = free_base_port()
        cls.dir = tempfile.mkdtemp(prefix="npm-tos-")

    def captured(self, name, address, *flows, filter_ports=None):
        pcap = os.path.join(self.dir, name + ".pcapng")
        ports = filter_ports or [self.port]
        with Passive(self.port):
            with Capture(pcap, " or ".join(f"port {p}" for p in ports)) as capture:
                run_active(f"{address}:{self.port}", "-runtime=1", *flows, cwd=self.dir)
        return capture

    def dsfields(self, capture, display_filter, field="ip.dsfield"):
        return {row[0] for row in capture.fields(display_filter, field)}

    def test_tcp_udp_and_mptcp_data_carry_the_dscp(self):
        capture = self.captured("v4", "127.0.0.1", "-tcp", "const50:const1400:dscp=46",
                                "-udp", "const50:const1000:const50:const1000:tos=0x20",
                                "-mptcp", "const50:const1400:tos=0x68",
                                filter_ports=[self.port, self.port - 1])
        p = self.port
        self.assertEqual(self.dsfields(capture, f"tcp.dstport == {p} && tcp.len > 0"), {"0xb8"})
        self.assertEqual(self.dsfields(capture, f"udp.dstport == {p} && udp.length > 100"), {"0x20"})
        self.assertEqual(self.dsfields(capture, f"tcp.dstport == {p - 1} && tcp.len > 0"), {"0x68"})  # MPTCP: BASE-1
        # The passive's direction keeps its default: ADD_FLOW does not carry the TOS.
        self.assertEqual(self.dsfields(capture, f"udp.srcport == {p} && udp.length > 100"), {"0x00"})

    def test_tcp_over_ipv6_carries_the_traffic_class(self):
        capture = self.captured("v6", "[::1]", "-tcp", "const50:const1400:tos=0xb8")
        values = self.dsfields(capture, f"tcp.dstport == {self.port} && tcp.len > 0", "ipv6.tclass")
        self.assertEqual(len(values), 1, values)
        self.assertEqual(int(values.pop(), 16), 0xb8)

    def test_sctp_is_refused_with_the_reason(self):
        r = subprocess.run([NETPERFMETER, f"127.0.0.1:{self.port}", "--validate", "-sctp", "const0:const1400:dscp=46"],
                           capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("does not put a DSCP into its IP header", r.stderr)


if __name__ == "__main__":
    main()
