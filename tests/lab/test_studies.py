"""The shipped studies' quick forms, end to end with real netperfmeter runs, asserted against the
papers' claims where this tool-chain reproduces them (long tier: ctest -L long). The claims are the
functions of studies_claims.py, which test_studies_claims.py feeds synthetic runs to show that each
fails on a wrong arm; their thresholds are the study files' [[verdict]] rows where one states the
claim.
usage: test_studies.py LAB_PROGRAM [CC_LOADER]  (NPM_NETPERFMETER: the lab's netperfmeter, whose
--version says whether it links the bundled usrsctp; else the one on PATH)

Every claim is checked at a parameter point where the paper's effect is large, with a threshold
fixed before the measurements of src/lab/studies/README.md were made, and only on valid runs
(the lab marks a run invalid when its stacks or its capture show another configuration than the
study's, when a check could not be verified, or when its host or a netperfmeter was CPU-bound).
Power: the quick forms run 3 repetitions (the shared bottleneck 5) in blocks (each repetition runs
every variant once, in a random order), so that a variant and its baseline are compared run by run.
From the spreads measured for src/lab/studies/README.md (standard error of the mean or of the
paired difference), the distance from each measured effect to its threshold is: buffer splitting's
gain at beta = 2 22 SE; the dissimilar paths' fill 17 SE, the reference flow's share at least 0.45
of the DFN path 1.5 to 2.8 SE (the quick forms' 4.52 and 4.62 against 4.29 Mbit/s: the weakest
claim here, about 5 % of reproducing runs would fail it; the full form's 3.95 at rho = 10 fails it,
the unfairness the paper rules out), CMT/RPv1 against plain CMT with TCP 6.3 SE; the shared
bottleneck's plain CMT 7 SE, CMT off 7 SE, CMT/RPv2 inside its rule's band [0.45, 0.55] (quick
forms' means 0.483, 0.509, 0.528, standard error about 0.02: at most 2 % of reproducing runs fail
it), MPTCP's 5 SE or more; exclusive paths 12 SE or more; the reference flow beside a disjoint CMT
flow 4.8 SE; of the bundled stack's mechanisms (skipped with the system usrsctp, which refuses
their knobs; measured in their quick forms with 1444-byte messages, 2026-11-28): chunk rescheduling
against plain ordered CMT more than 100 SE, packet-drop reporting against NR-SACK by the lab's
verdict rule (6 pairs per cell: false pass under the null at most 5 %, power about 99 %,
test_studies_claims.py), W-PR-SCTP's jitter against g-PR-SCTP's 26 SE, and each mechanism's
counter (0 without its knob, above 0 with it; for smart FR, whose counter counts only with its
knob, the fast retransmissions, which count in both arms). The asymmetric-paths paper's remaining
panels (2026-12-04, quick forms at the paper's rates on an idle host): Fig. 4's collapse without
splitting at phi = 100 (0.208 of the short queue's, its band [0, 0.4]; three runs within 0.03
Mbit/s) and receiver splitting's cure (104.30 against the 81.75 asserted, 0.9 of the short queue's
mean: 16 SE of it, whose runs spread over 88.1-93.4); Fig. 5 left's plain CMT below half the fast
path (0.069 of it; 0.155 in the scaled first form, where a run of three all in plain CMT's high mode
gave 0.29) and NR-SACK alone +88.4 paired against the +40 asserted (the runs within 2.1 of each
other); the drop-report counters in Fig. 6 middle and Fig. 7 middle, the fast retransmissions in
Fig. 6 right and Fig. 7 right, the runs' validity in Fig. 8 left, whose goodput claims the quick
forms do not carry; the three-path W-PR-SCTP's jitter below 25 ms and below g-PR-SCTP's (18.0
against 44.8 ms; the four-path study, whose W-PR-SCTP does not reproduce, runs for validity only).
Claims that this tool-chain does not reproduce are documented in the README and not asserted."""

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import studies_claims as claims  # noqa: E402

LAB = sys.argv.pop(1)
CC_LOADER = sys.argv.pop(1) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else ""
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cc"))
PAYLOAD = claims.PAYLOAD


def summary(directory, *keys):
    """{(value of each key column..., metric): mean} of summary.csv (valid runs)."""
    out = {}
    with open(os.path.join(directory, "summary.csv")) as f:
        for row in csv.DictReader(f):
            out[tuple(row[k] for k in keys) + (row["metric"],)] = float(row["mean"])
    return out


def paired(directory, *keys):
    """{(value of each other variable..., variant, metric): (pairs, mean difference, low, high)}
    of paired.csv: each variant against the study's baseline, repetition by repetition."""
    out = {}
    with open(os.path.join(directory, "paired.csv")) as f:
        for row in csv.DictReader(f):
            key = tuple(row[k] for k in keys) + (row["metric"],)
            out[key] = (int(row["pairs"]), float(row["mean_difference"]), float(row["ci_low"]), float(row["ci_high"]))
    return out


def runs(directory, *keys):
    """{(value of each key column...): [row of runs.csv, ...]} of the valid runs."""
    out = {}
    with open(os.path.join(directory, "runs.csv")) as f:
        for row in csv.DictReader(f):
            if row["validity"] == "valid":
                out.setdefault(tuple(row[k] for k in keys), []).append(row)
    return out


def verdicts(directory):
    """verdicts.json's rules, each with the lab's verdict on the runs."""
    with open(os.path.join(directory, "verdicts.json")) as f:
        return json.load(f)["verdicts"]


def bundled_usrsctp():
    """Whether the netperfmeter the lab runs links the bundled usrsctp (its patch series: the
    mechanisms of the last four studies; the system library refuses their knobs)."""
    program = os.environ.get("NPM_NETPERFMETER") or shutil.which("netperfmeter")
    if not program:
        return False
    out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=10).stdout
    return "bundled libusrsctp" in out


BUNDLED = bundled_usrsctp()


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class QuickStudies(unittest.TestCase):
    def setUp(self):
        # NPM_STUDIES_KEEP=DIR keeps the results (summary, runs, plots, evidence) there
        self.keep = os.environ.get("NPM_STUDIES_KEEP")
        self.dir = self.keep or tempfile.mkdtemp(prefix="npmlab-studies-")

    def tearDown(self):
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def run_study(self, name):
        out = os.path.join(self.dir, name)
        r = subprocess.run([LAB, "run", name, "--quick", "-o", out], capture_output=True, text=True, timeout=1800)
        print(r.stdout)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        # every run measured what the study asks for, every check verified (the stacks' read-back,
        # NR-SACK, DAC, windows, subflows, CCs on the wire; no UDP send-buffer errors, no
        # CPU-bound netperfmeter)
        with open(os.path.join(out, "runs.csv")) as f:
            invalid = [row for row in csv.DictReader(f) if row["validity"] != "valid"]
        self.assertEqual(invalid, [], "runs that did not measure the study's configuration")
        return out

    def test_buffer_splitting(self):
        # Adhari et al., Fig. 7: with splitting and NR-SACK, CMT gets about beta + 0.8 (the ADSL
        # path's 800 kbit/s on top of the fast path). Asserted at beta = 2, where the ADSL path
        # adds 0.72 Mbit/s of payload (38 %): more than 0.25, run by run (measured: +0.70
        # [0.61, 0.79]). Not asserted, because this tool-chain does not reproduce them
        # (studies/README.md): that CMT without splitting stays below 2 Mbit/s whatever beta
        # (usrsctp's CMT measured 8.08 against the fast path's 7.63 at beta = 8), and that
        # splitting with NR-SACK beats the fast path at large beta (7.24 at beta = 8).
        # The goodput gain holds without splitting too (+0.62 at beta = 2): what splitting does is
        # asserted on the stack's per-path state -- the ADSL path's sRTT far above the run without
        # splitting, paired by repetition at beta = 2 and 8 (measured +131 ms on average;
        # studies_claims.buffer_splitting_fills_the_slow_path).
        out = self.run_study("buffer-splitting")
        s = summary(out, "beta", "variant")
        d = paired(out, "beta", "variant")
        r = runs(out, "beta", "variant")
        claims.buffer_splitting_fills_the_slow_path(
            *({(beta, x["repetition"]): float(x["adsl_srtt_ms"]) for beta in ("2", "8")
               for x in r[(beta, variant)]} for variant in ("split+nrsack", "none")))
        for beta in ("2", "8"):
            self.assertGreater(s[(beta, "fast-only", "goodput")], 0.9 * float(beta) * PAYLOAD,
                               "the fast path alone carries its rate")
        n, gain, _, _ = d[("2", "split+nrsack", "goodput")]
        self.assertEqual(n, 3)
        self.assertGreater(gain, 0.25, "CMT with splitting and NR-SACK adds the ADSL path")

    def test_cmt_dissimilar(self):
        # Dreibholz et al. (NetPerfMeter tool-chain), Fig. 4 at rho = 10 Mbit/s: plain CMT takes
        # half of the shared DFN path plus the ADSL path, so that both flows together fill both
        # paths and the SCTP reference flow keeps about half of the DFN path (measured: 5.63 and
        # 4.62 Mbit/s). The reference's half: at least the low end of its [[verdict]] row's band
        # (0.45 of the DFN path's payload; the earlier 0.40 admitted the full form's 0.414 at
        # rho = 10, the unfairness the paper rules out). Not asserted (studies/README.md): CMT/RPv1
        # more than 1 Mbit/s below plain CMT (measured -0.85 [-1.34, -0.35]: the direction only),
        # and CMT/RPv2 leaving the reference flow more than plain CMT (measured -0.09 [-1.09,
        # +0.91]).
        s = summary(self.run_study("cmt-dissimilar"), "cmt")
        rule = claims.verdict_row(claims.studies_file("cmt-dissimilar"), "plain CMT leaves the SCTP reference")
        claims.cmt_dissimilar_fair_to_the_reference(s[("cmt", "cmt_goodput")], s[("cmt", "reference_goodput")],
                                                    10.0, rule["band"], float(rule["arm"]["rho"]))

    def test_cmt_dissimilar_tcp(self):
        # Fig. 5: the same against a TCP (Reno) reference flow. Asserted: the two flows fill both
        # paths, and CMT/RPv1 is slower than plain CMT, run by run (measured -2.10 [-2.85,
        # -1.35]). Not reproduced (studies/README.md): that plain CMT leaves TCP its half of the
        # DFN path (TCP got 3.58 [2.24, 4.93] of 10 Mbit/s).
        out = self.run_study("cmt-dissimilar-tcp")
        s = summary(out, "cmt")
        d = paired(out, "cmt")
        rho = 10.0
        self.assertGreater(s[("cmt", "cmt_goodput")] + s[("cmt", "reference_goodput")], 0.85 * (rho + 0.8) * PAYLOAD,
                           "the two flows together fill both paths")
        self.assertLess(d[("cmtrpv1", "cmt_goodput")][1], -1.0, "CMT/RPv1 is slower than plain CMT")

    def test_shared_bottleneck(self):
        # Dreibholz et al. (TCP-friendly CMT), Fig. 5 right: plain CMT behaves like two flows and
        # takes about 2/3 of a shared bottleneck; CMT/RP leaves the reference flow about 1/2; CMT
        # off (two single-path flows) 1/2. Asserted: CMT above 0.58, CMT/RPv2 within its rule's
        # band (0.45 to 0.55: neither taking more than a single-path flow nor starved), off
        # within 0.5 +- 0.08.
        s = summary(self.run_study("shared-bottleneck"), "cmt", "aqm")
        self.assertGreater(s[("cmt", "droptail", "share")], 0.58, "plain CMT takes about 2/3")
        claims.fair_share(s[("cmtrpv2", "droptail", "share")],
                          claims.verdict_row(claims.studies_file("shared-bottleneck"), "CMT/RPv2 shares")["band"],
                          "CMT/RPv2")
        self.assertAlmostEqual(s[("off", "droptail", "share")], 0.5, delta=0.08,
                               msg="two single-path flows share evenly")
        total = s[("cmt", "droptail", "cmt_goodput")] + s[("cmt", "droptail", "reference_goodput")]
        self.assertGreater(total, 0.85 * 10.0 * PAYLOAD, "the two flows fill the bottleneck")

    def test_shared_bottleneck_mptcp(self):
        # The same with MPTCP and the bundled coupled CCs: uncoupled reno subflows about 2/3, the
        # coupled npm_rpv2 about 1/2. The CCs are registered for the test (shared safely with the
        # cc tests through their lock) and unregistered afterwards.
        if not CC_LOADER or not os.path.exists(CC_LOADER):
            self.skipTest("the BPF congestion controls are not built (NPM_WITH_BPF_CC, clang, bpftool, libbpf)")
        from cc_netns import Loader
        loader = Loader(CC_LOADER)
        try:
            loader.start()
            s = summary(self.run_study("shared-bottleneck-mptcp"), "cc")
        finally:
            loader.restore()
        self.assertGreater(s[("reno", "share")], 0.58, "uncoupled subflows take about 2/3")
        rule = claims.verdict_row(claims.studies_file("shared-bottleneck-mptcp"), "MPTCP with the RPv2")
        claims.fair_share(s[("npm_rpv2", "share")], rule["band"], "MPTCP with npm_rpv2")

    def test_exclusive_paths(self):
        # Dreibholz et al. (TCP-friendly CMT), Fig. 3 left: over two disjoint paths used alone,
        # CMT almost doubles the throughput of one path; CMT/RP is "significantly better than
        # non-CMT". Asserted at rho = 10: CMT at least 1.7 times, CMT/RPv1 at least 1.3 times
        # CMT off.
        s = summary(self.run_study("exclusive-paths"), "rho", "cmt", "aqm")
        off = s[("10", "off", "droptail", "goodput")]
        self.assertGreater(off, 0.9 * 10 * PAYLOAD, "one path carries its rate")
        self.assertGreater(s[("10", "cmt", "droptail", "goodput")], 1.7 * off, "CMT almost doubles it")
        self.assertGreater(s[("10", "cmtrpv1", "droptail", "goodput")], 1.3 * off,
                           "CMT/RP is clearly better than one path")

    def assert_mechanism_acts(self, with_knob, without_knob, metric, every=True):
        """A mechanism's counter (metric, per run) is above 0 in every run with its knob (with
        every=False: in at least one), and 0 in every run without."""
        counts = [float(row[metric]) for row in with_knob]
        self.assertEqual(len(counts), 3)
        self.assertTrue(all(c > 0 for c in counts) if every else sum(counts) > 0,
                        f"{metric} with the mechanism on: {counts}")
        self.assertEqual([float(row[metric]) for row in without_knob], [0.0] * len(without_knob),
                         f"{metric} with the mechanism off")

    def test_exclusive_paths_flows(self):
        # Fig. 3 right: with several flows, CMT/RP's total is as CMT's ("already at N = 2 no
        # significant difference"). Asserted at N = 3: within 10 % of CMT's total.
        s = summary(self.run_study("exclusive-paths-flows"), "flows", "cmt")
        cmt, rp = s[("3", "cmt", "total_goodput")], s[("3", "cmtrpv1", "total_goodput")]
        self.assertAlmostEqual(rp / cmt, 1.0, delta=0.1)

    def test_disjoint_reference(self):
        # Fig. 5 left: beside plain CMT over two disjoint paths, the reference flow on path 1 gets
        # about half of it; beside CMT/RP more. Asserted at rho = 10: plain CMT leaves it 0.35 to
        # 0.65 of path 1, CMT/RPv1 at least 0.1 of path 1 more (run by run).
        out = self.run_study("disjoint-reference")
        s = summary(out, "cmt", "aqm")
        d = paired(out, "aqm", "cmt")
        self.assertAlmostEqual(s[("cmt", "droptail", "reference_of_path1")], 0.5, delta=0.15)
        self.assertGreater(d[("droptail", "cmtrpv1", "reference_of_path1")][1], 0.1)

    @unittest.skipUnless(BUNDLED, "chunk rescheduling is the bundled SCTP stack's patch 0006")
    def test_chunk_rescheduling(self):
        # Dreibholz et al. (CMT over asymmetric paths), Fig. 7 left: ordered CMT over a 10 Mbit/s
        # path and a slow one collapses by buffer blocking; chunk rescheduling removes the
        # collapse. Asserted at rho = 0.5 Mbit/s: rescheduling more than 4 Mbit/s above plain
        # CMT, run by run (measured +8.61 [+8.55, +8.68]; the full form +8.09 [+7.55, +8.62]),
        # and at least 0.9 of the fast path alone (measured 9.90 against 9.54; the full form
        # 9.91); the stack rescheduled chunks in every run with reschedule=on (93 to 119) and in
        # none without.
        out = self.run_study("chunk-rescheduling")
        s = summary(out, "rho", "variant", "aqm")
        d = paired(out, "rho", "aqm", "variant")
        r = runs(out, "rho", "variant", "aqm")
        n, gain, _, _ = d[("0.5", "droptail", "resched", "goodput")]
        self.assertEqual(n, 3)
        self.assertGreater(gain, 4.0, "rescheduling removes the buffer blocking of ordered CMT")
        self.assertGreater(s[("0.5", "resched", "droptail", "goodput")],
                           0.9 * s[("0.5", "fast-only", "droptail", "goodput")],
                           "with rescheduling, CMT keeps at least the fast path's goodput")
        self.assert_mechanism_acts(r[("0.5", "resched", "droptail")],
                                   r[("0.5", "plain", "droptail")] + r[("0.5", "fast-only", "droptail")],
                                   "rescheduled_chunks")

    @unittest.skipUnless(BUNDLED, "buffer splitting per association is the bundled SCTP stack's patch 0001")
    def test_buffer_splitting_queue(self):
        # Dreibholz et al. (CMT over asymmetric paths), Fig. 4 left: unordered CMT with NR-SACK
        # over 100 + 10 Mbit/s, a 250,000-byte send and a 125,000-byte receive buffer. Without
        # splitting the goodput sinks as the FIFO queues grow (the slow path's queue fills the
        # receive buffer); receiver splitting solves it. Asserted at phi = 10 and 100 packets:
        # without splitting the long queue's goodput over the short queue's inside the band of the
        # study's rule (stated there for phi = 150; measured 18.85 against 90.83 Mbit/s, 0.208 --
        # the paper's 20 against 106, 0.19 -- in three runs within 0.03 Mbit/s of each other), and
        # receiver splitting at phi = 100 at least 0.9 of the short queue's (measured 104.30).
        out = self.run_study("buffer-splitting-queue")
        s = summary(out, "phi", "split", "buffers")
        rule = claims.verdict_row(claims.studies_file("buffer-splitting-queue"),
                                  "send buffer > receive buffer: without")
        claims.queue_blocking_and_its_cure(s[("10", "none", "send-larger", "goodput")],
                                           s[("100", "none", "send-larger", "goodput")],
                                           s[("100", "receiver", "send-larger", "goodput")], rule["band"])

    @unittest.skipUnless(BUNDLED, "buffer splitting per association is the bundled SCTP stack's patch 0001")
    def test_unordered_bandwidth(self):
        # Fig. 5 left at rho = 1 Mbit/s: plain CMT falls far below the fast path alone, NR-SACK
        # alone lifts it (studies_claims.plain_cmt_collapses_and_nrsack_lifts_it: measured 6.52
        # against 95.09, NR-SACK +88.4 paired). Not asserted (studies/README.md): splitting alone
        # "even worse" (5.59) and splitting with NR-SACK scaling linearly (77.96, below the fast
        # path alone): the full form's rules judge them.
        out = self.run_study("unordered-bandwidth")
        s = summary(out, "rho", "cmt", "variant")
        r = runs(out, "rho", "cmt", "variant")
        nrsack = {x["repetition"]: float(x["goodput"]) for x in r[("1", "cmt", "nrsack")]}
        plain = {x["repetition"]: float(x["goodput"]) for x in r[("1", "cmt", "plain")]}
        claims.plain_cmt_collapses_and_nrsack_lifts_it(
            s[("1", "cmt", "plain", "goodput")], s[("1", "off", "plain", "goodput")],
            [nrsack[k] - plain[k] for k in sorted(set(nrsack) & set(plain))])

    @unittest.skipUnless(BUNDLED, "packet-drop reporting that acts is the bundled SCTP stack's patch 0009")
    def test_packet_drop_reporting_rp(self):
        # Fig. 6 middle at epsilon = 5e-6, CMT/RPv1: the mechanism at work -- chunks marked by drop
        # reports in every run with pktdrop=on (measured 699 to 780 per 12-s run) and in none
        # without. Not asserted: its goodput (lower with drop reporting and splitting than with
        # splitting alone in the quick form, 89.7 against 98.3) and splitting's gain (+0.9):
        # the full form's rules judge them.
        r = runs(self.run_study("packet-drop-reporting-rp"), "epsilon", "variant")
        (epsilon,) = {key[0] for key in r}
        self.assert_mechanism_acts(r[(epsilon, "nrsack+pktdrop+split")],
                                   r[(epsilon, "nrsack")] + r[(epsilon, "nrsack+split")], "drop_reported_chunks")

    @unittest.skipUnless(BUNDLED, "smart fast retransmission is the bundled SCTP stack's patch 0005")
    def test_smart_fast_retransmit_rp(self):
        # Fig. 6 right at delta = 50 ms, CMT/RPv1, DAC on: the situation smart FR is for -- fast
        # retransmissions in every run of both arms (measured 101 to 190 per run). Not asserted:
        # that smart FR left acknowledgements out (0 in every run of the quick form at the paper's
        # rates; 1 to 7 in its scaled first form) nor its goodput (93.17-95.08 with it against
        # 93.44-95.53 without): the full form's rules judge it.
        r = runs(self.run_study("smart-fast-retransmit-rp"), "delta", "variant")
        for variant in ("nrsack", "nrsack+smartfr"):
            counts = [float(x["fast_retransmissions"]) for x in r[("50", variant)]]
            self.assertEqual(len(counts), 3)
            self.assertTrue(all(c > 0 for c in counts), f"fast retransmissions in every run of {variant}: {counts}")

    @unittest.skipUnless(BUNDLED, "packet-drop reporting and rescheduling are the bundled SCTP stack's patches")
    def test_ordered_bit_errors(self):
        # Fig. 7 middle at epsilon = 5e-6, ordered CMT: drop reports mark chunks in every run with
        # pktdrop=on (measured 1,503 to 1,534) and in none without. Not asserted: the paper's gain
        # (the quick form measured the opposite, 98.2 against 109.9 Mbit/s: studies/README.md).
        r = runs(self.run_study("ordered-bit-errors"), "epsilon", "cmt", "variant")
        (epsilon,) = {key[0] for key in r}
        self.assert_mechanism_acts(r[(epsilon, "cmt", "resched+split+pktdrop")],
                                   r[(epsilon, "cmt", "plain")] + r[(epsilon, "cmt", "resched+split")],
                                   "drop_reported_chunks")

    @unittest.skipUnless(BUNDLED, "rescheduling and smart FR are the bundled SCTP stack's patches 0006 and 0005")
    def test_ordered_delay(self):
        # Fig. 7 right at delta = 50 ms, ordered CMT, DAC on: the situation smart FR is for --
        # fast retransmissions in every run of every variant (measured 276 to 314 per run). Not
        # asserted: that smart FR or rescheduling improves goodput (90.6-96.5 Mbit/s in every
        # variant of the quick form; no acknowledgement left out and 0 to 4 chunks rescheduled
        # per run: too few for a 12-s run to show the mechanisms).
        r = runs(self.run_study("ordered-delay"), "delta", "cmt", "variant")
        for variant in ("plain", "resched+split", "resched+split+smartfr"):
            counts = [float(x["fast_retransmissions"]) for x in r[("50", "cmt", variant)]]
            self.assertEqual(len(counts), 3)
            self.assertTrue(all(c > 0 for c in counts), f"fast retransmissions in every run of {variant}: {counts}")

    @unittest.skipUnless(BUNDLED, "rescheduling is the bundled SCTP stack's patch 0006")
    def test_chunk_rescheduling_rp(self):
        # Fig. 8 left at rho = 5, ordered CMT/RPv1: no claim of the paper that the quick form
        # carries -- plain CMT/RP did not collapse (97.8-99.5 Mbit/s against the fast path's
        # 94.9-95.3) and the stack rescheduled no chunk in any run (studies/README.md) -- so the
        # long tier asserts that every run is valid (run_study) and that the fast path alone
        # carries its payload rate (at least 0.9 of 100 Mbit/s of 1444-byte messages).
        s = summary(self.run_study("chunk-rescheduling-rp"), "rho", "variant")
        self.assertGreater(s[("5", "fast-only", "goodput")], 0.9 * 100 * PAYLOAD)

    @unittest.skipUnless(BUNDLED, "W-PR-SCTP is the bundled SCTP stack's patch 0008")
    def test_w_pr_sctp_more_paths(self):
        # Fiore et al., Table 1 with three paths: W-PR-SCTP's jitter below 25 ms (the paper: in
        # every case; the study rule's band) and below g-PR-SCTP's, run by run (measured 18.0
        # against 44.8 ms, runs 15.5-22.7 against 34.5-53.2: 25 ms is 2.9 SE above the mean). Four
        # paths: not reproduced (its jitter 31.4-34.3 ms, two paths almost unused:
        # studies/README.md), not asserted; the study runs for its runs' validity.
        out = self.run_study("w-pr-sctp-3paths")
        s = summary(out, "scheduler")
        self.assertLess(s[("wprsctp", "jitter")], 25.0, "W-PR-SCTP's jitter stays below 25 ms")
        n, difference, _, _ = paired(out, "scheduler")[("wprsctp", "jitter")]
        self.assertEqual(n, 3)
        self.assertLess(difference, 0.0, "W-PR-SCTP's jitter is below g-PR-SCTP's")
        self.run_study("w-pr-sctp-4paths")

    @unittest.skipUnless(BUNDLED, "smart fast retransmission is the bundled SCTP stack's patch 0005")
    def test_smart_fast_retransmit(self):
        # Fig. 5 right at delta = 50 ms, DAC off and on, each queue: the mechanism at work --
        # acknowledgements left out of the fast-retransmit decisions with smartfr=on (measured 8,
        # 42 and 42 in three runs; 58 to 61 in the full form's 30-s runs, 190 to 642 in its first
        # form with 1452-byte messages; 0, 237, 172 with the rescaled 8-packet queues), in at
        # least one run, as a 12-s run may see no moved chunk acknowledged -- and the situation it
        # is for in both arms: fast retransmissions in every run (the per-path counter counts with
        # and without the knob; 234 to 517 per run, where the first quick form's 80-packet queues
        # gave none). Not asserted (studies/README.md): that it improves goodput or makes the fast
        # retransmissions fewer (the full form, before the rescaling: no paired interval excludes
        # 0; the study's rules judge both in its full form).
        r = runs(self.run_study("smart-fast-retransmit"), "delta", "variant", "aqm", "dac")
        for aqm in ("droptail", "red"):
            for dac in ("off", "on"):
                with self.subTest(aqm=aqm, dac=dac):
                    claims.smart_fr_acts(r[("50", "nrsack+smartfr", aqm, dac)],
                                         r[("50", "nrsack", aqm, dac)])

    @unittest.skipUnless(BUNDLED, "packet-drop reporting that acts is the bundled SCTP stack's patch 0009")
    def test_packet_drop_reporting(self):
        # Fig. 5 middle at epsilon = 5e-6 on path 2: packet-drop reporting improves on NR-SACK.
        # Asserted: the lab's verdict on the study's rule shows it in both cells (droptail, red),
        # each by an exact sign-flip test of 6 pairs at Holm's level (false pass under the null at
        # most 5 %; the mean above 0 of 3 pairs, asserted before, passed half the time; the power
        # from the shipped spread in test_studies_claims.py); measured before the rescaling +0.95
        # [-0.09, +1.98] with 1444-byte messages, pairs +1.19, +0.46, +1.19, and +1.00 [+0.78,
        # +1.23] in the full form; with 1452-byte ones, two packets per message, +2.29 [+0.70,
        # +3.88] in the quick form and +2.27 [+1.62, +2.91] in the full one. And chunks marked by
        # drop reports in every run with pktdrop=on (measured 406 to 449) and in none without.
        # Not reproduced, not asserted: plain CMT's collapse; NR-SACK's gain over plain CMT
        # (direction only in the full form, -0.87 [-1.10, -0.64] at 5e-6) is not in the quick
        # form, which runs NR-SACK's variants only.
        out = self.run_study("packet-drop-reporting")
        d = paired(out, "epsilon", "aqm", "variant")
        r = runs(out, "epsilon", "variant", "aqm")
        (epsilon,) = {key[0] for key in r}
        self.assertEqual(d[(epsilon, "droptail", "nrsack+pktdrop", "goodput")][0], 6)
        rule = claims.verdict_row(claims.studies_file("packet-drop-reporting"),
                                  "packet-drop reporting improves")
        claims.verdict_shows_direction(verdicts(out), rule["key"])
        self.assert_mechanism_acts(r[(epsilon, "nrsack+pktdrop", "droptail")], r[(epsilon, "nrsack", "droptail")],
                                   "drop_reported_chunks")

    @unittest.skipUnless(BUNDLED, "W-PR-SCTP is the bundled SCTP stack's patch 0008")
    def test_w_pr_sctp(self):
        # Fiore et al., two paths of Table 1 without cross traffic: W-PR-SCTP's jitter below
        # 25 ms, g-PR-SCTP's about 200 ms. Asserted: W-PR-SCTP below 25 ms (measured 2.7 ms; 5.6
        # [5.4, 5.7] ms in the full form) and more than 25 ms below g-PR-SCTP, run by run
        # (measured -77.0 [-85.5, -68.6] ms; the full form -76.9 [-98.3, -55.6]). Not asserted:
        # the paper's delays (both schedulers' are far above them here, studies/README.md).
        out = self.run_study("w-pr-sctp")
        s = summary(out, "cross", "scheduler")
        d = paired(out, "cross", "scheduler")
        self.assertLess(s[("none", "wprsctp", "jitter")], 25.0, "W-PR-SCTP's jitter stays below 25 ms")
        n, difference, _, _ = d[("none", "wprsctp", "jitter")]
        self.assertEqual(n, 3)
        self.assertLess(difference, -25.0, "W-PR-SCTP's jitter is far below g-PR-SCTP's")


if __name__ == "__main__":
    unittest.main(verbosity=2)
