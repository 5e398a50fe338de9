"""The lab's test beds have real bottlenecks: every shaped queue sits on a router namespace, so
that it fills as a modem's or a switch's does (a queue on the sending host's own interface stays
nearly empty under TCP Small Queues, and would charge userland SCTP's one UDP socket for every
queued packet). Measured with real TCP and SCTP traffic through the lab's topology module.

usage: test_testbed.py LAB_SOURCE_DIR NETPERFMETER DELAYLINE
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

LAB_SRC, NETPERFMETER, DELAYLINE = sys.argv[1:4]
del sys.argv[1:4]
sys.path.insert(0, LAB_SRC)
from npmlab import evidence, stats, topology, tshark  # noqa: E402

FRAME = 1514  # bytes of a full Ethernet frame (MTU 1500)


def netns_available():
    return os.geteuid() == 0


class Testbed(unittest.TestCase):
    def build(self, *paths, bottleneck=None):
        """The disjoint topology of `paths`, or with a `bottleneck` the shared one, up."""
        topology.remove_stale("npmtb")
        if bottleneck is None:
            topo = topology.Disjoint(list(paths), prefix="npmtb", delayline=DELAYLINE)
        else:
            topo = topology.Shared(list(paths), bottleneck, prefix="npmtb", delayline=DELAYLINE)
        topo.up()
        self.addCleanup(topo.down)
        self.dir = tempfile.mkdtemp(prefix="npm-testbed-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        return topo

    def passive(self, topo, port, *args):
        log = open(os.path.join(self.dir, f"passive-{port}.log"), "w")
        proc = topo.popen("passive", NETPERFMETER, port, "-nodisplay", *args, stdout=subprocess.DEVNULL, stderr=log)
        self.addCleanup(self._stop, proc, log)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with open(log.name) as f:
                if "waiting for incoming connections" in f.read():
                    return proc
            self.assertIsNone(proc.poll(), "the passive ended")
            time.sleep(0.05)
        self.fail("the passive did not start")

    @staticmethod
    def _stop(proc, log):
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()

    def active(self, topo, port, *args, timeout=120):
        r = subprocess.run(["ip", "netns", "exec", topo.A, NETPERFMETER, f"{topo.address('passive', 0)}:{port}",
                            "-nodisplay", "-control-over-tcp", *args], cwd=self.dir, capture_output=True, text=True,
                           timeout=timeout)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r


@unittest.skipUnless(netns_available(), "network namespaces need root")
class Bottlenecks(Testbed):
    def test_an_adsl_like_queue_fills_on_its_router(self):
        # 800 kbit/s with a 100-packet queue (a modem's), 28 ms each way: a saturated Reno flow
        # keeps the queue near full, so its RTT approaches the queue's drain time plus the base
        # RTT. A queue on the sending host held 2-3 packets (sRTT about 91 ms, studies/README.md).
        rate, packets, delay = 800e3, 100, 28
        topo = self.build(topology.path(rate=rate, queue=packets * FRAME, delay_ms=delay, name="adsl"))
        drain = packets * FRAME * 8 / rate  # 1.51 s
        base = 2 * delay / 1000
        self.passive(topo, 9000)
        sender = subprocess.Popen(["ip", "netns", "exec", topo.A, NETPERFMETER, f"{topo.address('passive', 0)}:9000",
                                   "-nodisplay", "-control-over-tcp", "-runtime=25", "-tcp",
                                   "const0:const1400:cc=reno"], cwd=self.dir, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        rtts, backlog = [], []
        try:
            time.sleep(6)  # slow start and the first loss are over
            for _ in range(30):
                out = topo.ns("active", "ss", "-tinH", "state", "established", "dport = :9000", check=False)
                rtts += [float(v) / 1000 for v in re.findall(r"\brtt:([\d.]+)/", out)]
                backlog.append(topo.path_counters("active", 0)["backlog"])
                time.sleep(0.5)
        finally:
            _, err = sender.communicate(timeout=120)
        self.assertEqual(sender.returncode, 0, err)
        counters = topo.path_counters("active", 0)
        print(f"800 kbit/s, {packets}-packet queue, {2 * delay} ms base RTT: sRTT {min(rtts):.3f} to {max(rtts):.3f} s "
              f"(median {sorted(rtts)[len(rtts) // 2]:.3f} s; drain time of the full queue {drain:.3f} s); "
              f"router queue backlog up to {max(backlog)} bytes; {counters['drops']} drops")
        # Reno halves its window at each loss, so the queue swings between about half and full:
        # the largest sRTT comes close to drain + base, the median stays above half of it.
        self.assertGreater(max(rtts), 0.8 * (drain + base))
        self.assertGreater(sorted(rtts)[len(rtts) // 2], 0.4 * (drain + base))
        self.assertGreater(max(backlog), packets * FRAME // 2)
        self.assertGreater(counters["drops"], 0, "a full queue drops")
        # the sending host holds no queue of its own
        self.assertNotIn("tbf", topo.ns("active", "tc", "qdisc", "show"))

    def test_two_reno_flows_share_a_path_and_the_drops_are_counted(self):
        # Two saturated Reno flows with the same RTT on one 10 Mbit/s path with a 50-packet
        # queue (2 ms each way): each gets half within the tolerance below, and the queue's
        # drops are what make them share.
        topo = self.build(topology.path(rate=10e6, queue=50 * FRAME, delay_ms=2, name="dfn"))
        self.passive(topo, 9000)
        before = topo.path_counters("active", 0)
        self.active(topo, 9000, "-runtime=30", "-scalar=run.sca", "-tcp", "const0:const1400:cc=reno",
                    "-tcp", "const0:const1400:cc=reno")
        after = topo.path_counters("active", 0)
        scalars = stats.read_scalars(os.path.join(self.dir, "run-passive.sca"), "passive")
        goodput = [scalars[("passive", i, "Received Bit Rate")] for i in (0, 1)]
        share = goodput[0] / sum(goodput)
        drops = after["drops"] - before["drops"]
        print(f"two Reno flows on 10 Mbit/s: {goodput[0] / 1e6:.3f} and {goodput[1] / 1e6:.3f} Mbit/s "
              f"(share {share:.3f}), {drops} drops at the router's queue")
        self.assertGreater(drops, 0)
        self.assertGreater(sum(goodput), 0.9 * 10e6 * 1448 / 1514)
        # Tolerance, fixed before these figures: Jain's fairness index of the two rates at least
        # 0.95 (one flow's share within 0.39-0.61), which only a path that does not make them
        # share fails. Six runs here gave shares 0.500-0.569 (mean 0.531: the first flow, set up
        # first, tends to keep a little more), i.e. indexes 0.981-1.000, about 170 drops each.
        jain = sum(goodput) ** 2 / (2 * sum(g * g for g in goodput))
        self.assertGreaterEqual(jain, 0.95, f"share {share:.3f}")

    def test_saturated_cmt_sends_without_udp_send_buffer_errors(self):
        # CMT-SCTP over a fast path and the ADSL-like one (userland SCTP: one UDP socket per
        # process for every path). With the queues on the routers, a packet leaves the sending
        # host at once, so the socket's send buffer never fills and no path waits for another.
        topo = self.build(topology.path(rate=10e6, queue=50 * FRAME, delay_ms=2, name="dfn"),
                          topology.path(rate=800e3, reverse_rate=16e6, queue=100 * FRAME, reverse_queue=50 * FRAME,
                                        delay_ms=28, name="adsl"))
        self.passive(topo, 9000, "--sctp-udp-port=9899")
        before = {side: evidence.nstat(topo, side) for side in ("active", "passive")}
        capture = evidence.Capture(topo, os.path.join(self.dir, "capture.pcapng"), seconds=6)
        self.active(topo, 9000, "-runtime=10", "-scalar=run.sca", "-L" + ",".join(topo.active_addresses()),
                    "-sctp", "const0:const1444:cmt=cmt:rtomin=200:bufsplit=both:sndbuf=1000000:rcvbuf=500000")
        after = {side: evidence.nstat(topo, side) for side in ("active", "passive")}
        capture.stop()
        errors = {side: after[side].get("UdpSndbufErrors", 0) - before[side].get("UdpSndbufErrors", 0)
                  for side in after}
        sent = {i: topo.path_counters("active", i)["packets"] for i in (0, 1)}
        print(f"CMT over 10 Mbit/s + 800 kbit/s for 10 s: UDP send-buffer errors {errors}, packets per path {sent}")
        self.assertGreater(min(sent.values()), 100, "CMT used both paths")
        self.assertEqual(errors, {"active": 0, "passive": 0})
        if capture.available():
            # The capture's DATA chunks, read from truncated packets (headers only): one per
            # full-sized packet on each path; chunks received twice are counted, not judged.
            seen = evidence.summarise_sctp(capture.path, 9899)
            print(f"capture of 6 s: DATA packets {seen['data_packets_per_interface']}, DATA chunks "
                  f"{seen['data_chunks_per_interface']}, received twice {seen['duplicate_tsns_per_interface']}")
            self.assertEqual(seen["data_packets_per_interface"].keys(), {"0", "1"})
            for path, packets in seen["data_packets_per_interface"].items():
                self.assertGreaterEqual(seen["data_chunks_per_interface"][path], packets)
                self.assertLessEqual(seen["duplicate_tsns_per_interface"].get(path, 0),
                                     seen["data_chunks_per_interface"][path])


@unittest.skipUnless(netns_available(), "network namespaces need root")
class Captures(Testbed):
    SEND = """
import socket, sys, time
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in sys.argv[1:]]
for i in range(200):
    for s, to in zip(socks, sys.argv[1:]):
        s.sendto(i.to_bytes(2, "big"), (to, 9))
    time.sleep(0.0005)
"""

    def test_a_capture_holds_what_the_paths_carried_from_the_moment_it_is_started(self):
        # What a run sends right after the lab started its capture is in it, on every path: the
        # association's INIT is the first packet of an SCTP flow, and the NR-SACK check reads it.
        # dumpcap says "Capturing on" before its capture filter is set, which drops what the
        # sockets took until then: started at that line, the first 6-15 ms were lost in 10 starts
        # of 10 (4 of 12 runs at 100 Mbit/s had no INIT in their capture).
        topo = self.build(topology.path(rate=10e6, queue=50 * FRAME, delay_ms=2, name="one"),
                          topology.path(rate=10e6, queue=50 * FRAME, delay_ms=2, name="two"))
        for attempt in range(5):
            path = os.path.join(self.dir, f"start{attempt}.pcapng")
            capture = evidence.Capture(topo, path, seconds=1)
            if capture.proc is None:
                self.skipTest("tshark (dumpcap) is not installed")
            topo.ns("active", sys.executable, "-c", self.SEND, topo.address("passive", 0), topo.address("passive", 1))
            capture.proc.wait(timeout=30)  # to its end (-a duration), as a run's capture ends: what
            # libpcap's ring holds when dumpcap is interrupted may not be written
            rows = tshark.read_fields(path, "udp.dstport == 9", ["frame.interface_id", "udp.payload"])
            first = {}
            for iface, data in rows:
                first.setdefault(iface, int(data, 16))
            self.assertEqual(first, {"0": 0, "1": 0}, f"start {attempt}: the first datagram seen on each path")


@unittest.skipUnless(netns_available(), "network namespaces need root")
class Outages(Testbed):
    """A host's interface taken down and up again (set_link) leaves the path as it was: the kernel
    flushes the device's static neighbour entries (and routes) when it goes down, which left the
    path dead for good before set_link() put them back. A failure inside a path (set_path) ends
    as it began."""

    PROBE = """
import socket, sys
s = socket.socket()
s.settimeout(1)
s.bind((sys.argv[1], 0))
try:
    s.connect((sys.argv[2], 9))
except ConnectionRefusedError:
    pass  # the passive's RST: the SYN crossed the path and the answer came back
except OSError:
    sys.exit(1)
"""

    def reaches(self, topo, path, target):
        """Whether a TCP SYN from the active's address of `path` to `target` is answered."""
        r = subprocess.run(["ip", "netns", "exec", topo.A, sys.executable, "-c", self.PROBE,
                            topo.address("active", path), target], capture_output=True, text=True)
        return r.returncode == 0

    def check_outage(self, topo):
        target = topo.address("passive", 1)
        self.assertTrue(self.reaches(topo, 1, target), "path 2 works before the outage")
        topo.set_link("active", 1, False)
        self.assertFalse(self.reaches(topo, 1, target), "path 2 is down")
        self.assertTrue(self.reaches(topo, 0, topo.address("passive", 0)), "path 1 is not affected")
        topo.set_link("active", 1, True)
        self.assertTrue(self.reaches(topo, 1, target), "path 2 works again after the outage")
        neighbours = topo.ns("active", "ip", "neigh", "show", "dev", topo.device("active", 1))
        self.assertIn("PERMANENT", neighbours, "no ARP crosses a path: the static entry is back")

    def test_disjoint_path_recovers(self):
        self.check_outage(self.build(topology.path(rate=10e6), topology.path(rate=10e6)))

    def test_a_failure_inside_a_path(self):
        topo = self.build(topology.path(rate=10e6), topology.path(rate=10e6))
        target = topo.address("passive", 1)
        topo.set_path(1, False)
        self.assertFalse(self.reaches(topo, 1, target), "path 2 discards")
        self.assertTrue(self.reaches(topo, 0, topo.address("passive", 0)), "path 1 is not affected")
        self.assertIn("state UP", topo.ns("active", "ip", "link", "show", topo.device("active", 1)),
                      "the host does not see the failure")
        topo.set_path(1, True)
        self.assertTrue(self.reaches(topo, 1, target), "path 2 works again")

    def test_shared_path_recovers(self):
        self.check_outage(self.build(topology.path(), topology.path(), bottleneck=topology.path(rate=10e6)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
