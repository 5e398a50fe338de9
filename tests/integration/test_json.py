"""--json and --json-stream on loopback: the result document against its JSON Schema and,
figure by figure, against the scalar files of both sides (the same printed values); JSON on
standard output with the human output on standard error; the stream's lines; a failed run."""

import json
import os
import re
import socket
import subprocess
import tempfile
import unittest

from harness import free_base_port, NETPERFMETER, Passive, main, read_text, run_active

try:
    import jsonschema
except ImportError:  # python3-jsonschema
    jsonschema = None

PORT, _ = free_base_port(span=22)  # this test's ports: PORT - 1 .. PORT + 23, its own
SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "app", "schema")
FLOWS = ["-tcp", "const20:const1000:const20:const1000:description=Bulk \"TCP\"",
         "-udp", "const25:const500:const25:const700:description=Voice",
         "-mptcp", "const10:const1000:const10:const1000:description=Multipath"]
SCALAR = re.compile(r'^scalar\s+"([^"]*)"\s+"([^"]*)"\s+(\S+)\s*$')


def schema(name):
    with open(os.path.join(SCHEMAS, f"netperfmeter-{name}.schema.json")) as f:
        return json.load(f)


def validate(document, name):
    if jsonschema is None:
        raise unittest.SkipTest("python3-jsonschema is not installed")
    jsonschema.Draft202012Validator(schema(name)).validate(document)


def printed_scalars(path):
    """{(object, name): value as printed} of a .sca[.bz2] file."""
    rows = {}
    for line in read_text(path).splitlines():
        m = SCALAR.match(line)
        assert m, f"{path}: {line!r}"
        rows[(m.group(1), m.group(2))] = m.group(3)
    return rows


def as_printed(path):
    """The document with every number as the text it was written as."""
    with open(path) as f:
        return json.load(f, parse_float=str, parse_int=str)


def active(*args, cwd, timeout=60):
    return subprocess.run([NETPERFMETER, f"127.0.0.1:{PORT}", "-control-over-tcp", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


COUNTS = [("bytes", "Bytes"), ("packets", "Packets"), ("frames", "Frames"), ("bit_rate", "Bit Rate"),
          ("byte_rate", "Byte Rate"), ("packet_rate", "Packet Rate"), ("frame_rate", "Frame Rate")]
PATH_FIGURES = [("samples", "Samples"), ("mean_cwnd", "Mean Cwnd"), ("mean_rtt_ms", "Mean RTT"),
                ("mean_unacked", "Mean Unacked"), ("mean_rwnd", "Mean Rwnd"), ("mean_pending", "Mean Pending"),
                ("bytes_sent", "Bytes Sent"), ("bytes_acked", "Bytes Acked"), ("bytes_received", "Bytes Received"),
                ("retransmissions", "Retransmissions"), ("fast_retransmissions", "Fast Retransmissions"),
                ("timer_retransmissions", "Timer Retransmissions")]


def figures(doc):
    """Every figure of the document: (where in the document, side, scalar object, scalar name, value)."""
    out = []
    base = {side: f"netPerfMeter.{side}" for side in ("active", "passive")}
    for flow in doc["flows"]:
        fid = flow["flow_id"]
        for key, sender, receiver in (("active_to_passive", "active", "passive"),
                                      ("passive_to_active", "passive", "active")):
            d = flow[key]
            so, ro = f"{base[sender]}.flow[{fid}]", f"{base[receiver]}.flow[{fid}]"
            t, r = d["transmitted"], d["received"]
            out.append((f"{fid}.{key}.transmitted.first_us", sender, so, "First Transmission", t["first_us"]))
            out.append((f"{fid}.{key}.transmitted.last_us", sender, so, "Last Transmission", t["last_us"]))
            out.append((f"{fid}.{key}.received.first_us", receiver, ro, "First Reception", r["first_us"]))
            out.append((f"{fid}.{key}.received.last_us", receiver, ro, "Last Reception", r["last_us"]))
            for k, name in COUNTS:
                out.append((f"{fid}.{key}.transmitted.{k}", sender, so, f"Transmitted {name}", t[k]))
                out.append((f"{fid}.{key}.received.{k}", receiver, ro, f"Received {name}", r[k]))
            for k, name in COUNTS[:3]:
                out.append((f"{fid}.{key}.lost.{k}", receiver, ro, f"Lost {name}", d["lost"][k]))
            out.append((f"{fid}.{key}.jitter_ms", receiver, ro, "Jitter", d["jitter_ms"]))
            out.append((f"{fid}.{key}.mean_delay_ms", receiver, ro, "Mean Delay", d["mean_delay_ms"]))
        for side in ("active", "passive"):
            for p in flow["paths"][side]:
                obj = f"{base[side]}.flow[{fid}].path[{p['path_id']}]"
                for k, name in PATH_FIGURES:
                    if k in p:
                        out.append((f"{fid}.paths.{side}.{k}", side, obj, name, p[k]))
            whole = flow["connection"][side]
            for k, name in PATH_FIGURES if whole is not None else []:
                if k in whole:
                    out.append((f"{fid}.connection.{side}.{k}", side, f"{base[side]}.flow[{fid}].connection", name,
                                whole[k]))
    for side in ("active", "passive"):
        total, obj = doc["totals"][side], f"{base[side]}.total"
        out.append((f"totals.{side}.first_us", side, obj, "First Statistics Event", total["first_us"]))
        out.append((f"totals.{side}.last_us", side, obj, "Last Statistics Event", total["last_us"]))
        for what in ("transmitted", "received", "lost"):
            for k, name in COUNTS:
                if k != "bit_rate":
                    out.append((f"totals.{side}.{what}.{k}", side, obj, f"{what.capitalize()} {name}", total[what][k]))
        cpu = doc["cpu"][side]
        for index, states in [(None, cpu["total"])] + list(enumerate(cpu["cores"], 1)):
            obj = f"{base[side]}.totalCPU" if index is None else f"{base[side]}.CPU[{index}]"
            for k, v in states.items():
                name = {"iowait": "IOWait"}.get(k, " ".join(w.capitalize() for w in k.split("_")))
                out.append((f"cpu.{side}.{index}.{k}", side, obj, name, v))
        for k, v in (cpu["process"] or {}).items():
            name = {"user_s": "User Time", "system_s": "System Time", "utilisation": "CPU Utilisation"}[k]
            out.append((f"cpu.{side}.process.{k}", side, f"{base[side]}.process", name, v))
    return out


class JsonResult(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="npm-json-")
        with Passive(PORT) as passive:
            cls.result = active("-nodisplay", "-runtime=3", "--json=run.json", "-scalar=run.sca", *FLOWS, cwd=cls.dir)
            cls.compressed = active("-nodisplay", "-runtime=1.5", "--warmup=0.5", "--json=bz2.json",
                                    "-scalar=bz2.sca.bz2", *FLOWS, cwd=cls.dir)
            cls.alone = active("-nodisplay", "-runtime=1.5", "-json=alone.json", *FLOWS, cwd=cls.dir)
            cls.stdout = active("-display", "-runtime=2", "--json", *FLOWS, cwd=cls.dir)
            cls.stream = active("-display", "-runtime=3", "--json-stream", *FLOWS, cwd=cls.dir)
            cls.both = active("-nodisplay", "-runtime=1.5", "--json", "--json-stream", *FLOWS, cwd=cls.dir)
            cls.passive_alive = passive.alive()

    def path(self, name):
        return os.path.join(self.dir, name)

    def compare(self, document, scalar_pattern):
        doc = as_printed(self.path(document))
        sca = {side: printed_scalars(self.path(scalar_pattern.replace(".sca", f"-{side}.sca")))
               for side in ("active", "passive")}
        used = set()
        for where, side, obj, name, value in figures(doc):
            self.assertIn((obj, name), sca[side], f"{where}: no such scalar in the {side}'s file")
            printed = sca[side][(obj, name)]
            if value is None:
                self.assertIn(printed.lstrip("-"), ("nan", "inf"), f"{where}: null but {printed} in the .sca")
            else:
                self.assertEqual(value, printed, f"{where}: {value} != {printed} ({side} {obj} {name})")
            used.add((side, obj, name))
        every = {(side, obj, name) for side in sca for (obj, name) in sca[side]}
        self.assertEqual(every - used, set(), "scalars missing from the JSON document")
        return doc

    def test_document_is_valid_and_every_figure_is_the_scalar_files(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        self.assertTrue(self.passive_alive)
        with open(self.path("run.json")) as f:
            document = json.load(f)
        validate(document, "result")
        doc = self.compare("run.json", "run.sca")
        self.assertIsNone(doc["error"])
        self.assertEqual(doc["type"], "result")
        self.assertEqual(len(doc["flows"]), 3)
        self.assertEqual([f["protocol"] for f in doc["flows"]], ["TCP", "UDP", "MPTCP"])
        # the whole connection is there for MPTCP only, on both sides
        self.assertEqual([f["connection"]["active"] is None for f in doc["flows"]], [True, True, False])
        self.assertIsNotNone(doc["flows"][2]["connection"]["passive"])
        self.assertEqual(doc["flows"][0]["description"], 'Bulk "TCP"')
        self.assertEqual(document["runtime_s"], 3)
        self.assertEqual(document["warmup_s"], 0)
        self.assertAlmostEqual(document["duration_s"], 3.0, delta=0.5)
        self.assertEqual(document["command_line"][0], "netperfmeter")
        self.assertIn("--json=run.json", document["command_line"])
        self.assertEqual(document["control"]["protocol"], "TCP")
        self.assertEqual(document["control"]["remote"], f"127.0.0.1:{PORT + 1}")
        self.assertTrue(document["control"]["local"].startswith("127.0.0.1:"))
        self.assertEqual(document["remote"], f"127.0.0.1:{PORT}")
        # what was measured, where: the host, each flow's FLOWSPEC and congestion control
        uname = os.uname()
        self.assertEqual(document["host"], {"name": socket.gethostname(), "kernel": f"{uname.sysname} {uname.release}",
                                            "machine": uname.machine})
        self.assertEqual([f["flowspec"] for f in document["flows"]], FLOWS[1::2])
        with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
            default_cc = f.read().strip()
        self.assertEqual([f["congestion_control"] for f in document["flows"]], [default_cc, None, default_cc])
        self.assertRegex(document["start_time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        self.assertIn("$" + format(int(document["measurement_id"], 16), "x"), self.result.stderr)
        # Both directions carried data and arrived.
        for flow in document["flows"]:
            for d in ("active_to_passive", "passive_to_active"):
                self.assertGreater(flow[d]["transmitted"]["bytes"], 0)
                self.assertGreater(flow[d]["received"]["bytes"], 0.8 * flow[d]["transmitted"]["bytes"])
                self.assertIsNotNone(flow[d]["mean_delay_ms"])
        self.assertTrue(document["cpu"]["active"]["cores"])
        self.assertTrue(document["cpu"]["passive"]["cores"])

    def test_bzip2_scalar_files_and_a_warmup(self):
        self.assertEqual(self.compressed.returncode, 0, self.compressed.stderr)
        with open(self.path("bz2.json")) as f:
            document = json.load(f)
        validate(document, "result")
        self.compare("bz2.json", "bz2.sca.bz2")
        self.assertEqual(document["warmup_s"], 0.5)
        self.assertAlmostEqual(document["duration_s"], 1.0, delta=0.3)  # the scalars' interval

    def test_without_scalar_files_the_passive_figures_are_there(self):
        self.assertEqual(self.alone.returncode, 0, self.alone.stderr)
        self.assertEqual(sorted(os.listdir(self.dir)).count("alone.json"), 1)
        self.assertFalse([n for n in os.listdir(self.dir) if n.startswith("alone-")])
        with open(self.path("alone.json")) as f:
            doc = json.load(f)
        validate(doc, "result")
        self.assertGreater(doc["flows"][0]["active_to_passive"]["received"]["bytes"], 0)
        self.assertIsNotNone(doc["totals"]["passive"])
        # both sides' paths are sampled for the document alone
        for side in ("active", "passive"):
            self.assertEqual(len(doc["flows"][0]["paths"][side]), 1, side)
            self.assertGreater(doc["flows"][0]["paths"][side][0]["samples"], 5, side)

    def test_json_on_stdout_human_output_on_stderr(self):
        self.assertEqual(self.stdout.returncode, 0, self.stdout.stderr)
        doc = json.loads(self.stdout.stdout)  # nothing else on standard output
        validate(doc, "result")
        self.assertIsNone(doc["error"])
        # the status line
        self.assertRegex(self.stdout.stderr, r"\d:\d\d:\d\d  \d+ flows?  tx .* rx .* CPU host \d+% self \d+%")
        self.assertIn("Flow #0", self.stdout.stderr)  # the log

    def test_stream_lines(self):
        """A start line, an interval line per second up to the end of the runtime, an end line
        with the result document: what a consumer needs, as iperf3's stream."""
        self.assertEqual(self.stream.returncode, 0, self.stream.stderr)
        lines = [json.loads(line) for line in self.stream.stdout.splitlines()]
        for doc in lines:
            validate(doc, "stream")
        self.assertEqual([d["type"] for d in lines[:1] + lines[-1:]], ["start", "end"], self.stream.stdout)
        start, intervals, end = lines[0], lines[1:-1], lines[-1]
        self.assertEqual({d["type"] for d in intervals}, {"interval"})
        self.assertEqual({d["measurement_id"] for d in lines}, {start["measurement_id"]})
        self.assertEqual([f["flowspec"] for f in start["flows"]], FLOWS[1::2])
        self.assertEqual(start["runtime_s"], 3)
        self.assertEqual(start["host"]["name"], socket.gethostname())
        # every second, the last one at the end of the runtime: 3 s in 3 lines (4 if a second's
        # line came late, 2 if a loaded host delayed the first beyond a second), the last
        # covering the end
        self.assertIn(len(intervals), (2, 3, 4), self.stream.stdout)
        self.assertGreaterEqual(intervals[-1]["elapsed_s"], 2.95)
        self.assertAlmostEqual(sum(d["interval_s"] for d in intervals), intervals[-1]["elapsed_s"], delta=0.01)
        previous = 0
        for doc in intervals:
            self.assertEqual([f["flow_id"] for f in doc["flows"]], [0, 1, 2])
            self.assertGreaterEqual(doc["flows"][0]["transmitted"]["bytes"], previous)
            previous = doc["flows"][0]["transmitted"]["bytes"]
        self.assertGreater(previous, 0)
        self.assertEqual((end["exit_code"], end["error"]), (0, None))
        validate(end["result"], "result")
        self.assertEqual(end["result"]["measurement_id"], start["measurement_id"])
        # the stream's last count is the active's, at the end of the runtime; the document's
        # is STOP's, a little later
        self.assertGreaterEqual(end["result"]["flows"][0]["active_to_passive"]["transmitted"]["bytes"], previous)
        self.assertRegex(self.stream.stderr, r"\d+ flows?  tx ")

    def test_stream_and_document_on_standard_output(self):
        """With --json on standard output too, the document is the end line's, written once."""
        self.assertEqual(self.both.returncode, 0, self.both.stderr)
        lines = [json.loads(line) for line in self.both.stdout.splitlines()]
        self.assertEqual(lines[0]["type"], "start")
        self.assertEqual(lines[-1]["type"], "end")
        self.assertEqual([d["type"] for d in lines].count("result"), 0)
        validate(lines[-1]["result"], "result")


class JsonError(unittest.TestCase):
    def test_unreachable_passive(self):
        with tempfile.TemporaryDirectory() as d, socket.socket() as s:
            s.bind(("127.0.0.1", 0))  # a port nobody listens on (PORT and PORT + 1 closed)
            port = s.getsockname()[1] - 1
            r = subprocess.run([NETPERFMETER, f"127.0.0.1:{port}", "-control-over-tcp", "-nodisplay", "--json=err.json",
                                "-tcp", "const10:const100"], cwd=d, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0)
            with open(os.path.join(d, "err.json")) as f:
                doc = json.load(f)
            validate(doc, "result")
            self.assertIn("cannot connect", doc["error"])
            self.assertIsNone(doc["totals"]["active"])
            self.assertEqual(len(doc["flows"]), 1)
            r = subprocess.run([NETPERFMETER, f"127.0.0.1:{port}", "-control-over-tcp", "--json", "-tcp",
                                "const10:const100"], cwd=d, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("cannot connect", json.loads(r.stdout)["error"])
            self.assertIn("ERROR", r.stderr)
            # the stream of a run that never started: its end line alone, with the error
            r = subprocess.run([NETPERFMETER, f"127.0.0.1:{port}", "-control-over-tcp", "--json-stream", "-tcp",
                                "const10:const100"], cwd=d, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0)
            lines = [json.loads(line) for line in r.stdout.splitlines()]
            self.assertEqual([doc["type"] for doc in lines], ["end"], r.stdout)
            validate(lines[0], "stream")
            self.assertEqual(lines[0]["exit_code"], r.returncode)
            self.assertIn("cannot connect", lines[0]["error"])
            validate(lines[0]["result"], "result")

    def test_command_line(self):
        r = subprocess.run([NETPERFMETER, "9000", "--json"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("options of the active side", r.stderr)
        r = subprocess.run([NETPERFMETER, "127.0.0.1:9000", "--json=", "-tcp", "const1:const100"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--json=FILE", r.stderr)
        r = subprocess.run([NETPERFMETER, "127.0.0.1:9000", "--json=/nonexistent/x.json", "-tcp", "const1:const100"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("JSON", r.stderr)


def scaled(value, base, prefixes, unit):
    """common/text.h's scaled(): four significant digits, the prefix that keeps it below 1000."""
    i = 0
    while i < 4 and value >= 999.95:
        value /= base
        i += 1
    decimals = 3 if value < 9.9995 else 2 if value < 99.995 else 1
    return f"{value:.{decimals}f} {prefixes[i]}{unit}"


def parse_table(text):
    """The end-of-run table: {(flow or "total", "A->P"/"P->A"): (sent frames, received frames,
    goodput text, lost frames)}."""
    rows, current = {}, None
    for line in text.splitlines():
        m = re.match(r"Flow #(\d+) \(", line)
        if m:
            current = int(m.group(1))
        elif line.startswith("Total (A->P"):
            current = "total"
        m = re.match(r"  (A->P|P->A) \S+ \S+ (\d+) fr +\S+ \S+ (\d+) fr +(\S+ \S+) +(\d+)", line)
        if m and current is not None:
            rows[(current, m.group(1))] = (int(m.group(2)), int(m.group(3)), m.group(4), int(m.group(5)))
    return rows


class ConsoleTable(unittest.TestCase):
    """The end of a run shows both sides: what the sender sent and the receiver received, the
    goodput at the receiver and the frames it lost, per flow and direction and in total -- the
    same figures as the JSON document. Once the console said "Loss 0" for a UDP flood whose
    receiver lost 65 % of its frames (the active's own view only)."""

    def test_a_udp_flood_with_loss_on_the_console_and_in_the_document(self):
        with tempfile.TemporaryDirectory() as d, Passive(PORT + 20):
            r = run_active(f"127.0.0.1:{PORT + 20}", "-runtime=1", "--json=run.json", "-udp", "const0:const1400",
                           "-tcp", "const100:const500:const50:const300", cwd=d)
            with open(os.path.join(d, "run.json")) as f:
                doc = json.load(f)
            quiet = run_active(f"127.0.0.1:{PORT + 20}", "-runtime=0.3", "-quiet", "-tcp", "const10:const100", cwd=d)
        table = parse_table(r.stdout)
        expected = {}
        for flow in doc["flows"]:
            for key, label in (("active_to_passive", "A->P"), ("passive_to_active", "P->A")):
                x = flow[key]
                if x["transmitted"]["frames"] == 0 and x["received"]["frames"] == 0:
                    continue
                expected[(flow["flow_id"], label)] = (x["transmitted"]["frames"], x["received"]["frames"],
                                                      scaled(x["received"]["bit_rate"], 1000.0,
                                                             ["", "k", "M", "G", "T"], "bit/s"),
                                                      x["lost"]["frames"])
        totals = doc["totals"]
        for label, sender, receiver in (("A->P", "active", "passive"), ("P->A", "passive", "active")):
            expected[("total", label)] = (totals[sender]["transmitted"]["frames"],
                                          totals[receiver]["received"]["frames"],
                                          scaled(8 * totals[receiver]["received"]["byte_rate"], 1000.0,
                                                 ["", "k", "M", "G", "T"], "bit/s"),
                                          totals[receiver]["lost"]["frames"])
        self.assertEqual(table, expected, r.stdout)
        flood = doc["flows"][0]["active_to_passive"]
        self.assertGreater(flood["lost"]["frames"], 0, "the flood lost nothing: no loss to show")
        share = 100.0 * flood["lost"]["frames"] / flood["transmitted"]["frames"]
        self.assertIn(f"{flood['lost']['frames']} ({share:.2f} %)", r.stdout)
        self.assertTrue(all(len(line) <= 80 for line in r.stdout.splitlines()), r.stdout)
        self.assertNotIn("Flow #0", quiet.stdout + quiet.stderr)  # -quiet stays quiet


if __name__ == "__main__":
    main()
