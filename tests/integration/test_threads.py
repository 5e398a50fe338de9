"""Network threads (--threads): flows spread over several threads on both sides give the same
complete results as on one thread; the threads really carry flows; the option's errors.
Also run under ThreadSanitizer (the "tsan" label), where any unsynchronised access between the
threads fails the test."""

import bz2
import os
import subprocess
import tempfile
import time
import unittest

from harness import free_base_port, NETPERFMETER, Passive, read_scalars, run_active

PORT, _ = free_base_port(span=22)  # this test's ports: PORT - 1 .. PORT + 23, its own
SANITIZED = bool(os.environ.get("NPM_SANITIZE"))
RUNTIME = 2

# Flow 0 and 2 saturated, 1 saturated in both directions, 3 rate-driven both ways, 4 on/off,
# 5 UDP (on the passive's shared socket, its main thread), 6 rate-driven one way.
FLOWS = ["-tcp", "const0:const1400", "-tcp", "const0:const1400:const0:const1400", "-tcp", "const0:const16000",
         "-tcp", "const50:const1000:const20:const300", "-tcp", "const100:const200:onoff=0.5,+1",
         "-udp", "const100:const500",
         "-tcp", "const200:const100"]


def thread_cpu(pid):
    """{thread name: CPU seconds} of process `pid`."""
    ticks = os.sysconf("SC_CLK_TCK")
    result = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        result[name] = result.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return result


def vector_rows(path):
    with bz2.open(path, "rb") as f:  # lines counted in blocks: text lines one by one took 16 s here
        return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b"")) - 1  # the header


class SpreadFlows(unittest.TestCase):
    """Two threads on both sides (the passive's TCP connections move to their thread at IDENTIFY)."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="npm-threads-")
        with Passive(PORT, "--threads=2", "-loglevel=2") as passive:
            before = thread_cpu(passive.proc.pid)
            cls.result = run_active(f"127.0.0.1:{PORT}", "--threads=2", "-control-over-tcp", "-loglevel=2",
                                    f"-runtime={RUNTIME}", "-scalar=run.sca", "-vector=run.vec.bz2", *FLOWS,
                                    cwd=cls.dir, timeout=300)
            cls.passive_threads = {name: cpu - before.get(name, 0.0)
                                   for name, cpu in thread_cpu(passive.proc.pid).items()}
            cls.passive_alive = passive.alive()
            cls.passive_log = passive.output()
        cls.active = read_scalars(os.path.join(cls.dir, "run-active.sca"))
        cls.passive = read_scalars(os.path.join(cls.dir, "run-passive.sca"))

    def scalar(self, role, flow, name):
        return (self.active if role == "active" else self.passive)[(f"netPerfMeter.{role}.flow[{flow}]", name)]

    def test_clean_run(self):
        self.assertTrue(self.passive_alive)
        self.assertEqual(self.result.returncode, 0)
        for log in (self.result.stderr, self.passive_log):
            self.assertNotIn("ERROR", log)
            self.assertNotIn("WARNING", log)

    def test_every_received_message_has_its_row(self):
        # Rows are recorded by the flow's own thread: none lost, none twice.
        for role in ("active", "passive"):
            for flow in range(7):
                path = os.path.join(self.dir, f"run-{role}-{flow:08x}-0000.vec.bz2")
                self.assertEqual(vector_rows(path), self.scalar(role, flow, "Received Packets"), f"{role} flow {flow}")

    def test_reliable_flows_arrive_whole(self):
        # TCP: what one side sent the other received (the stop drains the connections).
        for flow in (0, 1, 2, 3, 4, 6):
            sent = self.scalar("active", flow, "Transmitted Bytes")
            self.assertGreater(sent, 0, flow)
            self.assertEqual(self.scalar("passive", flow, "Received Bytes"), sent, flow)
        for flow in (1, 3):
            sent = self.scalar("passive", flow, "Transmitted Bytes")
            self.assertGreater(sent, 0, flow)
            self.assertEqual(self.scalar("active", flow, "Received Bytes"), sent, flow)

    def test_rate_driven_flows_keep_their_rates(self):
        # Frames sent against rate x runtime + 1 (the first goes out at the start); the
        # threads' sanitizer builds are slower, not late by more than a few frames.
        slack = 0.05 if SANITIZED else 0.02
        for flow, rate in ((3, 50), (6, 200)):
            frames = self.scalar("active", flow, "Transmitted Frames")
            self.assertAlmostEqual(frames, rate * RUNTIME + 1, delta=(rate * RUNTIME) * slack + 1, msg=flow)
        # The passive sends from its START until STOP comes, which is after the active has let
        # its send queues drain (longer in the sanitizer builds), and the end of its interval is
        # later still (its own queues drain before the ACK). So: it sent through the whole
        # runtime, on its absolute timeline from START, and no more than its interval allows.
        passive_total = "netPerfMeter.passive.total"
        start = self.passive[(passive_total, "First Statistics Event")]
        interval = (self.passive[(passive_total, "Last Statistics Event")] - start) / 1e6
        frames = self.scalar("passive", 3, "Transmitted Frames")
        first = (self.scalar("passive", 3, "First Transmission") - start) / 1e6
        spread = (self.scalar("passive", 3, "Last Transmission") - start) / 1e6 - first
        lateness = 0.1 if SANITIZED else 0.02
        self.assertLess(first, lateness)
        self.assertAlmostEqual(spread, (frames - 1) / 20, delta=lateness)
        self.assertGreaterEqual(frames, 20 * RUNTIME)
        self.assertLessEqual(frames, 20 * interval + 2)
        self.assertLess(interval, RUNTIME + 4)  # the three drains are bounded (1 s, 1 s, 2 s)
        # On/off: on 0.5-1.5 s of 3 s, then off again.
        frames = self.scalar("active", 4, "Transmitted Frames")
        self.assertIn(frames, (100, 101))  # due at 0.5 s, 0.51 s, ... before 1.5 s, on the timeline

    def test_the_passive_second_thread_carried_flows(self):
        # Its worker thread did real work: at least a tenth of what the main thread did.
        worker = self.passive_threads.get("npm-net1")
        self.assertIsNotNone(worker, self.passive_threads)
        main = max(cpu for name, cpu in self.passive_threads.items() if not name.startswith("npm-net"))
        self.assertGreater(worker, 0.1 * main, self.passive_threads)


class OneThread(unittest.TestCase):
    def test_no_network_thread_with_threads_1(self):
        with Passive(PORT + 10, "--threads=1") as passive, tempfile.TemporaryDirectory() as d:
            run_active(f"127.0.0.1:{PORT + 10}", "--threads=1", "-runtime=0.5", "-scalar=run.sca",
                       "-tcp", "const0:const1400", "-tcp", "const0:const1400", cwd=d)
            self.assertNotIn("npm-net1", thread_cpu(passive.proc.pid))
            scalars = read_scalars(os.path.join(d, "run-passive.sca"))
            for flow in (0, 1):
                self.assertGreater(scalars[(f"netPerfMeter.passive.flow[{flow}]", "Received Bytes")], 0)

    def test_the_active_uses_no_more_threads_than_flows(self):
        with Passive(PORT + 20) as passive, tempfile.TemporaryDirectory() as d:
            active = subprocess.Popen([NETPERFMETER, f"127.0.0.1:{PORT + 20}", "-nodisplay", "--threads=8",
                                       "-control-over-tcp", "-runtime=1.5", "-tcp", "const0:const1400",
                                       "-tcp", "const0:const1400"],
                                      cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # its threads exist once the measurement runs (they are made at set-up)
            deadline = time.monotonic() + 10
            while "Starting measurement" not in passive.output() and time.monotonic() < deadline:
                self.assertIsNone(active.poll(), "the active ended before its measurement started")
                time.sleep(0.02)
            names = thread_cpu(active.pid)
            self.assertEqual(active.wait(timeout=60), 0)
            self.assertIn("npm-net1", names)
            self.assertNotIn("npm-net2", names)


class Option(unittest.TestCase):
    def test_bad_values(self):
        for value in ("0", "257", "two", ""):
            result = subprocess.run([NETPERFMETER, "9000", f"--threads={value}"], capture_output=True, text=True,
                                    timeout=10)
            self.assertEqual(result.returncode, 1, value)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertIn("--threads", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
