"""A real measurement on loopback: saturated TCP, rate-driven UDP and MPTCP, all files checked."""

import bz2
import fnmatch
import gzip
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import (free_base_port, FLOW_COLUMNS, MEASUREMENT_COLUMNS, Passive, number, read_config, read_connection,
                     read_paths, read_scalars, read_text, read_vector, run_active)

PORT, _ = free_base_port(span=38)  # this test's ports: PORT - 1 .. PORT + 39, its own


class LoopbackRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="npm-loopback-")
        with Passive(PORT) as passive:
            cls.result = run_active(
                f"127.0.0.1:{PORT}", "-runtime=3", "-config=run.config", "-scalar=run.sca", "-vector=run.vec.bz2",
                # saturated (the CPU figures need load) in 16000-byte messages: a tenth of the
                # per-message vector rows of 1400-byte ones to write and read back
                "-tcp", "const0:const16000:description=Bulk",
                "-udp", "const50:const500:const25:const1000:description=Voice",
                "-mptcp", "const20:const1000:const20:const1000:id=7:description=Multipath",
                cwd=cls.dir)
            cls.passive_alive = passive.alive()
        cls.active = read_scalars(os.path.join(cls.dir, "run-active.sca"))
        cls.passive = read_scalars(os.path.join(cls.dir, "run-passive.sca"))

    def path(self, name):
        return os.path.join(self.dir, name)

    def test_every_expected_file_exists_and_parses(self):
        expected = ["run.config", "run-active.sca", "run-passive.sca", "run-active.vec.bz2", "run-passive.vec.bz2"]
        for flow in (0, 1, 7):
            for role in ("active", "passive"):
                expected.append(f"run-{role}-{flow:08x}-0000.vec.bz2")
                if flow != 1:  # UDP keeps no per-path state
                    expected.append(f"run-paths-{role}-{flow:08x}-0000.vec.bz2")
        self.assertEqual(sorted(os.listdir(self.dir)), sorted(expected))
        for role in ("active", "passive"):
            rows = read_vector(self.path(f"run-{role}.vec.bz2"), MEASUREMENT_COLUMNS)
            # one block per second plus the block at START and the final one at STOP: 3 flows + total, 3 rows each
            self.assertGreaterEqual(len(rows), 4 * 12)
            self.assertEqual(len(rows) % 12, 0)
            self.assertAlmostEqual(float(rows[-1]["RelTime"]), 3.0, delta=0.3)
            for flow in (0, 1, 7):
                read_vector(self.path(f"run-{role}-{flow:08x}-0000.vec.bz2"), FLOW_COLUMNS)
        config = read_config(self.path("run.config"))
        self.assertEqual(config["NUM_FLOWS"], "3")
        self.assertEqual(config["FLOW7_PROTOCOL"], "MPTCP")
        self.assertEqual(config["FLOW1_DESCRIPTION"], "Voice")
        self.assertEqual(config["FLOW7_VECTOR_PASSIVE_NODE"], "run-passive-00000007-0000.vec.bz2")

    def test_per_path_vectors(self):
        config = read_config(self.path("run.config"))
        for flow in (0, 7):
            for role in ("active", "passive"):
                name = f"run-paths-{role}-{flow:08x}-0000.vec.bz2"
                self.assertEqual(config[f"FLOW{flow}_PATHS_VECTOR_{role.upper()}_NODE"], name)
                paths = read_paths(self.path(name))
                self.assertEqual(len(paths), 1, f"{name}: one path on loopback")
                rows = next(iter(paths.values()))
                # every 100 ms over 3 s, plus the samples at START and STOP
                self.assertGreaterEqual(len(rows), 25, name)
                self.assertLessEqual(len(rows), 60, name)
                for r in rows:
                    self.assertEqual(r["State"], "ESTABLISHED")
                    self.assertGreater(number(r["Cwnd"]), 0)
                    self.assertTrue(0 < number(r["RTT"]) < 200, f"{name}: RTT {r['RTT']} ms")
                    self.assertTrue(r["Local"].startswith("127.0.0.1:") and r["Remote"].startswith("127.0.0.1:"))
                # the sender's bytes acknowledged grow with the saturated TCP flow
                if flow == 0 and role == "active":
                    acked = [number(r["BytesAcked"]) for r in rows]
                    self.assertEqual(acked, sorted(acked))
                    sent = self.active[("netPerfMeter.active.flow[0]", "Transmitted Bytes")]
                    self.assertGreater(acked[-1], 0.9 * sent)
        self.assertNotIn("FLOW1_PATHS_VECTOR_ACTIVE_NODE", config)
        # The MPTCP flow's connection as a whole: multipath (no fallback to TCP) on one subflow;
        # its data-level bytes (Linux 6.7+) are the flow's bytes plus its 26-byte IDENTIFY.
        for role in ("active", "passive"):
            connection = read_connection(self.path(f"run-paths-{role}-00000007-0000.vec.bz2"))
            self.assertGreaterEqual(len(connection), 25, role)
            self.assertEqual({r["State"] for r in connection}, {"multipath"}, role)
        sent = self.active.get(("netPerfMeter.active.flow[7].connection", "Bytes Sent"))
        if sent is None:
            print(f"this kernel's mptcp_info has no byte counters (Linux 6.7+): {os.uname().release}")
        else:
            transmitted = self.active[("netPerfMeter.active.flow[7]", "Transmitted Bytes")]
            self.assertEqual(sent, transmitted + 26)
            received = self.passive[("netPerfMeter.passive.flow[7].connection", "Bytes Received")]
            self.assertEqual(received, self.passive[("netPerfMeter.passive.flow[7]", "Received Bytes")] + 26)
        # Scripts that glob the per-flow vectors do not catch the per-path ones.
        per_flow = fnmatch.filter(os.listdir(self.dir), "run-active-*.vec.bz2")
        self.assertEqual(sorted(per_flow), [f"run-active-{f:08x}-0000.vec.bz2" for f in (0, 1, 7)])

    def test_per_path_scalars_and_createsummary(self):
        # Each side's scalar file summarises the paths of its TCP and MPTCP flows.
        for side, scalars in (("active", self.active), ("passive", self.passive)):
            for flow in (0, 7):
                path = [k for k in scalars if k[0].startswith(f"netPerfMeter.{side}.flow[{flow}].path[")]
                self.assertTrue(path, f"{side} flow {flow}: no per-path scalars")
                obj = path[0][0]
                self.assertGreaterEqual(scalars[(obj, "Samples")], 25)
                self.assertGreater(scalars[(obj, "Mean Cwnd")], 0)
                self.assertGreater(scalars[(obj, "Mean RTT")], 0)
        sent = self.passive[("netPerfMeter.passive.flow[0].path[0]", "Bytes Received")]
        self.assertGreater(sent, 0.9 * self.passive[("netPerfMeter.passive.flow[0]", "Received Bytes")])
        createsummary = os.path.join(os.environ.get("NPM_BUILD_DIR", ""), "src", "tools", "createsummary")
        if not os.path.exists(createsummary):
            self.skipTest("createsummary is not built")
        out = tempfile.mkdtemp(prefix="npm-summary-")
        self.addCleanup(shutil.rmtree, out, ignore_errors=True)
        commands = (f"--varnames=Run\n--resultsdirectory={out}\n--values=1\n--input={self.path('run-active.sca')}\n"
                    f"--values=1\n--input={self.path('run-passive.sca')}\n")
        r = subprocess.run([createsummary, "-b", "-q"], input=commands, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        table = read_text(os.path.join(out, "passive.flow.path-MeanCwnd.data.bz2")).splitlines()
        self.assertIn("passive.flow.path", table[0])
        self.assertEqual(len(table), 1 + 2)  # the paths of flows 0 and 7
        self.assertTrue(os.path.exists(os.path.join(out, "passive.flow-MeanDelay.data.bz2")))

    def test_per_path_scalars_without_vectors(self):
        # Scalars alone: the paths are sampled for the scalars, no per-path vector is written.
        with Passive(PORT + 10) as passive, tempfile.TemporaryDirectory() as d:
            run_active(f"127.0.0.1:{PORT + 10}", "-runtime=1", "-scalar=run.sca", "-tcp", "const0:const1400",
                       cwd=d)
            self.assertEqual(sorted(os.listdir(d)), ["run-active.sca", "run-passive.sca"])
            for side in ("active", "passive"):
                scalars = read_scalars(os.path.join(d, f"run-{side}.sca"))
                self.assertGreaterEqual(scalars[(f"netPerfMeter.{side}.flow[0].path[0]", "Samples")], 8, side)
            self.assertTrue(passive.alive())

    def test_mean_delay_per_flow_and_direction(self):
        # Each side's scalar file holds the mean one-way delay of what it received.
        for side, scalars, flows in (("passive", self.passive, (0, 1, 7)), ("active", self.active, (1, 7))):
            for flow in flows:
                delay = scalars[(f"netPerfMeter.{side}.flow[{flow}]", "Mean Delay")]
                self.assertTrue(0 < delay < 2000, f"{side} flow {flow}: mean delay {delay} ms")
        # The active receives nothing on the saturated one-way TCP flow.
        self.assertNotEqual(self.active[("netPerfMeter.active.flow[0]", "Mean Delay")],
                            self.active[("netPerfMeter.active.flow[0]", "Mean Delay")])  # NaN

    def test_passive_received_what_the_active_transmitted(self):
        for flow in (0, 1, 7):
            sent = self.active[(f"netPerfMeter.active.flow[{flow}]", "Transmitted Bytes")]
            got = self.passive[(f"netPerfMeter.passive.flow[{flow}]", "Received Bytes")]
            self.assertGreater(sent, 0)
            self.assertLessEqual(got, sent)
            self.assertGreaterEqual(got, sent - 256 * 1024, f"flow {flow}: more than what can be in flight is missing")
        # and the other direction
        for flow in (1, 7):
            sent = self.passive[(f"netPerfMeter.passive.flow[{flow}]", "Transmitted Bytes")]
            got = self.active[(f"netPerfMeter.active.flow[{flow}]", "Received Bytes")]
            self.assertGreater(sent, 0)
            self.assertGreaterEqual(got, sent - 4 * 1000)

    def test_rate_driven_udp_frames_match_the_rates(self):
        # const50 out, const25 back, over 3 s: frames at 0, 1/rate, ..., 3 s: rate x 3 + 1
        sent = self.active[("netPerfMeter.active.flow[1]", "Transmitted Frames")]
        self.assertAlmostEqual(sent, 151, delta=1)
        back = self.passive[("netPerfMeter.passive.flow[1]", "Transmitted Frames")]
        self.assertAlmostEqual(back, 76, delta=1)
        # frames are finalised at STOP, not only after defragtimeout
        self.assertAlmostEqual(self.passive[("netPerfMeter.passive.flow[1]", "Received Frames")], sent, delta=1)
        self.assertEqual(self.active[("netPerfMeter.active.flow[1]", "Transmitted Bytes")], sent * 500)

    def test_cpu_figures_are_real(self):
        for scalars, role in ((self.active, "active"), (self.passive, "passive")):
            idle = scalars[(f"netPerfMeter.{role}.totalCPU", "Idle")]
            self.assertLess(idle, 99.0, "a saturated flow must show as CPU load")
            total = sum(v for (obj, _), v in scalars.items() if obj == f"netPerfMeter.{role}.totalCPU")
            self.assertAlmostEqual(total, 100.0, delta=0.1)
            self.assertIn((f"netPerfMeter.{role}.CPU[{os.cpu_count()}]", "Idle"), scalars)

    def test_flow_setup_takes_milliseconds(self):
        # the reference needs about 1 s per stream-oriented flow (its flow manager is not woken)
        stamps = {}
        for line in self.result.stderr.splitlines():
            m = re.match(r"\d\d-\w+-\d{4} (\d\d):(\d\d):(\d\d\.\d+): (.*)", line)
            if not m:
                continue
            t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
            if "Flow #0: connecting" in m.group(4):
                stamps.setdefault("first", t)
            if m.group(4).startswith("Starting measurement"):
                stamps["started"] = t
        self.assertIn("first", stamps, self.result.stderr)
        self.assertLess(stamps["started"] - stamps["first"], 0.5, "setting up three flows took too long")

    def test_scalar_interval_and_exit(self):
        first = self.active[("netPerfMeter.active.total", "First Statistics Event")]
        last = self.active[("netPerfMeter.active.total", "Last Statistics Event")]
        self.assertAlmostEqual((last - first) / 1e6, 3.0, delta=0.3)
        self.assertTrue(self.passive_alive)
        self.assertIn("Stopped measurement", self.result.stderr)


class WarmupRun(unittest.TestCase):
    """--warmup=1 over 3 s: both sides' scalars cover the last 2 s, the vectors all 3. (The TCP
    flow is rate-driven: saturated, its uncompressed per-message vector outgrew the passive's
    2 GiB spool in loopback's fast mode -- 12.9 million rows in 3 s -- and the run failed.)"""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="npm-warmup-")
        with Passive(PORT + 20) as passive:
            run_active(f"127.0.0.1:{PORT + 20}", "-runtime=3", "--warmup=1", "-config=run.config", "-scalar=run.sca",
                       "-vector=run.vec", "-udp", "const100:const500:const50:const500", "-tcp", "const2000:const1400",
                       cwd=cls.dir)
            cls.passive_alive = passive.alive()
        cls.scalars = {role: read_scalars(os.path.join(cls.dir, f"run-{role}.sca")) for role in ("active", "passive")}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_recorded_in_the_config(self):
        self.assertEqual(read_config(os.path.join(self.dir, "run.config"))["WARMUP"], "1.000")
        self.assertTrue(self.passive_alive)

    def test_scalar_interval_starts_after_the_warmup(self):
        for role, scalars in self.scalars.items():
            start = int(read_vector(os.path.join(self.dir, f"run-{role}.vec"), MEASUREMENT_COLUMNS)[0]["AbsTime"])
            first = scalars[(f"netPerfMeter.{role}.total", "First Statistics Event")]
            last = scalars[(f"netPerfMeter.{role}.total", "Last Statistics Event")]
            self.assertAlmostEqual((first - start) / 1e6, 1.0, delta=0.1, msg=role)
            self.assertAlmostEqual((last - first) / 1e6, 2.0, delta=0.3, msg=role)

    def test_rates_count_only_what_follows(self):
        # const100 out and const50 back: 2 s of frames in the scalars, not 3
        sent = self.scalars["active"][("netPerfMeter.active.flow[0]", "Transmitted Frames")]
        self.assertAlmostEqual(sent, 200, delta=6)
        back = self.scalars["passive"][("netPerfMeter.passive.flow[0]", "Transmitted Frames")]
        self.assertAlmostEqual(back, 100, delta=4)
        rate = self.scalars["active"][("netPerfMeter.active.flow[0]", "Transmitted Frame Rate")]
        self.assertAlmostEqual(rate, 100, delta=5)

    def test_vectors_keep_the_warmup(self):
        # The passive's per-flow vector has every message; its scalars those from the end of the warm-up.
        rows = read_vector(os.path.join(self.dir, "run-passive-00000000-0000.vec"), FLOW_COLUMNS)
        self.assertAlmostEqual(len(rows), 300, delta=8)
        first = self.scalars["passive"][("netPerfMeter.passive.total", "First Statistics Event")]
        after = [r for r in rows if int(r["AbsTime"]) >= first]
        received = self.scalars["passive"][("netPerfMeter.passive.flow[0]", "Received Packets")]
        self.assertAlmostEqual(received, len(after), delta=1)
        self.assertEqual(self.scalars["passive"][("netPerfMeter.passive.flow[0]", "Received Bytes")], received * 500)
        self.assertEqual(self.scalars["passive"][("netPerfMeter.passive.flow[0]", "Lost Packets")], 0)
        delays = [float(r["Delay"]) for r in after]
        mean = self.scalars["passive"][("netPerfMeter.passive.flow[0]", "Mean Delay")]
        self.assertAlmostEqual(mean, sum(delays) / len(delays), delta=0.05 * max(mean, 0.1))

    def test_path_scalars_only_after_the_warmup(self):
        # 100 ms sampling: about 20 samples of the TCP flow in the scalars, 30 in the vector
        for role in ("active", "passive"):
            samples = self.scalars[role][(f"netPerfMeter.{role}.flow[1].path[0]", "Samples")]
            self.assertTrue(15 <= samples <= 25, f"{role}: {samples} samples")
            rows = read_paths(os.path.join(self.dir, f"run-paths-{role}-00000001-0000.vec"))[0]
            self.assertGreaterEqual(len(rows), 27, role)
        sent = self.scalars["active"][("netPerfMeter.active.flow[1].path[0]", "Bytes Acked")]
        rows = read_paths(os.path.join(self.dir, "run-paths-active-00000001-0000.vec"))[0]
        total = max(number(r["BytesAcked"]) for r in rows)
        self.assertLess(sent, total, "the path's bytes count from the end of the warm-up")
        self.assertGreater(sent, 0.4 * total)


class SaturatedVectorsRun(unittest.TestCase):
    """Saturated TCP both ways with per-message vectors on both sides: every received message has
    its row (the rows are spooled during the run and written after it, compressed on several
    threads into a multi-stream bzip2 file)."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="npm-satvec-")
        with Passive(PORT + 30) as passive:
            # half a second of saturated TCP is tens of thousands of messages each way
            run_active(f"127.0.0.1:{PORT + 30}", "-runtime=0.5", "-scalar=run.sca", "-vector=run.vec.bz2",
                       "-tcp", "const0:const1400:const0:const1400", cwd=cls.dir)
            cls.passive_alive = passive.alive()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_every_received_message_has_its_row(self):
        self.assertTrue(self.passive_alive)
        for role in ("active", "passive"):
            received = read_scalars(os.path.join(self.dir, f"run-{role}.sca"))[
                (f"netPerfMeter.{role}.flow[0]", "Received Packets")]
            self.assertGreater(received, 10000, role)
            path = os.path.join(self.dir, f"run-{role}-00000000-0000.vec.bz2")
            rows, last, previous_line = 0, None, 0
            with bz2.open(path, "rt") as f:
                self.assertEqual(f.readline().rstrip("\n").split("\t"), FLOW_COLUMNS)
                for line in f:
                    fields = line.rstrip("\n").split("\t")
                    self.assertEqual(len(fields), len(FLOW_COLUMNS) + 1)
                    self.assertEqual(int(fields[0]), previous_line + 1)  # no row lost or repeated
                    previous_line = int(fields[0])
                    rows += 1
                    last = fields
            self.assertEqual(rows, received, role)
            self.assertEqual(int(last[1 + FLOW_COLUMNS.index("AbsPackets")]), rows, role)
            if rows >= 100000:  # compressed in parallel: several streams, read as one file above
                with open(path, "rb") as f:
                    self.assertGreater(f.read().count(b"BZh9"), 2, role)


class GzipResultsRun(unittest.TestCase):
    """-vector=NAME.vec.gz and -scalar=NAME.sca.gz: every result file of both sides is gzip (the
    passive compresses its own, asked in START and IDENTIFY), named like the bzip2 ones, every
    received message has its row, and the tools read them."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="npm-gzip-")
        with Passive(PORT + 35) as passive:
            cls.result = run_active(f"127.0.0.1:{PORT + 35}", "-runtime=0.5", "-config=run.config",
                                    "-scalar=run.sca.gz", "-vector=run.vec.gz", "--json=run.json",
                                    "-tcp", "const0:const1400:const0:const1400", cwd=cls.dir)
            cls.passive_alive = passive.alive()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_every_file_is_gzip_and_complete(self):
        self.assertTrue(self.passive_alive)
        names = sorted(n for n in os.listdir(self.dir) if n.startswith("run-"))
        expected = sorted([f"run-{role}.{kind}.gz" for role in ("active", "passive") for kind in ("sca", "vec")] +
                          [f"run-{role}-00000000-0000.vec.gz" for role in ("active", "passive")] +
                          [f"run-paths-{role}-00000000-0000.vec.gz" for role in ("active", "passive")])
        self.assertEqual(names, expected)
        for name in names:
            with open(os.path.join(self.dir, name), "rb") as f:
                self.assertEqual(f.read(2), b"\x1f\x8b", f"{name} is not gzip")
        config = read_config(os.path.join(self.dir, "run.config"))
        self.assertEqual(config["FLOW0_VECTOR_PASSIVE_NODE"], "run-passive-00000000-0000.vec.gz")
        for role in ("active", "passive"):
            with gzip.open(os.path.join(self.dir, f"run-{role}.sca.gz"), "rt") as f:
                received = float(re.search(rf'scalar "netPerfMeter\.{role}\.flow\[0\]" "Received Packets"\s+(\S+)',
                                           f.read()).group(1))
            self.assertGreater(received, 1000, role)
            with gzip.open(os.path.join(self.dir, f"run-{role}-00000000-0000.vec.gz"), "rt") as f:
                self.assertEqual(f.readline().rstrip("\n").split("\t"), FLOW_COLUMNS)
                rows = sum(1 for _ in f)
            self.assertEqual(rows, received, role)
            read_vector(os.path.join(self.dir, f"run-{role}.vec.gz"), MEASUREMENT_COLUMNS)
        # the JSON document reads the passive's gzip scalar file too
        with open(os.path.join(self.dir, "run.json")) as f:
            document = json.load(f)
        self.assertIsNone(document["error"])
        self.assertIsNotNone(document["totals"]["passive"])

    def test_the_plotter_reads_them(self):
        if shutil.which("Rscript") is None:
            self.skipTest("Rscript is not installed")
        # the build tree's plotter, which loads the R package npmplot built into the build tree
        build = os.environ.get("NPM_BUILD_DIR")
        if not build or not os.path.isdir(os.path.join(build, "rplot", "library", "npmplot")):
            self.skipTest("the R package npmplot is not built (NPM_BUILD_DIR/rplot/library)")
        plotter = os.path.join(build, "rplot", "plot-netperfmeter-results")
        r = subprocess.run([plotter, "run.config", "-o", "run.pdf", "-q"], cwd=self.dir, capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(os.path.getsize(os.path.join(self.dir, "run.pdf")), 10000)


if __name__ == "__main__":
    from harness import main
    main()
