"""What makes a lab run valid: every check verified, the stacks' read-back and the wire against
the study, the host's and the processes' load; path usage as a metric; the study's command lines
through netperfmeter's own parser before anything runs.

usage: test_evidence.py LAB_PROGRAM LAB_SOURCE_DIR NETPERFMETER
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

LAB, LAB_SRC, NETPERFMETER = sys.argv[1:4]
del sys.argv[1:4]
sys.path.insert(0, LAB_SRC)
from npmlab import evidence, study, topology  # noqa: E402

CMT = "const0:const1444:const0:const0:cmt=cmt:dac=on:nrsack=on:rcvbuf=100000:id=0"


class Topo:
    paths = [None, None]


class Capture:
    path = "capture.pcapng"

    def __init__(self, available=True):
        self._available = available

    def available(self):
        return self._available


def seen_sctp(**changes):
    """What a capture of a CMT-SCTP flow with DAC and NR-SACK over two paths shows (as
    summarise_sctp says it), with `changes`."""
    seen = {"init_offers_nr_sack": True, "init_ack_offers_nr_sack": True, "nr_sacks_from_passive": 400,
            "sacks_from_passive": 0, "sacks_from_active": 0, "nr_sacks_from_active": 0,
            "dac_sacks_from_passive": 390, "dac_sacks_from_active": 0, "max_a_rwnd_passive": 90000,
            "data_packets_per_interface": {"0": 600, "1": 300}, "data_bytes_per_interface": {"0": 870000, "1": 435000},
            "data_chunks_per_interface": {"0": 600, "1": 300}, "duplicate_tsns_per_interface": {},
            "duplicate_copies_per_interface": {}}
    seen.update(changes)
    return seen


HELD = {"cmt": "cmt", "cc": "rfc2581", "bufsplit": "none", "bufsplit-on": "outstanding", "dac": "on", "nrsack": "on",
        "rtomin": "1000", "smartfr": "off", "reschedule": "off", "pktdrop": "off"}
LOADS = {"flow 0 active": {"seconds": 9.8, "cpu_seconds": 1.0, "cores": 0.1},
         "flow 0 passive": {"seconds": 9.8, "cpu_seconds": 1.5, "cores": 0.15}}


def judge_sctp(spec=CMT, seen=None, held=None, capture=None, counters=None, processes=LOADS, **kw):
    """judge() of one SCTP flow with the given capture summary, read-back and counters."""
    real = evidence.summarise_sctp
    evidence.summarise_sctp = lambda path, port: dict(seen if seen is not None else seen_sctp())
    held = held if held is not None else {"active": dict(HELD), "passive": dict(HELD)}
    try:
        return evidence.judge([study.Flow("sctp", spec, "")], Topo(), capture or Capture(), {}, counters or {},
                              [100.0], [9899], [9000], holds={0: {side: {0: h} for side, h in held.items() if h}},
                              processes=processes, **kw)
    finally:
        evidence.summarise_sctp = real


class Judge(unittest.TestCase):
    """judge() on synthetic inputs: which runs it finds valid, and why the others are not."""

    def assertInvalid(self, judged, reason):
        self.assertFalse(judged["valid"], judged)
        self.assertIn(reason, " | ".join(judged["problems"]))

    def test_a_run_whose_every_check_holds_is_valid(self):
        judged = judge_sctp()
        self.assertTrue(judged["valid"], judged["problems"])
        self.assertEqual(judged["unverified"], [])
        checks = {c["check"]: c["ok"] for c in judged["flows"][0]["checks"]}
        for knob in ("cmt", "dac", "nrsack"):
            for side in ("active", "passive"):
                self.assertIs(checks[f"{knob}= held by the stack ({side})"], True)
        self.assertIs(checks["CMT DAC bits in the SACKs on the wire"], True)
        self.assertIs(checks["NR-SACK negotiated (offered in INIT and INIT-ACK)"], True)
        self.assertIs(checks["passive a_rwnd (rcvbuf)"], True)
        self.assertEqual(judged["flows"][0]["stack_holds"]["passive"]["dac"], "on")

    def test_no_capture_makes_every_run_invalid(self):
        for capture in (Capture(available=False), None):
            judged = evidence.judge([study.Flow("sctp", CMT, "")], Topo(), capture, {}, {}, [100.0], [9899], [9000],
                                    holds={0: {s: {0: dict(HELD)} for s in ("active", "passive")}}, processes=LOADS)
            self.assertInvalid(judged, "not verified: ")
            self.assertIn("no capture (tshark is not installed)", judged["unverified"])
            self.assertIn("flow 0: CMT DAC bits in the SACKs on the wire", judged["unverified"])
        # the hosts topology, which captures nothing, lists them and is not refused for it
        judged = evidence.judge([study.Flow("sctp", CMT, "")], Topo(), None, {}, {}, [100.0], [9899], [9000],
                                holds={0: {s: {0: dict(HELD)} for s in ("active", "passive")}}, strict=False)
        self.assertTrue(judged["valid"], judged["problems"])
        self.assertIn("flow 0: passive a_rwnd (rcvbuf)", judged["unverified"])

    def test_what_the_stack_holds_against_what_was_asked(self):
        held = {"active": dict(HELD), "passive": dict(HELD, dac="off")}
        self.assertInvalid(judge_sctp(held=held), "flow 0: dac= held by the stack (passive): expected on, seen off")
        held = {"active": dict(HELD, cmt="off"), "passive": dict(HELD)}
        self.assertInvalid(judge_sctp(held=held), "flow 0: cmt= held by the stack (active): expected cmt, seen off")
        held = {"active": dict(HELD), "passive": dict(HELD)}
        self.assertInvalid(judge_sctp(spec=CMT + ":bufsplit=both", held=held),
                           "flow 0: bufsplit= held by the stack (active): expected both, seen none")
        # a side whose log has no read-back: unverified, so invalid
        judged = judge_sctp(held={"active": dict(HELD), "passive": None})
        self.assertInvalid(judged, "not verified: flow 0: cmt= held by the stack (passive)")

    def test_what_the_wire_shows_against_what_was_asked(self):
        self.assertInvalid(judge_sctp(seen=seen_sctp(dac_sacks_from_passive=0)),
                           "flow 0: CMT DAC bits in the SACKs on the wire: expected in SACKs, seen in 0 of 400 SACKs")
        off = {"active": dict(HELD, dac="off"), "passive": dict(HELD, dac="off")}
        self.assertInvalid(judge_sctp(spec=CMT.replace("dac=on", "dac=off"), held=off),
                           "CMT DAC bits in the SACKs on the wire: expected in no SACK, seen in 390 of 400 SACKs")
        # dac=on without CMT: usrsctp sets the DAC bits only where CMT is on (sctp_send_sack), so
        # a single-path flow that asks for DAC shows them in no SACK, and a SACK with them is wrong
        single = CMT.replace("cmt=cmt", "cmt=off")
        held = {side: dict(HELD, cmt="off") for side in ("active", "passive")}
        plain = seen_sctp(dac_sacks_from_passive=0, data_packets_per_interface={"0": 900},
                          data_bytes_per_interface={"0": 1305000}, data_chunks_per_interface={"0": 900})
        judged = judge_sctp(spec=single, held=held, seen=plain)
        self.assertTrue(judged["valid"], judged["problems"])
        checks = {c["check"]: c for c in judged["flows"][0]["checks"]}
        self.assertEqual(checks["CMT DAC bits in the SACKs on the wire"]["expected"],
                         "in no SACK (DAC acts only with CMT)")
        self.assertInvalid(judge_sctp(spec=single, held=held, seen=dict(plain, dac_sacks_from_passive=5)),
                           "CMT DAC bits in the SACKs on the wire: expected in no SACK (DAC acts only with CMT), "
                           "seen in 5 of 400 SACKs")
        self.assertInvalid(judge_sctp(seen=seen_sctp(init_ack_offers_nr_sack=False)),
                           "flow 0: NR-SACK negotiated (offered in INIT and INIT-ACK): expected True, seen False")
        self.assertInvalid(judge_sctp(seen=seen_sctp(max_a_rwnd_passive=131072)),
                           "flow 0: passive a_rwnd (rcvbuf): expected 50000 to 100000, seen 131072")
        # SACKs or the INIT-ACK's offer not captured: unverified, so invalid
        self.assertInvalid(judge_sctp(seen=seen_sctp(nr_sacks_from_passive=0, dac_sacks_from_passive=0)),
                           "not verified: flow 0: CMT DAC bits in the SACKs on the wire")
        self.assertInvalid(judge_sctp(seen=seen_sctp(init_ack_offers_nr_sack=None)),
                           "not verified: flow 0: NR-SACK negotiated")

    def test_a_starved_path_is_measured_not_discarded(self):
        # CMT put everything on path 1 and the receiver sent plain SACKs although NR-SACK was
        # negotiated: what the stack did, not what it was told, so the run stands, with the shares
        judged = judge_sctp(seen=seen_sctp(data_bytes_per_interface={"0": 1305000},
                                           data_packets_per_interface={"0": 900},
                                           nr_sacks_from_passive=0, sacks_from_passive=400))
        self.assertTrue(judged["valid"], judged["problems"])
        self.assertEqual(judged["flows"][0]["path_share"], {"1": 1.0, "2": 0.0})
        self.assertEqual(judged["flows"][0]["nr_sack_share"], 0.0)
        shares = judge_sctp()["flows"][0]["path_share"]
        self.assertAlmostEqual(shares["1"], 2 / 3)
        self.assertAlmostEqual(shares["2"], 1 / 3)

    def test_udp_send_buffer_errors_make_a_run_invalid(self):
        self.assertInvalid(judge_sctp(counters={"nstat": {"active": {"UdpSndbufErrors": 12}, "passive": {}}}),
                           "12 UDP send-buffer errors on the active host")
        self.assertInvalid(judge_sctp(counters={"nstat": {"passive": {"Udp6SndbufErrors": 1}}}),
                           "1 UDP send-buffer errors on the passive host")
        self.assertTrue(judge_sctp(counters={"nstat": {"active": {"UdpInDatagrams": 5000}}})["valid"])

    def test_a_cpu_bound_netperfmeter_makes_a_run_invalid(self):
        busy = dict(LOADS, **{"flow 0 passive": {"seconds": 9.8, "cpu_seconds": 9.7, "cores": 0.99}})
        self.assertInvalid(judge_sctp(processes=busy),
                           "netperfmeter (flow 0 passive) used 0.99 of a core during its measurement: bound by its "
                           "CPU (limit 0.95, --max-process-load)")
        self.assertTrue(judge_sctp(processes=busy, max_process_load=1.5)["valid"])
        unsampled = dict(LOADS, **{"flow 0 active": {"seconds": None, "cpu_seconds": None, "cores": None}})
        self.assertInvalid(judge_sctp(processes=unsampled),
                           "not verified: the CPU load of netperfmeter (flow 0 active)")
        self.assertInvalid(judge_sctp(processes=None), "not verified: the netperfmeter processes' CPU load")

    def test_the_processes_cpu_time_is_sampled_over_the_measurement(self):
        # a process that computes until it has used 1 s of CPU (however busy the host is) and one
        # that sleeps, sampled as a run's netperfmeters are
        burn = subprocess.Popen([sys.executable, "-c", "import time\nwhile time.process_time() < 1.0: pass"])
        sleep = subprocess.Popen(["sleep", "1.5"])
        cpu = evidence.ProcessCpu({"burn": burn.pid, "sleep": sleep.pid}, period=0.05)
        burn.wait()
        sleep.wait()
        loads = cpu.finish()
        print(f"a computing process: {loads['burn']['cpu_seconds']:.2f} s of CPU in {loads['burn']['seconds']:.2f} s, "
              f"a sleeping one: {loads['sleep']['cpu_seconds']:.2f} s")
        # all of the 1 s but its start (before the first sample) and its last moments (after the last)
        self.assertGreater(loads["burn"]["cpu_seconds"], 0.8)
        self.assertLess(loads["burn"]["cpu_seconds"], 1.1)
        self.assertAlmostEqual(loads["burn"]["cores"], loads["burn"]["cpu_seconds"] / loads["burn"]["seconds"],
                               places=2)
        self.assertLess(loads["sleep"]["cpu_seconds"], 0.03)
        # a window it was not sampled in: not measured
        self.assertEqual(cpu.finish((0, 1))["burn"]["cores"], None)

    def test_delay_line_lateness_above_the_bound_makes_a_run_invalid(self):
        counters = {"delay_lines": {"1": {"forward": {"in": 900, "out": 900, "late": 40},
                                          "reverse": {"in": 400, "out": 400, "late": 0}}}}

        def record(forward_p99, reverse_p99, reverse_frames=400):
            return {"1": {"forward": {"lateness": {"frames": 900, "p50_us": 10, "p99_us": forward_p99}},
                          "reverse": {"lateness": {"frames": reverse_frames, "p50_us": 10, "p99_us": reverse_p99}}}}

        judged = judge_sctp(counters=counters, delay_lines=record(14200, 80))
        self.assertInvalid(judged, "delay line link 1 forward: p99_us = 14200 us (limit 10000 us, --max-lateness)")
        self.assertEqual(judged["delay_line_lateness_us"],
                         {"link 1 forward p99_us": 14200, "link 1 reverse p99_us": 80})
        self.assertTrue(judge_sctp(counters=counters, delay_lines=record(14200, 80), max_lateness_us=20000)["valid"])
        self.assertTrue(judge_sctp(counters=counters, delay_lines=record(100, 80))["valid"])
        # a direction that sent nothing has no lateness to check
        self.assertTrue(judge_sctp(counters=counters, delay_lines=record(100, 99999, reverse_frames=0))["valid"])
        # delay lines without a record of their lateness: not verified, so invalid
        self.assertInvalid(judge_sctp(counters=counters), "the delay lines' lateness (no delay_lines.json record")
        # the counts are differenced, the late frames too
        before = {"delay_lines": {"1": {"forward": {"in": 100, "late": 9}}}, "nstat": {}}
        after = {"delay_lines": {"1": {"forward": {"in": 1000, "late": 30}}}, "nstat": {}}
        self.assertEqual(evidence.delta(before, after)["delay_lines"], {"1": {"forward": {"in": 900, "late": 21}}})

    def test_an_aqm_that_was_not_in_effect_makes_a_run_invalid(self):
        red = topology.path(rate="10mbit", aqm="red", aqm_params={"wq": 0.002, "min": 20, "max": 80, "maxp": 0.02},
                            name="path2")

        class AqmTopo:
            paths = [topology.path(rate="10mbit", name="path1"), red]

        def record(aqm_drops, tail_drops, marks=0, command="netperfmeter-delayline -a red:wq=0.002 -r 10000000,0"):
            late = {"frames": 900, "p50_us": 10, "p99_us": 100}
            return {"2": {"command": command,
                          "forward": {"in": 900, "aqm_drops": aqm_drops, "tail_drops": tail_drops, "marks": marks,
                                      "lateness": late},
                          "reverse": {"in": 400, "aqm_drops": 0, "tail_drops": 0, "marks": 0, "lateness": late}}}

        def judge(delay_lines):
            real = evidence.summarise_sctp
            evidence.summarise_sctp = lambda path, port: seen_sctp()
            try:
                return evidence.judge([study.Flow("sctp", CMT, "")], AqmTopo(), Capture(), {},
                                      {"delay_lines": {"2": {}}}, [100.0], [9899], [9000],
                                      holds={0: {s: {0: dict(HELD)} for s in ("active", "passive")}}, processes=LOADS,
                                      delay_lines=delay_lines)
            finally:
                evidence.summarise_sctp = real

        judged = judge(record(aqm_drops=31, tail_drops=0))
        self.assertTrue(judged["valid"], judged["problems"])
        self.assertEqual(judged["aqm"]["2"], {"aqm": "red", "aqm_drops": 31, "marks": 0, "tail_drops": 0, "in": 900})
        self.assertTrue(judge(record(aqm_drops=0, tail_drops=0, marks=12))["valid"])  # ECN marks are RED acting
        # a queue that never reached the thresholds gave RED nothing to do: no drop at all is not a fault
        self.assertTrue(judge(record(aqm_drops=0, tail_drops=0))["valid"])
        # drops by overflow alone: a drop-tail queue, whatever the study said
        self.assertInvalid(judge(record(aqm_drops=0, tail_drops=14)),
                           "link 2 (path2): the red queue dropped 14 packets by overflow and none by red")
        self.assertInvalid(judge(record(5, 0, command="netperfmeter-delayline -r 10000000,0")),
                           "link 2 (path2): the delay line ran without its red queue")
        # no record of the run: unverified, so invalid
        judged = judge({})
        self.assertInvalid(judged, "not verified: ")
        self.assertIn("the red queue of link 2 (path2) (no delay-line record of the run)", judged["unverified"])

    def test_the_stacks_log_lines_are_read_back(self):
        text = ("01-Dec-2026 22:36:46.8804: Flow #0: SCTP association up, the stack holds cmt=cmt cc=rfc2581 "
                "bufsplit=both bufsplit-on=buffered dac=on smartfr=on nrsack=on pktdrop=on rtomin=1000\n"
                "01-Dec-2026 22:36:46.8857: Flow #3: SCTP association from 10.250.1.1 (SCTP), the stack holds "
                "cmt=off cc=htcp bufsplit=none dac=off nrsack=off rtomin=200\n")
        held = evidence.stack_holds(text)
        self.assertEqual(held[0], {"cmt": "cmt", "cc": "rfc2581", "bufsplit": "both", "bufsplit-on": "buffered",
                                   "dac": "on", "smartfr": "on", "reschedule": "off", "nrsack": "on", "pktdrop": "on",
                                   "rtomin": "1000"})
        self.assertEqual((held[3]["cc"], held[3]["smartfr"], held[3]["bufsplit-on"], held[3]["rtomin"]),
                         ("htcp", "off", "outstanding", "200"))
        # what a FLOWSPEC asks for, named as the stack's line names it
        self.assertEqual(evidence.asked_tuning(study.spec_options("const0:const1400:cmt=mptcp:sctpcc=htcp:dac=1:"
                                                                  "nrsack=yes:rtomin=0200:smartfr=false")),
                         {"cmt": "like-mptcp", "cc": "htcp", "dac": "on", "nrsack": "on", "rtomin": "200",
                          "smartfr": "off"})

    def test_nr_sack_offers_of_truncated_init_acks(self):
        # a real INIT (whole) and INIT-ACK (the first 214 bytes of 480: its state cookie cut off)
        # of usrsctp with nrsack=on: the Supported Extensions parameter lies before the cookie
        init = ("c9212328000000006b4bfada01000074511b665a0002000000010001836a97a280000004c00000048008000ac00fc180"
                "82100000800200243fea0f2ad179151d07d6fe48caa8581b3caae22ef001c664d0febe3968e717b68004000600010000"
                "8003000680c10000000c000600050000000500080afa0201000500080afa0101")
        init_ack = ("2328c921511b665a8d6df6a6020001d4758c5309000200000001ffffe58e095a80000004c00000048008000bc00fc180"
                    "8210810080020024bf6cc925729aa28183075eca03de6137c7d9647c3b069c777cb964e38cf997d28004000600010000"
                    "8003000680c10000000500080afa0202000500080afa0102000701684b414d452d42534420312e3100000000fe4b0f6b"
                    "000000007b2c0d000000000060ea000000000000000000005a661b51758c53090afa01010000000000000000000000"
                    "00050000000afa01020000000000000000000000000500")
        kind, extensions = evidence.init_extensions(init)
        self.assertEqual(kind, evidence.INIT)
        self.assertIn(evidence.NR_SACK, extensions)
        kind, extensions = evidence.init_extensions(init_ack)
        self.assertEqual(kind, 2)
        self.assertIn(evidence.NR_SACK, extensions)
        # cut before the parameter: unknown, not "not offered"
        self.assertEqual(evidence.init_extensions(init_ack[:2 * 12 + 2 * 28]), (2, None))
        # a whole INIT without the parameter offers nothing
        bare = "c9212328" + "00000000" + "6b4bfada" + "01000014" + "511b665a" + "00020000" + "00010001" + "836a97a2"
        self.assertEqual(evidence.init_extensions(bare), (evidence.INIT, set()))
        self.assertEqual(evidence.init_extensions("c9212328000000006b4bfada" + "0300001000"), (None, None))


def lab(*args, env=None, timeout=300):
    """The lab's run, with its pid (its namespaces are named npmlab<pid>-...)."""
    with subprocess.Popen([LAB, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as p:
        stdout, stderr = p.communicate(timeout=timeout)
    r = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    r.pid = p.pid
    return r


# A CMT-SCTP flow over 10 and 5 Mbit/s, dac= the sweep's
TWO_PATHS = ('name = "{name}"\nruntime = 2\nrepetitions = 1\n[sweep]\ndac = ["on", "off"]\n' +
             "".join(f'[[paths]]\nrate = "{rate}"\nqueue = "30kB"\ndelay_ms = 5\n' for rate in ("10mbit", "5mbit")) +
             '[[flows]]\nprotocol = "sctp"\nspec = "{spec}"\n'
             '[[metrics]]\nname = "goodput"\nvalue = "goodput(0) / 1e6"\nunit = "Mbit/s"\n')


def netperfmeter_validates():
    """Whether this netperfmeter has --validate (the lab's check of a study's command lines)."""
    r = subprocess.run([NETPERFMETER, "127.0.0.1:9000", "--validate", "-tcp", "const0:const1400"],
                       capture_output=True, text=True, timeout=30)
    return 'unknown option "--validate"' not in r.stdout + r.stderr


class ChecksBeforeRunning(unittest.TestCase):
    """What the lab refuses before it builds anything: FLOWSPECs and options netperfmeter refuses,
    [[paper]] rows off the sweep, a test bed without tshark."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="npmlab-evidence-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, text):
        path = os.path.join(self.dir, "study.toml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def refused(self, path, *args):
        r = lab("run", path, *args, "-o", os.path.join(self.dir, "out"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out")))
        self.assertEqual(topology.leftovers(r.pid), [], "nothing built")
        return r.stderr.strip()

    def test_flowspecs_go_through_netperfmeters_own_parser(self):
        if not netperfmeter_validates():
            print(f"skipped: {NETPERFMETER} has no --validate yet (--dry-run warns, nothing is checked)")
            self.skipTest(f"{NETPERFMETER} has no --validate")
        good = "const0:const1444:const0:const0:cmt=cmt:dac={dac}"
        r = lab("run", self.write(TWO_PATHS.format(name="good", spec=good)), "--dry-run")
        self.assertEqual((r.returncode, r.stderr), (0, ""), r.stderr)
        for bad, said in (("const0:const1444:cmt=cmt:bufsplit=bothh:dac={dac}", "bufsplit=bothh"),
                          ("const0:const1444:cmt=cmt:dac={dac}:rtomin=0", "rtomin=0"),
                          ("const0:const1444:dac={dac}:smartfr=on", "smartfr=on")):
            for dry in (("--dry-run",), ()):
                with self.subTest(spec=bad, dry_run=bool(dry)):
                    line = self.refused(self.write(TWO_PATHS.format(name="bad", spec=bad)), *dry)
                    self.assertIn("netperfmeter refuses the active's command line", line)
                    self.assertIn(said, line)
                    self.assertIn("dac=", line)  # names the combination
        # and the study's own active options
        study_text = TWO_PATHS.format(name="bad", spec=good) + '[netperfmeter]\nactive = ["-runtime=often"]\n'
        self.assertIn("-runtime=often", self.refused(self.write(study_text), "--dry-run"))

    def test_paper_rows_off_the_sweep_are_refused(self):
        text = TWO_PATHS.format(name="paper", spec="const0:const1444:const0:const0:cmt=cmt:dac={dac}")
        line = self.refused(self.write(text + '[[paper]]\nmetric = "goodput"\ndac = "maybe"\nvalue = 3\n'), "--dry-run")
        self.assertRegex(line, r"study\.toml:\d+: paper\[1\]\.dac: \"maybe\" is not a value of the sweep's dac "
                               r"\(on, off\)")
        # a value of the study's sweep that its quick form does not run is the study's, and kept
        quick = text + '[quick]\nsweep.dac = ["on"]\n[[paper]]\nmetric = "goodput"\ndac = "off"\nvalue = 3\n'
        self.assertEqual(study.load(self.write(quick), quick=True).paper[0]["values"], {"dac": "off"})

    @unittest.skipUnless(os.geteuid() == 0, "the lab checks for root before it checks for tshark")
    def test_a_test_bed_without_tshark_is_refused(self):
        bin_dir = os.path.join(self.dir, "bin")
        os.mkdir(bin_dir)
        for tool in ("python3", "ip", "tc"):
            os.symlink(shutil.which(tool), os.path.join(bin_dir, tool))
        path = self.write(TWO_PATHS.format(name="notshark", spec="const0:const1444:const0:const0:cmt=cmt:dac={dac}"))
        r = lab("run", path, "-o", os.path.join(self.dir, "out"), env=dict(os.environ, PATH=bin_dir))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        lines = [line for line in r.stderr.strip().splitlines() if "has no --validate" not in line]
        self.assertEqual(lines, ["netperfmeter-lab: tshark is not installed, and every run is checked against a "
                                 "capture of it (Debian: apt-get install tshark): nothing was run"])
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out")))
        self.assertEqual(topology.leftovers(r.pid), [], "nothing built")
        # --dry-run says so beforehand
        r = lab("run", path, "--dry-run", env=dict(os.environ, PATH=bin_dir))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("netperfmeter-lab: warning: tshark is not installed: run checks every run against a capture, "
                      "and does not start without it", r.stderr.splitlines())


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
@unittest.skipUnless(shutil.which("tshark"), "tshark is not installed")
class WireEvidence(unittest.TestCase):
    """A CMT-SCTP flow over two paths with dac=on and dac=off, run for real: evidence.json holds
    what both stacks read back and what the SACKs on the wire carried; the paths' shares of the
    data are metrics in summary.csv."""

    def test_dac_read_back_and_on_the_wire(self):
        work = tempfile.mkdtemp(prefix="npmlab-evidence-")
        self.addCleanup(shutil.rmtree, work, True)
        path, out = os.path.join(work, "dac.toml"), os.path.join(work, "out")
        with open(path, "w") as f:
            f.write(TWO_PATHS.format(name="dac", spec="const0:const1444:const0:const0:cmt=cmt:dac={dac}:nrsack=on"))
        # beside other tests: their load must not make these runs invalid
        r = lab("run", path, "--max-other-load=1000", "-o", out, "--no-plot")
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        for dac in ("on", "off"):
            with open(os.path.join(out, "runs", f"dac={dac}-r1", "evidence.json")) as f:
                judged = json.load(f)
            self.assertTrue(judged["valid"], judged["problems"])
            self.assertEqual(judged["unverified"], [])
            flow = judged["flows"][0]
            for side in ("active", "passive"):
                self.assertEqual((flow["stack_holds"][side]["cmt"], flow["stack_holds"][side]["dac"]), ("cmt", dac))
            checks = {c["check"]: c for c in flow["checks"]}
            wire = checks["CMT DAC bits in the SACKs on the wire"]
            self.assertIs(wire["ok"], True, wire)
            seen = flow["seen"]
            sacks = seen["nr_sacks_from_passive"] + seen["sacks_from_passive"]
            print(f"dac={dac}: the passive's SACKs with the DAC bits: {seen['dac_sacks_from_passive']} of {sacks}; "
                  f"the paths' shares of the data: {flow['path_share']}")
            self.assertGreater(sacks, 100)
            if dac == "on":
                self.assertGreater(seen["dac_sacks_from_passive"], sacks / 2)
            else:
                self.assertEqual(seen["dac_sacks_from_passive"], 0)
            self.assertIs(checks["NR-SACK negotiated (offered in INIT and INIT-ACK)"]["ok"], True)
            self.assertEqual(set(judged["processes"]), {"flow 0 active", "flow 0 passive"})
            for load in judged["processes"].values():
                self.assertGreater(load["cores"], 0)
                self.assertLess(load["cores"], evidence.PROCESS_LOAD_LIMIT)
        with open(os.path.join(out, "summary.csv")) as f:
            rows = {(row["dac"], row["metric"]): row for row in csv.DictReader(f)}
        for dac in ("on", "off"):
            shares = [float(rows[(dac, f"data_share_f0_path{p}")]["mean"]) for p in (1, 2)]
            self.assertAlmostEqual(sum(shares), 1.0, places=9)
            self.assertGreater(min(shares), 0.0, "CMT used both paths")
            self.assertIn((dac, "netperfmeter_cores_max"), rows)


if __name__ == "__main__":
    unittest.main(verbosity=2)
