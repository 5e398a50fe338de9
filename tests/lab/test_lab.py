"""netperfmeter-lab through the real thing: namespaces, veth, tbf, the delay line, netperfmeter runs.

usage: test_lab.py LAB_PROGRAM LAB_SOURCE_DIR NETPERFMETER DELAYLINE
"""

import bz2
import csv
import json
import math
import os
import pathlib
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

LAB, LAB_SRC, NETPERFMETER, DELAYLINE = sys.argv[1:5]
del sys.argv[1:5]
sys.path.insert(0, LAB_SRC)
from npmlab import evidence, expr, stats, study, tls, topology  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
import harness  # noqa: E402

TINY = """
name = "tiny"
description = "two paths, a saturated flow"
runtime = {runtime}
repetitions = {repetitions}
[sweep]
proto = ["tcp", "mptcp"]
[[paths]]
rate = "10mbit"
queue = "30kB"
delay_ms = 5
[[paths]]
rate = "5mbit"
queue = "30kB"
delay_ms = 5
[[flows]]
protocol = "{{proto}}"
spec = "const0:const1400:const0:const0"
[[metrics]]
name = "goodput"
value = "goodput(0) / 1e6"
unit = "Mbit/s"
"""

# QUIC flows 0 and 2 (streams of one connection, in one pair), a TCP flow between them in a
# pair of its own; one path.
QUIC_STUDY = """
name = "quic"
runtime = 2
repetitions = 1
[sweep]
rate = ["20mbit"]
[[paths]]
rate = "{rate}"
queue = "60kB"
delay_ms = 5
[[flows]]
protocol = "quic"
spec = "const0:const1200:const0:const0"
[[flows]]
protocol = "tcp"
spec = "const100:const1000:const0:const0"
[[flows]]
protocol = "quic"
spec = "const10:const1000:const10:const1000"
[[metrics]]
name = "quic_goodput"
value = "goodput(0) / 1e6"
unit = "Mbit/s"
[[metrics]]
name = "quic_rate_driven"
value = "goodput(2)"
unit = "bit/s"
"""


# The lab's mechanics (runs, resume, summaries, interruption) are tested beside other tests of
# the gating suite: their load must not make these runs invalid (--max-other-load).
# The limits that depend on the host's load (other work, the processes' own CPU, the delay line's
# lateness) off: these tests run beside others, and what they check is not the load.
OTHER_LOAD = ("--max-other-load=1000", "--max-process-load=1000", "--max-lateness=1e12")


def invalid_runs(out):
    """{run: its evidence's problems} of a study's invalid runs (for a failing assertion's message)."""
    found = {}
    for run in sorted(os.listdir(os.path.join(out, "runs"))):
        try:
            with open(os.path.join(out, "runs", run, "evidence.json")) as f:
                judged = json.load(f)
        except (OSError, ValueError) as e:
            found[run] = [f"no evidence.json: {e}"]
            continue
        if not judged.get("valid"):
            found[run] = judged.get("problems")
    return found


def lab(*args, timeout=300):
    return subprocess.run([LAB, *args], capture_output=True, text=True, timeout=timeout)


def said(r):
    """The lines of a lab's standard error, but the warning of a netperfmeter too old to check the
    study's command lines (before netperfmeter --validate)."""
    return [line for line in r.stderr.strip().splitlines() if "has no --validate" not in line]


def in_ns(ns, script, timeout=60):
    r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"helper in {ns} failed: {r.stderr}")
    return r.stdout


def descendant_names(pid):
    """The command names (comm) of the processes below `pid`."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            parents[int(entry)] = (int(rest[1]), name)
    names, below = [], {pid}
    for _ in range(10):  # depth
        for p, (ppid, name) in parents.items():
            if ppid in below and p not in below:
                below.add(p)
                names.append(name)
    return names


def our_processes(marker):
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


class StudyFiles(unittest.TestCase):
    """A malformed study: one line naming the file, line and key; exit 1; nothing built."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="npmlab-test-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def check(self, text, line, key):
        path = os.path.join(self.dir, "bad.toml")
        with open(path, "w") as f:
            f.write(text)
        before = topology.leftovers()
        r = lab("run", path, "-o", os.path.join(self.dir, "out"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(f"{path}:{line}:", r.stderr)
        if key:
            self.assertIn(key, r.stderr)
        self.assertEqual(topology.leftovers(), before)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out")))

    def test_syntax_error(self):
        self.check(TINY.format(runtime=2, repetitions=1).replace('queue = "30kB"', 'queue = 30kB', 1), 10, None)

    def test_unknown_key(self):
        self.check(TINY.format(runtime=2, repetitions=1).replace("delay_ms = 5", "delay_ms = 5\njitter = 3", 1), 12,
                   "paths[1].jitter")

    def test_bad_rate(self):
        self.check(TINY.format(runtime=2, repetitions=1).replace('"10mbit"', '"10 parsecs"'), 9, "paths[1].rate")

    def test_unknown_variable(self):
        self.check(TINY.format(runtime=2, repetitions=1).replace("{proto}", "{protocol}"), 17, "flows[1].protocol")

    def test_bad_metric(self):
        self.check(TINY.format(runtime=2, repetitions=1).replace("goodput(0) / 1e6", "__import__('os')"), 21,
                   "metrics[1].value")

    def test_warmup_not_shorter_than_the_runtime(self):
        self.check(TINY.format(runtime=2, repetitions=1).replace("runtime = 2", "runtime = 2\nwarmup = 2", 1), 5,
                   "warmup")

    def test_a_topology_is_its_registered_class(self):
        # the study file's topology names a registered class (npmlab/testbed.py): the shipped
        # ones, in their order, and one registered here; the run loop builds the class's bed
        from npmlab import runner, testbed
        self.check(TINY.format(runtime=2, repetitions=1).replace("runtime = 2", 'runtime = 2\ntopology = "chain"', 1),
                   5, 'topology: "chain" is not a topology (disjoint, shared, hosts)')
        self.assertIs(testbed.get("shared"), topology.Shared)
        self.assertIs(testbed.get("disjoint").runner_class(), runner.Runner)
        self.assertTrue(testbed.get("hosts").remote)

        @testbed.register("chain")
        class Chain(topology.Disjoint):
            pass
        path = os.path.join(self.dir, "chain.toml")
        with open(path, "w") as f:
            f.write(TINY.format(runtime=2, repetitions=1).replace("runtime = 2", 'runtime = 2\ntopology = "chain"', 1))
        loaded = study.load(path)
        bed = testbed.get(loaded.topology).for_study(loaded, next(loaded.combinations()), "netperfmeter-delayline", 7)
        self.assertIsInstance(bed, Chain)
        self.assertEqual([p.rate for p in bed.paths], [10e6, 5e6])
        self.assertEqual(bed.program("passive", "netperfmeter")[:3], ["ip", "netns", "exec"])

    def test_capture_within_the_run(self):
        self.check(TINY.format(runtime=2, repetitions=1).replace("runtime = 2", "runtime = 2\ncapture = 30", 1), 5,
                   "capture")
        self.check(TINY.format(runtime=2, repetitions=1).replace("runtime = 2", "runtime = 2\ncapture = \"all\"", 1),
                   5, "capture")

    def test_what_netperfmeter_refuses_for_quic_is_refused_by_the_study(self):
        # One line naming the study file, the line, the flow and the option, before anything is built.
        for option in ("unordered=0.5", "unreliable=0.1", "rtx_timeout=100", "rtx_trials=2", "rcvbuf=100000",
                       "sndbuf=100000", "nodelay=on", "ccid=2", "cc=bbr"):
            with self.subTest(option=option):
                self.check(QUIC_STUDY.replace("const0:const1200:const0:const0", "const0:const1200:const0:const0:"
                                              + option), 13, f"flows[1].spec: {option}:")
        # the QUIC flows of a run share one connection: one congestion control
        self.check(QUIC_STUDY.replace("const10:const1000:const10:const1000", "const10:const1000:cc=cubic"), 19,
                   "flows[3].spec: cc=cubic: the QUIC flows of a run are streams of one connection")
        # neutral values pass, as netperfmeter takes them
        path = os.path.join(self.dir, "neutral.toml")
        with open(path, "w") as f:
            f.write(QUIC_STUDY.replace("const0:const1200:const0:const0", "const0:const1200:unordered=0:nodelay=off"))
        r = lab("run", path, "--dry-run")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_quic_headers_of_truncated_packets(self):
        # an Initial of QUIC v1 (long header, type 0), a Handshake, a 1-RTT packet (short header)
        self.assertEqual(evidence.quic_headers("c3" + "00000001" + "08" + "ab" * 30), (True, 1, evidence.QUIC_INITIAL))
        self.assertEqual(evidence.quic_headers("e1" + "00000001" + "08"), (True, 1, evidence.QUIC_HANDSHAKE))
        self.assertEqual(evidence.quic_headers("41" + "ab" * 20), (False, None, None))
        self.assertEqual(evidence.quic_headers(""), (None, None, None))

    def test_data_tsns_of_truncated_sctp_packets(self):
        # What a capture of SNAPLEN bytes keeps of a full-sized packet: the common header (ports,
        # verification tag, checksum) and the first chunk's header with some of its data.
        common = "f7412328" + "5b5680c0" + "4105e1b4"
        data = "000305b4" + "12688efc" + "0000" + "0000" + "00000025" + "ab" * 40  # DATA, 1460 bytes, TSN
        self.assertEqual(evidence.data_tsns(common + data), [(0x5B5680C0, 0x12688EFC)])
        # a SACK bundled before the DATA chunk (16 bytes), then the DATA chunk
        sack = "03000010" + "12688efb" + "0007a120" + "00000000"
        self.assertEqual(evidence.data_tsns(common + sack + data), [(0x5B5680C0, 0x12688EFC)])
        # control chunks only; a header cut short; nothing
        self.assertEqual(evidence.data_tsns(common + "04000014" + "00" * 16), [])
        self.assertEqual(evidence.data_tsns(common + "000305b4" + "1268"), [])
        self.assertEqual(evidence.data_tsns(""), [])

    def test_bad_paper_values(self):
        base = TINY.format(runtime=2, repetitions=1)
        self.check(base + '[[paper]]\nmetric = "goodput"\nproto = "tcp"\nvalue = "ten"\n', 26, "paper[1].value")
        self.check(base + '[[paper]]\nmetric = "throughput"\nproto = "tcp"\nvalue = 9\n', 24, "paper[1].metric")
        self.check(base + '[[paper]]\nmetric = "goodput"\nprotocol = "tcp"\nvalue = 9\n', 25, "paper[1].protocol")

    def test_dry_run_says_what_would_run(self):
        # The sweep, the number of runs and about how long they take; nothing built, nothing
        # written, no root needed.
        path = os.path.join(self.dir, "tiny.toml")
        with open(path, "w") as f:
            f.write(TINY.format(runtime=10, repetitions=4))
        before = topology.leftovers()
        r = lab("run", path, "--dry-run", "-o", os.path.join(self.dir, "out"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("proto: tcp, mptcp", r.stdout)
        self.assertIn("2 combinations x 4 repetitions = 8 runs of 10 s, about 2m00s", r.stdout)
        self.assertEqual(said(r), [])
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out")))
        self.assertEqual(topology.leftovers(), before)
        r = lab("run", path, "--dry-run", "--ci-target", "5")
        self.assertIn("2 combinations x 2 to 20 repetitions (--ci-target 5 %): 4 to 40 runs", r.stdout)

    def test_a_sweep_variable_that_nothing_uses_is_flagged(self):
        # A variable whose values make no run differ (a typo in a template, a forgotten {x}):
        # its runs would be repetitions under other names.
        path = os.path.join(self.dir, "unused.toml")
        with open(path, "w") as f:
            f.write(TINY.format(runtime=10, repetitions=1).replace('proto = ["tcp", "mptcp"]',
                                                                   'proto = ["tcp", "mptcp"]\nqueue = [10, 20]'))
        r = lab("run", path, "--dry-run")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(said(r),
                         ["netperfmeter-lab: warning: the sweep variable queue is used nowhere in the study "
                          "(no {queue} in its paths, flows, metrics or options): its runs differ in their names only"])
        self.assertEqual(study.load(path).unused, ["queue"])
        for name in ("cmt-dissimilar", "buffer-splitting", "shared-bottleneck"):
            self.assertEqual(study.load(os.path.join(LAB_SRC, "studies", name + ".toml")).unused, [], name)

    def test_an_sctp_message_a_little_over_one_packet_is_flagged(self):
        # 1452 bytes, a full packet for kernel SCTP, is a 1444- and an 8-byte chunk in two packets
        # over the UDP encapsulation: twice the packets, half the queue. Three studies ran so (the
        # studies' README); the lab says it before anything runs.
        path = os.path.join(self.dir, "tail.toml")
        with open(path, "w") as f:
            f.write(TINY.format(runtime=10, repetitions=1)
                    .replace('"{proto}"', '"sctp"')
                    .replace('proto = ["tcp", "mptcp"]', 'proto = ["a"]')
                    .replace("const0:const1400:const0:const0", "const0:const1452:const0:const3000:cmt=cmt"))
        r = lab("run", path, "--dry-run")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(said(r),
                         ["netperfmeter-lab: warning: flow 0's 1452-byte outbound messages take 2 SCTP packets each on "
                          "the test bed (1500-byte MTU, UDP encapsulation: 1444 bytes of data per packet), the last "
                          "with 8 bytes; 1444-byte messages fill one packet",
                          "netperfmeter-lab: warning: flow 0's 3000-byte inbound messages take 3 SCTP packets each on "
                          "the test bed (1500-byte MTU, UDP encapsulation: 1444 bytes of data per packet), the last "
                          "with 112 bytes; 1444-byte messages fill one packet"])
        # a full packet, several full packets, a last packet of more than a quarter: no warning
        for size in (1444, 2888, 1900):
            with open(path, "w") as f:
                f.write(TINY.format(runtime=10, repetitions=1).replace('"{proto}"', '"sctp"').replace(
                    "const0:const1400:", f"const0:const{size}:"))
            self.assertEqual(study.load(path).short_tails, [], size)
        for name in os.listdir(os.path.join(LAB_SRC, "studies")):
            if name.endswith(".toml"):
                self.assertEqual(study.load(os.path.join(LAB_SRC, "studies", name)).short_tails, [], name)

    def test_shipped_studies_load(self):
        r = lab("list")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cmt-dissimilar", r.stdout)
        self.assertNotIn("unreadable", r.stdout)

    @unittest.skipUnless(shutil.which("groff"), "groff is not installed")
    def test_man_pages_render_and_document_every_option(self):
        for page in ("netperfmeter-lab.1", "netperfmeter-delayline.1"):
            path = os.path.join(LAB_SRC, "man", page)
            r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path], capture_output=True, text=True,
                               env=dict(os.environ, LC_ALL="C.UTF-8"))
            self.assertEqual(r.stderr, "", page)
        text = subprocess.run(["groff", "-man", "-Tascii", os.path.join(LAB_SRC, "man", "netperfmeter-lab.1")],
                              capture_output=True, text=True).stdout
        text = re.sub(r".\x08", "", text)
        options = set(re.findall(r"--[a-z][a-z-]+", lab("run", "--help").stdout))
        self.assertIn("--ci-target", options)
        for option in options:
            self.assertIn(option, text, f"{option} is in --help but not in netperfmeter-lab.1")

    def test_installed_layout(self):
        # cmake --install puts the program, the module, the studies, the delay line and the man
        # pages in place, and the installed program names the installed files.
        build = os.path.dirname(os.path.dirname(os.path.dirname(LAB)))
        cache = pathlib.Path(build, "CMakeCache.txt").read_text()
        prefix = re.search(r"^CMAKE_INSTALL_PREFIX:PATH=(.*)$", cache, re.M).group(1)
        with tempfile.TemporaryDirectory() as root:
            subprocess.run(["cmake", "--install", build], env=dict(os.environ, DESTDIR=root), check=True,
                           capture_output=True)
            share = root + prefix + "/share/netperfmeter/lab"
            for path in (root + prefix + "/bin/netperfmeter-lab", root + prefix + "/bin/netperfmeter-delayline",
                         share + "/npmlab/runner.py", share + "/studies/cmt-dissimilar.toml",
                         share + "/studies/README.md", share + "/README.md",
                         share + "/studies/figures/shared-bottleneck-share.pdf",
                         root + prefix + "/share/man/man1/netperfmeter-lab.1",
                         root + prefix + "/share/man/man1/netperfmeter-delayline.1"):
                self.assertTrue(os.path.exists(path), path)
            program = pathlib.Path(root + prefix + "/bin/netperfmeter-lab").read_text()
            self.assertIn(f'sys.path.insert(0, "{prefix}/share/netperfmeter/lab")', program)
            self.assertIn(f'"netperfmeter": "{prefix}/bin/netperfmeter"', program)
            # the installed module and studies work (run from the staging root)
            r = subprocess.run([sys.executable, "-c", program.replace(prefix + "/share", root + prefix + "/share"),
                                "list"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            studies = [n for _, _, names in os.walk(share + "/studies") for n in names if n.endswith(".toml")]
            self.assertIn("ablations/buffer-splitting-rtomin", r.stdout, "nested studies are installed and listed")
            self.assertEqual(len(r.stdout.splitlines()), len(studies), r.stdout)

    def test_confidence_interval_matches_t_test(self):
        # R: t.test(c(1, 2, 3, 4))$conf.int = 0.4457397 4.5542603; qt(0.975, 9) = 2.262157
        n, mean, low, high = stats.mean_ci([1, 2, 3, 4])
        self.assertEqual((n, mean), (4, 2.5))
        self.assertAlmostEqual(low, 0.4457397, places=6)
        self.assertAlmostEqual(high, 4.5542603, places=6)
        self.assertAlmostEqual(stats.t_quantile(0.975, 9), 2.262157, places=5)

    def test_path_scalars_are_named_by_their_path(self):
        with tempfile.NamedTemporaryFile("w", suffix=".sca", delete=False) as f:
            f.write('scalar "netPerfMeter.active.flow[0]" "Transmitted Bit Rate" 1000.0\n'
                    'scalar "netPerfMeter.active.flow[0].path[2]" "Bytes Sent" 12345\n'
                    'scalar "netPerfMeter.active.flow[0].connection" "Mean Rwnd" 65536\n'
                    'scalar "netPerfMeter.passive.flow[0]" "Received Bit Rate" 900.0\n')
        try:
            scalars = stats.read_scalars(f.name, "active")
        finally:
            os.unlink(f.name)
        self.assertEqual(scalars, {("active", 0, "Transmitted Bit Rate"): 1000.0,
                                   ("active", 0, "path[2] Bytes Sent"): 12345.0,
                                   ("active", 0, "connection Mean Rwnd"): 65536.0})
        tree = expr.compile_formula('scalar("active", 0, "path[2] Bytes Sent") / 1000')
        self.assertEqual(expr.evaluate(tree, scalars), 12.345)

    def test_connections_of_an_earlier_run_are_found_by_port(self):
        # ss -tanH as it reads after an MPTCP run over the ADSL-like path (its subflows still established)
        ss = ("LISTEN     0      10           0.0.0.0:22           0.0.0.0:*\n"
              "ESTAB      0      98304     10.250.2.2:8999     10.250.2.1:40446\n"
              "FIN-WAIT-1 0      1         10.250.1.2:9001     10.250.1.1:51000\n"
              "TIME-WAIT  0      0         10.250.1.2:9000     10.250.1.1:51002\n"
              "ESTAB      0      0         10.250.1.2:19000    10.250.1.1:51004\n"
              "ESTAB      0      0         [fd00::2]:9010      [fd00::1]:51006\n")
        self.assertEqual(evidence.lingering(ss, [8999, 9000, 9001, 9009, 9010, 9011]),
                         ["ESTAB 10.250.2.2:8999 10.250.2.1:40446", "FIN-WAIT-1 10.250.1.2:9001 10.250.1.1:51000",
                          "ESTAB [fd00::2]:9010 [fd00::1]:51006"])
        self.assertEqual(evidence.lingering(ss, [7000]), [])
        self.assertEqual(evidence.lingering("", [8999]), [])

    def test_counters_in_formulas(self):
        counters = {"paths": {"2": {"forward": {"drops": 17}}}, "nstat": {"passive": {"UdpSndbufErrors": 3}}}
        self.assertEqual(expr.evaluate(expr.compile_formula('queue(2, "forward", "drops") + 1'), {}, counters), 18)
        self.assertEqual(expr.evaluate(expr.compile_formula('counter("passive", "UdpSndbufErrors")'), {}, counters), 3)
        self.assertEqual(expr.evaluate(expr.compile_formula('counter("active", "UdpSndbufErrors")'), {}, counters), 0)
        with self.assertRaisesRegex(KeyError, "path 1"):
            expr.evaluate(expr.compile_formula('queue(1, "forward", "drops")'), {}, counters)

    def test_steins_procedure_and_the_two_modes(self):
        from npmlab import runner
        # pilot 1, 3 (mean 2, sd 1.414), t(0.975, 1) = 12.706: a half-width of 1 needs
        # ceil((12.706 * 1.414 / 1)^2) = 323 runs, of 20 it needs the pilot's 2
        self.assertEqual(runner.stein([1, 3], 1.0, 0.95), 323)
        self.assertEqual(runner.stein([1, 3], 20.0, 0.95), 2)
        low, high = runner.two_modes([2.1, 2.2, 7.9, 8.1, 2.0, 8.3])
        self.assertEqual((sorted(low), sorted(high)), ([2.0, 2.1, 2.2], [7.9, 8.1, 8.3]))
        self.assertEqual(runner.median([3, 1, 2, 10]), 2.5)

    def test_a_run_that_measured_something_else_is_invalid(self):
        from npmlab import evidence

        class Topo:
            paths = [None, None]

        class Capture:
            path = "capture.pcapng"

            def available(self):
                return True

        seen = {"init_offers_nr_sack": False, "init_ack_offers_nr_sack": True, "nr_sacks_from_passive": 0,
                "sacks_from_passive": 400, "sacks_from_active": 0, "nr_sacks_from_active": 0,
                "dac_sacks_from_passive": 0, "dac_sacks_from_active": 0, "max_a_rwnd_passive": 131072,
                "data_packets_per_interface": {"0": 900}, "data_bytes_per_interface": {"0": 1300000}}
        real = evidence.summarise_sctp
        evidence.summarise_sctp = lambda path, port: dict(seen)
        try:
            flows = [study.Flow("sctp", "const0:const1444:const0:const0:cmt=cmt:nrsack=on:rcvbuf=100000", "")]
            judged = evidence.judge(flows, Topo(), Capture(), {}, {}, [100.0], [9899], [9000])
        finally:
            evidence.summarise_sctp = real
        self.assertFalse(judged["valid"])
        problems = " | ".join(judged["problems"])
        # what the review found: NR-SACK asked for and not negotiated, the receive buffer ignored;
        # a CMT flow on one path only is what the stack did: a metric (test_evidence.py)
        self.assertIn("NR-SACK negotiated (offered in INIT and INIT-ACK): expected True, seen False", problems)
        self.assertIn("passive a_rwnd (rcvbuf): expected 50000 to 100000, seen 131072", problems)
        self.assertEqual(judged["flows"][0]["path_share"], {"1": 1.0, "2": 0.0})
        # pairs that started far apart
        judged = evidence.judge([], Topo(), Capture(), {}, {}, [100.0, 101.5], [], [])
        self.assertIn("started 1.500 s apart", " ".join(judged["problems"]))

    def test_other_work_on_the_host_makes_a_run_invalid(self):
        from npmlab import evidence

        # Each burns half a second of CPU, however busy the machine is (not of wall time).
        burn = [sys.executable, "-c", "import time\nwhile time.process_time() < 0.5: pass"]
        load = evidence.HostLoad()
        subprocess.run(burn, check=True)  # the run's own process: reaped within the run
        own = load.finish()
        self.assertGreaterEqual(own["own_cores"] * own["seconds"], 0.45, own)

        load = evidence.HostLoad()
        other = subprocess.Popen(burn)  # other work: still running (not reaped) when the run ends
        while time.monotonic() - load.start[0] < 5 and evidence._cpu_seconds_of(other.pid) < 0.45:
            time.sleep(0.01)
        foreign = load.finish()
        other.wait()
        self.assertGreaterEqual(foreign["foreign_cores"] * foreign["seconds"], 0.4, foreign)

        class Topo:
            paths = [None]

        judged = evidence.judge([], Topo(), None, {}, {}, [], [], [],
                                {"seconds": 30.0, "busy_cores": 0.9, "own_cores": 0.05, "foreign_cores": 0.85})
        self.assertFalse(judged["valid"])
        self.assertIn("the host was busy with other work: 0.85 of a core", " ".join(judged["problems"]))
        # the host's load alone (strict=False: a run without a capture and process loads, which
        # a strict verdict finds unverified)
        judged = evidence.judge([], Topo(), None, {}, {}, [], [], [],
                                {"seconds": 30.0, "busy_cores": 0.1, "own_cores": 0.05, "foreign_cores": 0.05},
                                strict=False)
        self.assertTrue(judged["valid"], judged["problems"])


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class PathAccuracy(unittest.TestCase):
    """The topology's paths give the configured delay, loss and rate."""

    def build(self, **kw):
        fields = dict(name="p", rate=None, reverse_rate=None, queue=100 * 1514, reverse_queue=100 * 1514, delay_ms=0,
                      reverse_delay_ms=0, loss=0, reverse_loss=0)
        fields.update(kw)
        topo = topology.Disjoint([study.Path(**fields)], delayline=DELAYLINE, tag="t")
        topo.up()
        self.addCleanup(topo.down)
        return topo

    def test_one_way_delays(self):
        topo = self.build(delay_ms=20, reverse_delay_ms=7.5)
        # connect() to a closed port: SYN out, RST back = one round trip, no ARP (static neighbours)
        out = in_ns(topo.A, """
import socket, time
rtts = []
for _ in range(25):
    s = socket.socket()
    t = time.monotonic()
    try:
        s.connect(("10.250.1.2", 9))
    except ConnectionRefusedError:
        rtts.append((time.monotonic() - t) * 1000)
    s.close()
print(sorted(rtts)[len(rtts) // 2], len(rtts))
""")
        median, count = out.split()
        self.assertEqual(int(count), 25)
        print(f"RTT over 20 ms + 7.5 ms delay: median {float(median):.3f} ms")
        self.assertAlmostEqual(float(median), 27.5, delta=1.0)

    def test_random_loss_rate(self):
        p, n = 0.03, 20000
        topo = self.build(delay_ms=1, loss=p * 100)
        receiver = subprocess.Popen(["ip", "netns", "exec", topo.P, sys.executable, "-c", """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind(("10.250.1.2", 5000))
print("ready", flush=True)
s.settimeout(2.0)
seen = set()
try:
    while True:
        seen.add(int(s.recv(2048)[:8]))
except socket.timeout:
    pass
print(len(seen))
"""], stdout=subprocess.PIPE, text=True)
        self.assertEqual(receiver.stdout.readline().strip(), "ready")
        in_ns(topo.A, f"""
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range({n}):
    s.sendto(b"%08d" % i + bytes(92), ("10.250.1.2", 5000))
    if i % 200 == 199:
        time.sleep(0.004)
""")
        received = int(receiver.communicate(timeout=30)[0].strip())
        lost = n - received
        half = 2.5758 * math.sqrt(n * p * (1 - p))
        print(f"{n} datagrams, loss {p:.0%}: {lost} lost (99 % interval {n * p - half:.0f} to {n * p + half:.0f})")
        self.assertLessEqual(abs(lost - n * p), half)

    def test_saturated_tcp_measures_the_configured_rate(self):
        rate = 8e6
        topo = self.build(rate=rate)
        work = tempfile.mkdtemp(prefix="npmlab-rate-")
        self.addCleanup(shutil.rmtree, work, True)
        harness.NETPERFMETER = NETPERFMETER
        with harness.Passive(9000, netns=topo.P):  # ready when it says so
            r = subprocess.run(["ip", "netns", "exec", topo.A, NETPERFMETER, "10.250.1.2:9000", "-control-over-tcp",
                                "-runtime=8", "-scalar=run.sca", "-nodisplay",
                                "-tcp", "const0:const1400:const0:const0"],
                               cwd=work, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        goodput = stats.read_scalars(os.path.join(work, "run-passive.sca"), "passive")[
            ("passive", 0, "Received Bit Rate")]
        # Every segment is full (saturated, one packet per frame): MSS = MTU - IPv4 - TCP - timestamps,
        # and tbf counts the Ethernet frame.
        timestamps = int(subprocess.run(["ip", "netns", "exec", topo.A, "sysctl", "-n", "net.ipv4.tcp_timestamps"],
                                        capture_output=True, text=True).stdout.strip() or 1)
        mss = 1500 - 20 - 20 - (12 if timestamps else 0)
        expected = rate * mss / (mss + 20 + 20 + (12 if timestamps else 0) + 14)
        print(f"tbf {rate / 1e6:g} Mbit/s: goodput {goodput / 1e6:.3f} Mbit/s, expected {expected / 1e6:.3f} Mbit/s "
              f"(MSS {mss})")
        self.assertAlmostEqual(goodput / expected, 1.0, delta=0.03)


def assert_same_figures(test, document, scalar_files):
    """The lab reads a run's JSON document: it must give exactly the scalar files' figures."""
    doc = stats.load_document(document)
    from_document = stats.document_scalars(doc, document)
    from_files = {}
    for side, path in scalar_files.items():
        from_files.update(stats.read_scalars(path, side))
    test.assertEqual(set(from_document), set(from_files))
    differ = [(k, from_document[k], from_files[k]) for k in from_files
              if not (from_document[k] == from_files[k]
                      or (math.isnan(from_document[k]) and math.isnan(from_files[k])))]
    test.assertEqual(differ, [])
    for side, path in scalar_files.items():
        test.assertEqual(stats.document_cpu_idle(doc, side), stats.read_cpu_idle(path, side))
    return from_document


class Documents(unittest.TestCase):
    """The per-run JSON document against the scalar files of the same real run (loopback)."""

    def test_every_figure_of_tcp_udp_and_cmt_sctp(self):
        work = tempfile.mkdtemp(prefix="npmlab-document-")
        self.addCleanup(shutil.rmtree, work, True)
        # the integration tests' ports (a block of this process's own) and passive (ready when it says so)
        harness.NETPERFMETER = NETPERFMETER
        port, _ = harness.free_base_port()
        with harness.Passive(port) as passive:
            r = subprocess.run([NETPERFMETER, f"127.0.0.1:{port}", "-control-over-tcp",
                                f"--sctp-remote-udp-port={passive.udp}",
                                "-runtime=1.5", "-scalar=run.sca.bz2", "--json=run.json", "-nodisplay",
                                "-tcp", "const0:const1400:const0:const1400",
                                "-udp", "const50:const500",
                                "-sctp", "const0:const1400:cmt=cmtrpv2:smartfr=on:pktdrop=on"],
                               cwd=work, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        figures = assert_same_figures(self, os.path.join(work, "run.json"),
                                      {side: os.path.join(work, f"run-{side}.sca.bz2")
                                       for side in ("active", "passive")})
        names = {name for (_, _, name) in figures}
        # the per-path and per-association figures are among them, the SCTP mechanisms' counters too
        for name in ("path[0] Bytes Sent", "connection Samples", "Received Bit Rate", "Mean Delay"):
            self.assertIn(name, names)
        if "bundled" in subprocess.run([NETPERFMETER, "--version"], capture_output=True, text=True).stdout:
            self.assertTrue(any(n.endswith("Drop-Reported Chunks") for n in names), sorted(names))
        print(f"{len(figures)} figures of 3 flows: the JSON document and the scalar files agree")


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
@unittest.skipUnless(shutil.which("openssl"), "openssl is not installed (the lab makes the QUIC certificates with it)")
@unittest.skipUnless(tls.quic_built(NETPERFMETER), f"{NETPERFMETER} was built without QUIC")
class Quic(unittest.TestCase):
    """A study with QUIC flows: run for real on a namespace test bed."""

    def test_quic_flows_run_as_streams_of_one_connection(self):
        work = tempfile.mkdtemp(prefix="npmlab-quic-")
        self.addCleanup(shutil.rmtree, work, True)
        path, out = os.path.join(work, "quic.toml"), os.path.join(work, "out")
        with open(path, "w") as f:
            f.write(QUIC_STUDY)
        r = lab("run", path, *OTHER_LOAD, "-o", out, "--no-plot")
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        run = os.path.join(out, "runs", "rate=20mbit-r1")
        # QUIC flows 0 and 2 in pair 0 (one -quic option), TCP flow 1 in pair 1
        self.assertEqual(sorted(e for e in os.listdir(run) if re.fullmatch(r"f\d+", e)), ["f0", "f1"])
        quic = stats.load_document(os.path.join(run, "f0", "run.json"))
        self.assertEqual([(f["flow_id"], f["protocol"], f["stream_id"]) for f in quic["flows"]],
                         [(0, "QUIC", 0), (2, "QUIC", 1)])
        self.assertEqual([(f["flow_id"], f["protocol"])
                          for f in stats.load_document(os.path.join(run, "f1", "run.json"))["flows"]],
                         [(1, "TCP")])
        with open(os.path.join(run, "f0", "run.config")) as f:
            self.assertIn('FLOW0_PROTOCOL="QUIC"', f.read())
        env = pathlib.Path(run, "environment.txt").read_text()
        files = {name: os.path.join(os.path.abspath(out), "tls", name)
                 for name in ("ca.pem", "server.key", "server.pem")}
        self.assertIn(f"--tls-key={files['server.key']} --tls-cert={files['server.pem']}", env)
        self.assertRegex(env, rf"flows 0,2 active: .* --tls-ca={re.escape(files['ca.pem'])} "
                              r"--tls-hostname=passive\.npmlab\.invalid .*-quic const0:const1200:const0:const0:id=0 "
                              r"const10:const1000:const10:const1000:id=2\n")
        # the throw-away CA: its certificate and the passive's key and certificate, the CA's key gone
        self.assertEqual(sorted(os.listdir(os.path.join(out, "tls"))), ["ca.pem", "server.key", "server.pem"])
        self.assertEqual(os.stat(files["server.key"]).st_mode & 0o077, 0)
        # the figures: a saturated QUIC flow on a 20 Mbit/s path beside 0.8 Mbit/s of TCP, and a
        # rate-driven one of 10 frames/s of 1000 bytes each way (80 kbit/s of payload)
        with open(os.path.join(out, "summary.csv")) as f:
            rows = {row[1]: row for row in (line.split(",") for line in f.read().splitlines()[1:])}
        goodput, rate_driven = float(rows["quic_goodput"][3]), float(rows["quic_rate_driven"][3])
        print(f"QUIC over 20 Mbit/s: {goodput:.2f} Mbit/s; the rate-driven stream: {rate_driven / 1e3:.1f} kbit/s")
        self.assertGreater(goodput, 2.0)
        self.assertLess(goodput, 20.0)
        self.assertGreater(rate_driven, 40e3)
        self.assertLess(rate_driven, 100e3)
        for recorded in ("cpu_active", "cpu_passive", "udp_sndbuf_errors_active", "drops_path1_forward"):
            self.assertIn(recorded, rows)
        # the connection's own statistics as the flows' path samples, both sides
        scalars = stats.document_scalars(quic)
        for side in ("active", "passive"):
            self.assertGreater(scalars[(side, 0, "path[0] Samples")], 5, side)
        # the evidence: the connection on the wire (tshark), ngtcp2's congestion control
        with open(os.path.join(run, "evidence.json")) as f:
            judged = json.load(f)
        self.assertTrue(judged["valid"], judged)
        by_flow = {e["flow"]: e for e in judged["flows"]}
        self.assertEqual({n: (e["protocol"], e["pair"]) for n, e in by_flow.items()},
                         {0: ("quic", 0), 1: ("tcp", 1), 2: ("quic", 0)})
        checks = {c["check"]: c for c in by_flow[0]["checks"]}
        cc = checks["congestion control (netperfmeter's document, as configured; not readable from ngtcp2)"]
        self.assertEqual((cc["expected"], cc["observed"], cc["ok"]), ("reno", "reno", True), checks)
        if shutil.which("tshark"):
            self.assertEqual(checks["QUIC connection on the wire"]["ok"], True, checks)
            self.assertGreater(by_flow[0]["seen"]["data_packets_per_interface"]["0"], 100)


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class Runs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="npmlab-test-")
        self.study = os.path.join(self.dir, "tiny.toml")
        with open(self.study, "w") as f:
            f.write(TINY.format(runtime=1.5, repetitions=2).replace("runtime = 1.5", "runtime = 1.5\nwarmup = 0.25"))
            # a value to compare with (as a paper's): drawn beside the curve, for its point only
            f.write('[[paper]]\nmetric = "goodput"\nproto = "tcp"\nvalue = 9.5\nsource = "a test"\n')
        self.out = os.path.join(self.dir, "out")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def assertNothingLeft(self, pid):
        self.assertEqual(topology.leftovers(pid), [], "namespaces left behind")
        self.assertEqual(our_processes(f"npmlab{pid}-"), [], "processes left behind")
        self.assertEqual([e for e in os.listdir(os.path.join(self.out, "runs")) if e.startswith(".partial")], [])

    def test_run_summary_resume_and_plot(self):
        r = lab("run", self.study, *OTHER_LOAD, "-o", self.out)
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        with open(os.path.join(self.out, "summary.csv")) as f:
            rows = [line.split(",") for line in f.read().splitlines()]
        self.assertEqual(rows[0], ["proto", "metric", "n", "mean", "ci_low", "ci_high", "procedure", "n_invalid",
                                   "median", "low_mode_mean", "high_mode_mean", "high_mode_fraction",
                                   "failed_attempts"])
        by_proto = {row[0]: row for row in rows[1:] if row[1] == "goodput"}
        self.assertEqual(set(by_proto), {"tcp", "mptcp"})
        for proto, row in by_proto.items():
            # two runs make no interval (stats.MIN_RUNS): none is drawn, the procedure says why
            self.assertEqual((int(row[2]), row[4], row[5]), (2, "NA", "NA"), invalid_runs(self.out))
            self.assertEqual(row[6], f"too few runs (n = 2 < {stats.MIN_RUNS})")
        tcp, mptcp = float(by_proto["tcp"][3]), float(by_proto["mptcp"][3])
        print(f"TCP on the 10 Mbit/s path: {tcp:.2f} Mbit/s; MPTCP over 10 + 5 Mbit/s: {mptcp:.2f} Mbit/s")
        self.assertLess(tcp, 10.0)
        self.assertGreater(mptcp, 11.0, "MPTCP uses the second path (the passive announces it)")
        self.assertTrue(os.path.getsize(os.path.join(self.out, "goodput.pdf")) > 1000)
        # the figure draws summary.csv's intervals: here none, for the reason summary.csv gives
        with open(os.path.join(self.out, "tables", "lab-goodput-plotted.csv")) as f:
            plotted = {row["proto"]: row for row in csv.DictReader(f)}
        self.assertEqual({p: (row["N"], row["Lower"], row["Upper"], row["Interval"]) for p, row in plotted.items()},
                         {p: (row[2], "NA", "NA", row[6]) for p, row in by_proto.items()})
        self.assertTrue(os.path.exists(os.path.join(self.out, "tables", "passive.flow-ReceivedBitRate.data.bz2")))
        with open(os.path.join(self.out, "tables", "lab-goodput-paper.data")) as f:
            self.assertEqual(f.read(), "proto goodput bound\ntcp 9.5 value\n")
        # what every run records beside the study's metric, and what it had
        recorded = {row[1] for row in rows[1:]}
        for metric in ("drops_path1_forward", "drops_path2_reverse", "udp_sndbuf_errors_active", "cpu_passive"):
            self.assertIn(metric, recorded)
        with open(os.path.join(self.out, "runs.csv")) as f:
            runs = [line.split(",") for line in f.read().splitlines()]
        self.assertEqual(runs[0][-3:], ["failed_attempts", "validity", "problems"])
        self.assertEqual({row[-2] for row in runs[1:]}, {"valid"})
        self.assertEqual({row[-3] for row in runs[1:]}, {"0"}, "no attempt failed")
        # the lab reads each run's JSON document, which holds the scalar files' figures
        for entry in ("proto=tcp-r1", "proto=mptcp-r1"):
            pair = os.path.join(self.out, "runs", entry, "f0")
            assert_same_figures(self, os.path.join(pair, "run.json"),
                                {side: os.path.join(pair, f"run-{side}.sca.bz2") for side in ("active", "passive")})
        with open(os.path.join(self.out, "runs", "proto=mptcp-r1", "evidence.json")) as f:
            judged = json.load(f)
        self.assertTrue(judged["valid"], judged)
        self.assertEqual(judged["flows"][0]["seen"]["syns_per_interface"].keys(), {"0", "1"},
                         "the capture shows a subflow per path")
        with open(os.path.join(self.out, "runs", "proto=mptcp-r1", "counters.json")) as f:
            counters = json.load(f)
        self.assertGreater(counters["paths"]["2"]["forward"]["packets"], 100, "MPTCP used the second path's queue")
        with open(os.path.join(self.out, "lab.json")) as f:
            self.assertIsInstance(json.load(f)["seed"], int)
        env = pathlib.Path(self.out, "runs", "proto=tcp-r1", "environment.txt").read_text()
        for needle in ("kernel:", "flow 0 active: ip netns exec", "tbf", "net.ipv4.tcp_congestion_control",
                       "netperfmeter:", "--warmup=0.25"):
            self.assertIn(needle, env)
        with open(os.path.join(self.out, "runs", "proto=tcp-r1", "f0", "run.config")) as f:
            self.assertIn("WARMUP=0.250\n", f.read())
        # netperfmeter's -seed: one per repetition and flow, common to every combination
        seeds = {}
        for entry in (e for e in os.listdir(os.path.join(self.out, "runs")) if not e.startswith(".")):
            with open(os.path.join(self.out, "runs", entry, "f0", "run.config")) as f:
                seeds[entry] = re.search(r"^SEED=(\d+)$", f.read(), re.M).group(1)
        self.assertEqual(seeds["proto=tcp-r1"], seeds["proto=mptcp-r1"], seeds)
        self.assertEqual(seeds["proto=tcp-r2"], seeds["proto=mptcp-r2"], seeds)
        self.assertNotEqual(seeds["proto=tcp-r1"], seeds["proto=tcp-r2"], seeds)
        mtimes = {e: os.stat(os.path.join(self.out, "runs", e)).st_mtime_ns
                  for e in os.listdir(os.path.join(self.out, "runs"))}
        # a second run without --resume refuses to mix; with --resume it re-runs nothing
        r = lab("run", self.study, *OTHER_LOAD, "-o", self.out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--resume", r.stderr)
        r = lab("run", self.study, *OTHER_LOAD, "-o", self.out, "--resume")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("complete, kept"), 4, r.stderr)
        self.assertEqual(mtimes, {e: os.stat(os.path.join(self.out, "runs", e)).st_mtime_ns
                                  for e in os.listdir(os.path.join(self.out, "runs"))})
        # plot redraws from the results alone
        os.unlink(os.path.join(self.out, "goodput.pdf"))
        r = lab("plot", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.out, "goodput.pdf")))
        # the plotter's table in the study's sweep order (tcp before mptcp), which it keeps for categories
        with bz2.open(os.path.join(self.out, "tables", "lab-goodput.data.bz2"), "rt") as f:
            table = [line.split()[:2] for line in f.read().splitlines()]
        self.assertEqual(table, [["proto", "Repetition"], ["tcp", "1"], ["tcp", "2"], ["mptcp", "1"], ["mptcp", "2"]])

    def test_ci_target_is_steins_two_stage_procedure(self):
        with open(self.study, "w") as f:
            # A rate-driven flow: its goodput varies little from run to run, but never by nothing.
            f.write(TINY.format(runtime=1, repetitions=2)
                    .replace("repetitions = 2", "min_repetitions = 2\nmax_repetitions = 3")
                    .replace('proto = ["tcp", "mptcp"]', 'proto = ["udp"]')
                    .replace("const0:const1400:const0:const0", "const200:const1000:const0:const0"))

        def summary(out):
            with open(os.path.join(out, "summary.csv")) as f:
                rows = [line.split(",") for line in f.read().splitlines()[1:]]
            rows = [row for row in rows if row[1] == "goodput"]
            self.assertEqual([row[0] for row in rows], ["udp"])
            return int(rows[0][2]), rows[0][6]

        # A loose target: the pilot of two runs (min_repetitions) already gives it.
        loose = os.path.join(self.dir, "loose")
        r = lab("run", self.study, *OTHER_LOAD, "-o", loose, "--ci-target=50")
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        self.assertEqual(summary(loose), (2, "stein(n0=2)"))
        self.assertNotIn("needs more than max_repetitions", r.stdout)
        # A target no measurement meets: the pilot asks for more than max_repetitions; the
        # maximum is run and the combination named.
        tight = os.path.join(self.dir, "tight")
        r = lab("run", self.study, *OTHER_LOAD, "-o", tight, "--ci-target=0.000001")
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        self.assertEqual(summary(tight), (3, "stein(n0=2)"))
        self.assertIn("the wanted half-width needs more than max_repetitions runs: proto=udp", r.stdout)
        self.assertEqual(sorted(e for e in os.listdir(os.path.join(tight, "runs")) if not e.startswith(".")),
                         ["proto=udp-r1", "proto=udp-r2", "proto=udp-r3"])

    def test_the_run_order_is_blocked_and_drawn_from_the_seed(self):
        r = lab("run", self.study, *OTHER_LOAD, "-o", self.out, "--seed=7", "--no-plot")
        self.assertEqual(r.returncode, 0, r.stderr)
        order = re.findall(r"\] ETA \S+ (proto=\w+ r\d)", r.stderr)
        self.assertEqual(len(order), 4, r.stderr)
        # every repetition is a block holding each combination once
        self.assertEqual(sorted(order[:2]), ["proto=mptcp r1", "proto=tcp r1"])
        self.assertEqual(sorted(order[2:]), ["proto=mptcp r2", "proto=tcp r2"])
        self.assertIn("run order from seed 7", r.stderr)
        sys.path.insert(0, LAB_SRC)
        from npmlab import runner  # the same seed, the same order
        loaded = study.load(self.study)
        again = runner.Runner(loaded, self.out, runner.Tools({}), seed=7).blocks(1, 2)
        self.assertEqual(order, [f"{runner.label(v)} r{rep}" for v, rep in again])

    def start_until_the_second_run(self, *args):
        """The lab running the study, once it has begun its second run; (process, its stderr so far)."""
        proc = subprocess.Popen([LAB, "run", self.study, *OTHER_LOAD, "-o", self.out, "--no-plot", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        while True:
            line = proc.stderr.readline()
            self.assertTrue(line, "the lab ended early: " + "".join(lines))
            lines.append(line)
            if line.startswith("[2/"):
                return proc, "".join(lines)

    def test_sigint_keeps_finished_runs_and_removes_everything_else(self):
        proc, _ = self.start_until_the_second_run()
        # inside the second run: once its netperfmeter processes run in the namespaces
        deadline = time.monotonic() + 30
        while "netperfmeter" not in descendant_names(proc.pid):
            self.assertLess(time.monotonic(), deadline, "the second run started no netperfmeter")
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 130, err)
        self.assertIn("1 complete run(s) kept", err)
        self.assertNothingLeft(proc.pid)
        kept = os.listdir(os.path.join(self.out, "runs"))
        self.assertEqual(len(kept), 1, kept)
        self.assertRegex(kept[0], r"^proto=(tcp|mptcp)-r1$")
        # --resume runs the three missing ones only
        r = lab("run", self.study, *OTHER_LOAD, "-o", self.out, "--resume", "--no-plot")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("complete, kept"), 1, r.stderr)
        self.assertEqual(r.stderr.count(": done in"), 3, r.stderr)

    def test_failing_run_reports_and_cleans_up(self):
        with open(self.study, "w") as f:
            f.write(TINY.format(runtime=1.5, repetitions=1).replace("const0:const1400:const0:const0",
                                                                    "const0:const1400:const0:const0:bogus=1"))
        proc = subprocess.Popen([LAB, "run", self.study, *OTHER_LOAD, "-o", self.out, "--retries=0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 1, err)
        # netperfmeter's own parser (--validate) refuses the FLOWSPEC before any test bed is built;
        # a run that fails while it runs is test_failed_attempts_are_kept_counted_and_captioned's.
        self.assertRegex(err.strip().splitlines()[-1], r"proto=(tcp|mptcp), flow 0: netperfmeter refuses the active's "
                         r"command line: invalid FLOWSPEC .*unknown option \"bogus=1\"")
        self.assertFalse(os.path.exists(os.path.join(self.out, "runs")))  # nothing was built or run

    def test_failed_attempts_are_kept_counted_and_captioned(self):
        """A failed attempt is a result about the stack under test: the lab repeats the run, and
        keeps the attempt's directory and error in the run's record, counts it in runs.csv,
        summary.csv and results.sqlite, and says so in the plots' captions; an attempt of an
        earlier invocation that gave up is counted in when --resume completes the run."""
        with open(self.study, "w") as f:
            f.write(TINY.format(runtime=1.5, repetitions=2).replace('proto = ["tcp", "mptcp"]', 'proto = ["tcp"]'))
        # netperfmeter's actives fail while fail-left counts down, as when a stack ends an
        # association early (the lab's check of the command lines, --validate, passes through);
        # the plotter's arguments are logged
        left = os.path.join(self.dir, "fail-left")
        plot_args = os.path.join(self.dir, "plot-args")
        with open(LAB) as f:
            launcher = f.read()
        real_plot = re.search(r'"plot-netperfmeter-summary": "([^"]*)"', launcher).group(1)
        wrappers = {"netperfmeter": f"""#!/bin/sh
case " $* " in *" --validate "*) exec {os.path.abspath(NETPERFMETER)} "$@";; esac
case " $* " in *" -runtime="*)
  n=$(cat {left})
  if [ "$n" -gt 0 ]; then
    echo $((n - 1)) > {left}
    echo "netperfmeter: association shut down by the peer"
    exit 1
  fi;;
esac
exec {os.path.abspath(NETPERFMETER)} "$@"
""", "plot-netperfmeter-summary": f"""#!/bin/sh
printf '%s\\n' "$@" >> {plot_args}
exec {real_plot} "$@"
"""}
        for tool, text in wrappers.items():
            path = os.path.join(self.dir, tool)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o755)
            launcher = re.sub(rf'"{tool}": "[^"]*"', f'"{tool}": "{path}"', launcher)
        wrapped = os.path.join(self.dir, "netperfmeter-lab")
        with open(wrapped, "w") as f:
            f.write(launcher)
        os.chmod(wrapped, 0o755)

        def run(*args):
            return subprocess.run([wrapped, "run", self.study, *OTHER_LOAD, "-o", self.out, "--seed=3", *args],
                                  capture_output=True, text=True, timeout=300)

        # Every attempt fails (--retries=1: two): the study stops, both attempts kept.
        pathlib.Path(left).write_text("2\n")
        r = run()
        self.assertEqual(r.returncode, 1, r.stderr)
        first = re.search(r"\] ETA \S+ (proto=tcp r\d)", r.stderr).group(1).replace(" ", "-")
        failed = os.path.join(self.out, "runs", f".failed-{first}")
        self.assertIn("repeating it (attempt 1 kept in its record)", r.stderr)
        self.assertIn(f"logs in {failed}/2", r.stderr.strip().splitlines()[-1])
        for n in ("1", "2"):
            self.assertEqual(pathlib.Path(failed, n, "error.txt").read_text(),
                             "netperfmeter (flow 0) failed (exit 1): netperfmeter: association shut down by the peer\n")
            self.assertIn("association shut down", pathlib.Path(failed, n, "f0", "active.log").read_text())
        # --resume: the first attempt fails again, its repeat and the other run succeed; the run
        # carries all three failed attempts
        pathlib.Path(left).write_text("1\n")
        r = run("--resume")
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        self.assertEqual(pathlib.Path(left).read_text(), "0\n")
        self.assertEqual([e for e in os.listdir(os.path.join(self.out, "runs")) if e.startswith(".")], [])
        with open(os.path.join(self.out, "runs", first, "attempts.json")) as f:
            attempts = json.load(f)
        self.assertEqual(attempts["attempts"], 4)
        self.assertEqual([a["attempt"] for a in attempts["failed"]], [1, 2, 3])
        self.assertTrue(all("association shut down by the peer" in a["error"] for a in attempts["failed"]))
        self.assertEqual(sorted(os.listdir(os.path.join(self.out, "runs", first, "failed-attempts"))), ["1", "2", "3"])
        other = "proto=tcp-r2" if first == "proto=tcp-r1" else "proto=tcp-r1"
        with open(os.path.join(self.out, "runs", other, "attempts.json")) as f:
            self.assertEqual(json.load(f), {"attempts": 1, "failed": []})
        self.assertFalse(os.path.exists(os.path.join(self.out, "runs", other, "failed-attempts")))
        with open(os.path.join(self.out, "runs.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual({f"proto={row['proto']}-r{row['repetition']}": row["failed_attempts"] for row in rows},
                         {first: "3", other: "0"})
        self.assertEqual({row["validity"] for row in rows}, {"valid"}, "the kept runs measured what was asked")
        with open(os.path.join(self.out, "summary.csv")) as f:
            summary = list(csv.DictReader(f))
        self.assertEqual({row["failed_attempts"] for row in summary}, {"3"})
        self.assertEqual({row["n"] for row in summary if row["metric"] == "goodput"}, {"2"})
        self.assertIn("1 run(s) were repeated after a failed attempt", r.stdout)
        self.assertIn(f"{first.replace('-r', ' r')}, attempt 3: netperfmeter (flow 0) failed (exit 1)", r.stdout)
        caption = "--caption=1 of 2 runs repeated after 3 failed attempts (runs.csv: failed_attempts)"
        self.assertIn(caption, pathlib.Path(plot_args).read_text().splitlines())
        db = sqlite3.connect(os.path.join(self.out, "results.sqlite"))
        try:
            self.assertEqual(dict(db.execute("SELECT run, failed_attempts FROM runs")), {first: 3, other: 0})
            self.assertEqual(json.loads(db.execute("SELECT attempts FROM runs WHERE run = ?", (first,)).fetchone()[0]),
                             attempts)
            self.assertEqual(db.execute("SELECT DISTINCT failed_attempts FROM summary").fetchall(), [(3,)])
        finally:
            db.close()

    def test_a_full_disk_ends_the_study_with_one_line_and_keeps_the_complete_runs(self):
        disk = os.path.join(self.dir, "disk")
        os.makedirs(disk)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", disk], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", disk])
        self.out = os.path.join(disk, "out")
        proc, before = self.start_until_the_second_run("--retries=0")
        # the disk fills up during the second run
        subprocess.run(["dd", "if=/dev/zero", f"of={os.path.join(disk, 'filler')}", "bs=1M"], capture_output=True)
        _, err = proc.communicate(timeout=120)
        err = before + err
        self.assertEqual(proc.returncode, 1, err)
        self.assertNotIn("Traceback", err)
        last = err.strip().splitlines()[-1]
        self.assertTrue(last.startswith("netperfmeter-lab: "), last)
        self.assertIn("No space left on device", last)
        self.assertNothingLeft(proc.pid)
        os.unlink(os.path.join(disk, "filler"))
        kept = [e for e in os.listdir(os.path.join(self.out, "runs")) if not e.startswith(".")]
        self.assertEqual(len(kept), 1, kept)
        # the complete run is intact: --resume keeps it and runs the rest
        r = lab("run", self.study, *OTHER_LOAD, "-o", self.out, "--resume", "--no-plot")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("complete, kept"), 1, r.stderr)
        self.assertEqual(r.stderr.count(": done in"), 3, r.stderr)

    def test_stale_leftovers_of_its_own_prefix_only(self):
        stale, foreign = "npmlab999999999-0a", "npmlabtest-foreign"
        for ns in (stale, foreign):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        try:
            r = lab("run", self.study, *OTHER_LOAD, "-o", self.out, "--repetitions=1", "--no-plot")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(f"removed the leftover namespace {stale}", r.stderr)
            names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            self.assertNotIn(stale, names)
            self.assertIn(foreign, names)
        finally:
            for ns in (stale, foreign):
                subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    unittest.main(verbosity=2)
