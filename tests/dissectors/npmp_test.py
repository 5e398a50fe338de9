#!/usr/bin/env python3
"""Tests of the NPMP Wireshark dissectors (C plugin and Lua twin).

    npmp_test.py crafted  --impl c --plugin npmp.so | --impl lua --lua npmp.lua
    npmp_test.py parity   --plugin npmp.so --lua npmp.lua
    npmp_test.py robust   --plugin npmp.so --lua npmp.lua [--seeds N]
    npmp_test.py builtin  --plugin npmp.so
    npmp_test.py profile  --plugin npmp.so --profile-dir dissectors/profile
    npmp_test.py realcapture --netperfmeter BIN (--plugin npmp.so --lua npmp.lua)
    npmp_test.py realcapture-sctp --netperfmeter BIN (--plugin npmp.so --lua npmp.lua) [--sctp-udp-port P]
    npmp_test.py realcapture-kernel-sctp --netperfmeter BIN (--plugin npmp.so --lua npmp.lua)   (in a VM)
    npmp_test.py realcapture-quic --netperfmeter BIN --quic-built ON (--plugin npmp.so --lua npmp.lua)
    npmp_test.py install  --build-dir B --plugin npmp.so --plugin-dir D --datadir S

Everything asserts on `tshark -T fields` / `-T json` output.  The C plugin is
loaded from a temporary HOME by an unprivileged tshark (tshark as root
ignores personal plugin folders); the Lua twin through -X lua_script:.
A missing precondition prints the reason and exits 77 (ctest SKIP).
Python standard library only.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npmp_pcap as P  # noqa: E402

SKIP = 77


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(SKIP)


class Failure(Exception):
    pass


class Checker:
    def __init__(self, label):
        self.label = label
        self.failures = []
        self.passed = 0

    def check(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failures.append(what)
            print("  FAIL [%s] %s" % (self.label, what))

    def eq(self, got, want, what):
        self.check(got == want, "%s: got %r, want %r" % (what, got, want))

    def finish(self):
        print("[%s] %d checks passed, %d failed" % (self.label, self.passed, len(self.failures)))
        return not self.failures


# ------------------------------------------------------------- tshark ----
def make_world_dir():
    d = tempfile.mkdtemp(prefix="npmp-test-")
    os.chmod(d, 0o755)
    return d


def wireshark_abi():
    out = subprocess.run(["tshark", "-v"], capture_output=True, text=True).stdout
    m = re.search(r"TShark \(Wireshark\) (\d+)\.(\d+)", out)
    if not m:
        raise Failure("cannot parse tshark -v")
    return "%s.%s" % (m.group(1), m.group(2))


class Tshark:
    """Runs tshark with one implementation of the npmp dissector."""

    def __init__(self, impl, workdir, plugin=None, lua=None):
        self.impl = impl
        self.home = os.path.join(workdir, "home-" + impl)
        os.makedirs(self.home)
        self.extra = []
        self.prefix = []
        if impl == "c":
            pdir = os.path.join(self.home, ".local/lib/wireshark/plugins", wireshark_abi(), "epan")
            os.makedirs(pdir)
            shutil.copy(plugin, os.path.join(pdir, "npmp.so"))
            os.chmod(os.path.join(pdir, "npmp.so"), 0o644)
            if os.geteuid() == 0:
                if not shutil.which("setpriv"):
                    skip("running as root without setpriv: cannot run tshark unprivileged")
                self.prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        elif impl == "lua":
            dst = os.path.join(workdir, "npmp.lua")
            shutil.copy(lua, dst)
            os.chmod(dst, 0o644)
            self.extra = ["-X", "lua_script:" + dst]
        elif impl != "builtin":
            raise ValueError(impl)
        for root, dirs, files in os.walk(self.home):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        os.chmod(self.home, 0o755)

    def cmd(self, args, first=None):
        env = ["env", "HOME=" + self.home, "LC_ALL=C.UTF-8", "TZ=UTC"]
        head = list(first) if first else []   # -G must come first
        return self.prefix + env + ["tshark"] + head + self.extra + list(args)

    def run(self, args, first=None, check=True):
        r = subprocess.run(self.cmd(args, first), capture_output=True, text=True, cwd="/")
        if check and r.returncode != 0:
            raise Failure("tshark failed (%d): %s\n%s" % (r.returncode, " ".join(self.cmd(args, first)), r.stderr))
        return r

    def verify_loaded(self):
        out = self.run([], first=["-G", "plugins"]).stdout
        if self.impl == "c" and "npmp.so" not in out:
            raise Failure("C plugin not loaded by tshark:\n" + out)
        if self.impl == "lua":
            if "npmp.so" in out:
                skip("a C npmp plugin is installed system-wide; the Lua twin steps aside and cannot be tested")
            if "npmp.lua" not in out:
                raise Failure("npmp.lua not loaded:\n" + out)
        if self.impl == "builtin" and "npmp" in out:
            skip("an npmp plugin is installed system-wide; the built-in comparison needs a clean tshark")

    def ours(self):
        return [] if self.impl == "builtin" else ["--disable-protocol", "netperfmeter"]

    def fields(self, pcap, names, extra=()):
        """One dict per frame: field -> list of values (all occurrences)."""
        args = ["-n", "-r", pcap] + self.ours() + list(extra) + [
            "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=\x1f",
            "-e", "frame.number"]
        for n in names:
            args += ["-e", n]
        out = self.run(args).stdout
        frames = {}
        for line in out.splitlines():
            cols = line.split("\t")
            if len(cols) != len(names) + 1:
                raise Failure("unexpected tshark line: %r" % line)
            frames[int(cols[0])] = {n: (c.split("\x1f") if c != "" else []) for n, c in zip(names, cols[1:])}
        return frames

    def messages(self, pcap, proto, extra=()):
        """One list per frame of flattened message dicts (from -T json)."""
        args = ["-n", "-r", pcap] + self.ours() + list(extra) + [
            "-T", "json", "--no-duplicate-keys", "-J", "frame " + proto]
        data = json.loads(self.run(args).stdout or "[]")
        res = {}
        for pkt in data:
            layers = pkt["_source"]["layers"]
            num = int(layers["frame"]["frame.number"][0] if isinstance(layers["frame"]["frame.number"], list)
                      else layers["frame"]["frame.number"])
            msgs = layers.get(proto, [])
            if isinstance(msgs, dict):
                msgs = [msgs]
            res[num] = [flatten(m) for m in msgs]
        return res


def flatten(obj, out=None):
    out = {} if out is None else out
    for k, v in obj.items():
        if isinstance(v, dict):
            flatten(v, out)
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for x in v:
                flatten(x, out)
        else:
            vals = v if isinstance(v, list) else [v]
            out.setdefault(k, []).extend(vals)
    return out


def num(s):
    return int(s, 0)


# ------------------------------------------------------ crafted cases ----
NPMP_FIELDS = [
    "npmp.type", "npmp.flags", "npmp.length", "npmp.flowid", "npmp.measurementid", "npmp.streamid",
    "npmp.status", "npmp.protocol", "npmp.description", "npmp.ordered", "npmp.ordered_fraction",
    "npmp.reliable", "npmp.retranstrials.is_time", "npmp.retranstrials.value", "npmp.framerate",
    "npmp.framesize", "npmp.framerate_rng", "npmp.framesize_rng", "npmp.rcvbuf", "npmp.sndbuf",
    "npmp.maxmsgsize", "npmp.cmt", "npmp.ccid", "npmp.cc", "npmp.onoffevents", "npmp.onoff.rng",
    "npmp.onoff.flags.reltime", "npmp.onoff.value", "npmp.magic", "npmp.frameid", "npmp.seqnumber",
    "npmp.byteseqnumber", "npmp.timestamp", "npmp.payload", "npmp.results.data",
    "npmp.auth.nonce", "npmp.auth.mac", "npmp.addflow.flags.nrsack", "npmp.addflow.flags.bufsplit",
    "npmp.addflow.flags.sctpcc", "npmp.sctp.rtomin", "npmp.sctp.dac", "npmp.ndiffports",
    "npmp.runtime", "npmp.addflow.sctp_mechanisms", "npmp.addflow.sctp_mechanisms.smartfr",
    "npmp.addflow.sctp_mechanisms.reschedule", "npmp.addflow.seed",
    "npmp.addflow.flags.debug", "npmp.addflow.flags.nodelay", "npmp.addflow.flags.repeatonoff",
    "npmp.identify.flags.compress_vectors", "npmp.data.flags.frame_begin", "npmp.data.flags.frame_end",
    "npmp.start.flags.compress_vectors", "npmp.start.flags.compress_scalars",
    "npmp.start.flags.no_vectors", "npmp.start.flags.no_scalars", "npmp.results.flags.eof",
    "npmp.flow.description", "npmp.flow.protocol", "npmp.flow.addflow_in", "npmp.flow.identify_in",
    "npmp.direction", "npmp.seq.expected", "npmp.seq.lost", "npmp.seq.reordered",
    "npmp.expert.unknown_type", "npmp.expert.length_mismatch", "npmp.expert.truncated",
    "npmp.expert.bad_magic", "npmp.expert.unknown_flow", "npmp.expert.seq_lost",
    "npmp.expert.seq_reordered", "_ws.expert.message", "_ws.malformed", "tcp.reassembled_in",
    "sctp.data_payload_proto_id",
]

MEAS = "0x%016x" % P.MEAS
MEAS2 = "0x%016x" % P.MEAS2


def npmp_experts(fr):
    return [f for f in fr if f.startswith("npmp.expert.") and fr[f]]


def check_tcp(c, ts, pcap):
    F = ts.fields(pcap, NPMP_FIELDS)
    c.eq(len(F), 38, "tcp.pcap frame count")
    malformed = [n for n, fr in F.items() if fr["_ws.malformed"]]
    c.eq(malformed, [], "tcp.pcap: frames with _ws.malformed")

    f = F[1]  # ADD_FLOW with two on/off events
    c.eq(f["npmp.type"], ["2"], "F1 type")
    c.eq(num(f["npmp.flags"][0]), 0x06, "F1 flags")
    c.eq((f["npmp.addflow.flags.debug"], f["npmp.addflow.flags.nodelay"], f["npmp.addflow.flags.repeatonoff"]),
         (["0"], ["1"], ["1"]), "F1 flag bits")
    c.eq(f["npmp.length"], ["266"], "F1 length (194 + 2*36)")
    c.eq(f["npmp.flowid"], ["0"], "F1 flow")
    c.eq(f["npmp.measurementid"], [MEAS], "F1 measurement")
    c.eq(f["npmp.protocol"], ["6"], "F1 protocol (u16 LE)")
    c.eq(f["npmp.description"], ["tcp flow"], "F1 description")
    c.eq([float(x) for x in f["npmp.framerate"]], [10.0, 0, 0, 0], "F1 frame rate doubles")
    c.eq([float(x) for x in f["npmp.framesize"]], [1000.0, 0, 0, 0], "F1 frame size doubles")
    c.eq((f["npmp.framerate_rng"], f["npmp.framesize_rng"]), (["0"], ["2"]), "F1 RNG ids")
    c.eq((f["npmp.retranstrials.is_time"], f["npmp.retranstrials.value"]), (["1"], ["250"]), "F1 retrans")
    c.eq((f["npmp.rcvbuf"], f["npmp.sndbuf"], f["npmp.maxmsgsize"]), (["233016"], ["233016"], ["16000"]), "F1 bufs")
    c.eq(f["npmp.cc"], ["cubic"], "F1 congestion control")
    c.eq(f["npmp.onoffevents"], ["2"], "F1 on/off count")
    c.eq(f["npmp.onoff.rng"], ["0", "2"], "F1 on/off RNGs")
    c.eq(f["npmp.onoff.flags.reltime"], ["0", "1"], "F1 on/off flags")
    c.eq([float(x) for x in f["npmp.onoff.value"]], [1.0, 0, 0, 0, 2.5, 0, 0, 0], "F1 on/off values")
    c.eq(npmp_experts(f), [], "F1 experts")
    c.eq(f["npmp.flow.description"], ["tcp flow"], "F1 generated description")

    f = F[2]
    c.eq((f["npmp.type"], f["npmp.status"], f["npmp.flowid"]), (["1"], ["0"], ["0"]), "F2 ACK")

    f = F[3]  # two messages in one TCP segment
    c.eq(f["npmp.type"], ["4", "5"], "F3 IDENTIFY+DATA in one segment")
    c.eq(f["npmp.length"], ["26", "100"], "F3 lengths")
    c.eq(f["npmp.magic"], ["0x4bcdf3aa303c6774"], "F3 magic")
    c.eq(f["npmp.flowid"], ["0", "0"], "F3 flows")
    c.eq(f["npmp.measurementid"], [MEAS, MEAS], "F3 measurements")
    c.eq(f["npmp.seqnumber"], ["0"], "F3 seq")
    c.eq(f["npmp.flow.addflow_in"], ["1", "1"], "F3 linked to ADD_FLOW")
    c.eq(f["npmp.flow.identify_in"], ["3"], "F3 DATA linked to IDENTIFY")
    c.eq(f["npmp.flow.description"], ["tcp flow", "tcp flow"], "F3 description")
    c.eq(f["npmp.flow.protocol"], ["6", "6"], "F3 protocol")
    c.eq(npmp_experts(f), [], "F3 experts")

    f = F[5]
    c.eq((f["npmp.type"], f["npmp.measurementid"]), (["6"], [MEAS]), "F5 START")
    c.eq((f["npmp.start.flags.compress_vectors"], f["npmp.start.flags.compress_scalars"],
          f["npmp.start.flags.no_vectors"], f["npmp.start.flags.no_scalars"]),
         (["1"], ["0"], ["1"], ["0"]), "F5 START flags")

    # one message split over three segments
    F2 = ts.fields(pcap, NPMP_FIELDS, ["-2"])
    for n in (7, 8):
        c.eq(F[n]["npmp.type"], [], "F%d no NPMP before reassembly" % n)
        c.eq(F2[n]["tcp.reassembled_in"], ["9"], "F%d reassembled in 9 (two passes)" % n)
    f = F[9]
    c.eq((f["npmp.type"], f["npmp.length"], f["npmp.seqnumber"]), (["5"], ["1048"], ["1"]), "F9 reassembled DATA")
    c.eq(len(f["npmp.payload"][0].replace(":", "")) // 2, 1000, "F9 payload length")
    c.eq(f["npmp.byteseqnumber"], ["1048"], "F9 byte seq")
    c.eq(npmp_experts(f), [], "F9 experts")

    f = F[10]  # seq 2 missing
    c.eq((f["npmp.seqnumber"], f["npmp.seq.expected"], f["npmp.seq.lost"]), (["3"], ["2"], ["1"]), "F10 gap")
    c.check(f["npmp.expert.seq_lost"] != [], "F10 expert seq_lost")
    c.check(any("1 message(s) missing before SeqNumber 3" in m for m in f["_ws.expert.message"]), "F10 expert text")
    f = F[11]  # late seq 2
    c.eq((f["npmp.seqnumber"], f["npmp.seq.reordered"]), (["2"], ["1"]), "F11 reordered")
    c.check(f["npmp.expert.seq_reordered"] != [], "F11 expert seq_reordered")
    c.eq(f["npmp.seq.lost"], [], "F11 not lost")
    f = F[12]  # passive -> active direction has its own sequence space
    c.eq((f["npmp.direction"], f["npmp.seqnumber"], f["npmp.seq.expected"]), (["1"], ["0"], ["0"]), "F12 P->A")
    c.eq(npmp_experts(f), [], "F12 experts")
    for n in (3, 9, 10, 11):
        c.eq(F[n]["npmp.direction"], ["0"], "F%d A->P" % n)

    f = F[13]
    c.eq((f["npmp.type"], f["npmp.protocol"], f["npmp.description"], f["npmp.onoffevents"]),
         (["2"], ["17"], ["udp flow"], ["0"]), "F13 ADD_FLOW UDP")
    f = F[15]
    c.eq((f["npmp.type"], f["npmp.flowid"], f["npmp.flow.addflow_in"]), (["4"], ["1"], ["13"]), "F15 IDENTIFY/UDP")
    f = F[17]
    c.eq((f["npmp.type"], f["npmp.flowid"], f["npmp.flow.description"], f["npmp.flow.protocol"],
          f["npmp.flow.identify_in"]), (["5"], ["1"], ["udp flow"], ["17"], ["15"]), "F17 DATA/UDP linked")

    f = F[18]  # DATA on an unknown flow
    c.eq((f["npmp.type"], f["npmp.flowid"], f["npmp.measurementid"]), (["5"], ["7"], [MEAS2]), "F18 unknown flow DATA")
    c.check(f["npmp.expert.unknown_flow"] != [], "F18 expert unknown_flow")
    c.eq(f["npmp.flow.description"], [], "F18 no description")
    c.eq(f["npmp.seq.lost"], [], "F18 first message of an unknown flow is not a gap")

    for n in (19, 20, 21, 28, 31, 32, 33):  # random bytes and ordinary traffic are never claimed
        c.eq(F[n]["npmp.type"], [], "F%d random bytes not NPMP" % n)
    f = F[22]  # heuristics on a non-default port
    c.eq((f["npmp.type"], f["npmp.flowid"]), (["4", "5"], ["2", "2"]), "F22 heuristic TCP")
    c.check(f["npmp.expert.unknown_flow"] != [], "F22 unknown flow")

    c.eq((F[23]["npmp.type"], F[23]["npmp.measurementid"]), (["7"], [MEAS]), "F23 STOP")
    f = F[25]
    c.eq((f["npmp.type"], f["npmp.length"], f["npmp.results.flags.eof"]),
         (["8", "8"], ["104", "4"], ["0", "1"]), "F25 two RESULTS in one segment")
    c.eq(f["npmp.results.data"], ["".join("%02x" % b for b in range(100))], "F25 results data")
    c.eq((F[26]["npmp.type"], F[26]["npmp.flowid"]), (["3"], ["0"]), "F26 REMOVE_FLOW")

    def hexrange(a, b):
        return "".join("%02x" % i for i in range(a, b))
    f = F[34]
    c.eq((f["npmp.type"], f["npmp.length"], f["npmp.auth.nonce"], f["npmp.auth.mac"]),
         (["9"], ["36"], [hexrange(0, 32)], []), "F34 AUTH_HELLO")
    f = F[35]
    c.eq((f["npmp.type"], f["npmp.length"], f["npmp.auth.nonce"], f["npmp.auth.mac"]),
         (["10"], ["68"], [hexrange(32, 64)], [hexrange(64, 96)]), "F35 AUTH_CHALLENGE")
    f = F[36]
    c.eq((f["npmp.type"], f["npmp.length"], f["npmp.auth.nonce"], f["npmp.auth.mac"]),
         (["11"], ["36"], [], [hexrange(96, 128)]), "F36 AUTH_RESPONSE")
    for n in (34, 35, 36):
        c.eq([e for e in npmp_experts(F[n]) if e != "npmp.expert.unknown_flow"], [], "F%d no expert info" % n)
    c.eq((F[37]["npmp.type"], F[37]["npmp.status"]), (["1"], ["3"]), "F37 ACK authentication required")
    info = ts.run(["-n", "-r", pcap] + ts.ours()
                  + ["-Y", "frame.number == 37", "-T", "fields", "-e", "_ws.col.Info"]).stdout
    c.check("status=Authentication required" in info, "F37 info column names the status: %r" % info)
    f = F[38]  # ADD_FLOW with the CMT-SCTP tuning bits, claimed on the TCP control port
    c.eq((f["npmp.type"], f["npmp.cmt"], f["npmp.addflow.flags.nrsack"], f["npmp.addflow.flags.bufsplit"],
          f["npmp.addflow.flags.sctpcc"], f["npmp.addflow.flags.debug"], f["npmp.sctp.rtomin"], f["npmp.sctp.dac"],
          f["npmp.ndiffports"]),
         (["2"], ["3"], ["1"], ["3"], ["2"], ["0"], ["300"], ["1"], [str(300 | 0x8000)]), "F38 ADD_FLOW tuning bits")
    c.eq((f["npmp.runtime"], f["npmp.addflow.sctp_mechanisms"], f["npmp.addflow.sctp_mechanisms.smartfr"],
          f["npmp.addflow.sctp_mechanisms.reschedule"], f["npmp.addflow.seed"]),
         (["30000"], ["0x0000000a"], ["1"], ["1"], [str(P.ADDFLOW_SEED)]), "F38 ADD_FLOW runtime, mechanisms, seed")
    c.eq(npmp_experts(F[38]), [], "F38 no expert info")

    # Decode-As and port preferences
    c.eq((F[29]["npmp.type"], F[30]["npmp.type"]), ([], []), "F29/F30 not claimed without Decode-As")
    D = ts.fields(pcap, ["npmp.type", "npmp.results.flags.eof"],
                  ["-d", "tcp.port==15001,npmp", "-d", "udp.port==15002,npmp"])
    c.eq((D[29]["npmp.type"], D[30]["npmp.type"], D[30]["npmp.results.flags.eof"]),
         (["7"], ["8"], ["1"]), "Decode-As tcp.port/udp.port")
    D = ts.fields(pcap, ["npmp.type"], ["-o", "npmp.tcp_ports:15001", "-o", "npmp.udp_ports:15002"])
    c.eq((D[29]["npmp.type"], D[30]["npmp.type"]), (["7"], ["8"]), "port preferences")
    D = ts.fields(pcap, ["npmp.type"], ["-o", "npmp.tcp_ports:15001", "--disable-heuristic", "npmp_tcp"])
    c.eq((D[1]["npmp.type"], D[23]["npmp.type"], D[29]["npmp.type"]), ([], [], ["7"]),
         "port preference replaced the default range (9001 no longer NPMP)")
    D = ts.fields(pcap, ["npmp.type"], ["--disable-heuristic", "npmp_tcp", "--disable-heuristic", "npmp_udp"])
    c.eq((D[22]["npmp.type"], D[3]["npmp.type"]), ([], ["4", "5"]), "heuristics can be disabled (ports stay)")

    # Two passes give the same analysis (tcp.reassembled_in is only known in pass 2)
    for n in F:
        a = {k: v for k, v in F[n].items() if k != "tcp.reassembled_in"}
        b = {k: v for k, v in F2[n].items() if k != "tcp.reassembled_in"}
        c.check(a == b, "F%d single pass == two passes: %r" % (n, {k: (a[k], b[k]) for k in a if a[k] != b[k]}))

    # Statistics tap
    out = ts.run(["-n", "-q", "-r", pcap] + ts.ours() + ["-z", "npmp,stat"]).stdout
    stats = parse_stat(out)
    c.eq(stats["types"].get("Acknowledge"), (8, 192), "stat Acknowledge")
    c.eq(stats["types"].get("Auth Hello"), (1, 36), "stat Auth Hello")
    c.eq(stats["types"].get("Auth Challenge"), (1, 68), "stat Auth Challenge")
    c.eq(stats["types"].get("Auth Response"), (1, 36), "stat Auth Response")
    c.eq(stats["types"].get("Add Flow"), (3, 654), "stat Add Flow")
    c.eq(stats["types"].get("Identify Flow"), (3, 78), "stat Identify Flow")
    c.eq(stats["types"].get("Data"), (8, 100 + 1048 + 148 + 148 + 68 + 58 + 58 + 48), "stat Data")
    c.eq(stats["types"].get("Results"), (2, 108), "stat Results")
    c.eq(stats["flows"].get((MEAS, 0, 0, "A->P")), (4, 1444, 4), "stat flow 0 A->P")
    c.eq(stats["flows"].get((MEAS, 0, 0, "P->A")), (1, 68, 1), "stat flow 0 P->A")
    c.eq(stats["flows"].get((MEAS, 1, 0, "A->P")), (1, 58, 1), "stat flow 1")
    c.eq(stats["flows"].get((MEAS2, 7, 0, "A->P")), (1, 58, 1), "stat flow 7 (unknown)")
    c.eq(len(stats["flows"]), 5, "stat flow rows")


def parse_stat(out):
    types, flows = {}, {}
    section = None
    for line in out.splitlines():
        if line.startswith("Message types:"):
            section = "t"
        elif line.startswith("Data flows:"):
            section = "f"
        elif section == "t" and line.startswith("  ") and not line.strip().startswith("Type "):
            m = re.match(r"\s+(.+?)\s+(\d+)\s+(\d+)$", line)
            if m:
                types[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        elif section == "f" and line.startswith("  0x"):
            p = line.split()
            flows[(p[0], int(p[1]), int(p[2]), p[3])] = (int(p[4]), int(p[5]), int(p[6]))
    return {"types": types, "flows": flows}


def check_sctp(c, ts, pcap):
    F = ts.fields(pcap, NPMP_FIELDS)
    c.eq(len(F), 21, "sctp.pcap frame count")
    # expert infos of group Malformed set _ws.malformed; no dissector exception anywhere
    c.eq([n for n, fr in F.items() if fr["_ws.malformed"]], [15, 16, 18], "sctp.pcap: _ws.malformed frames")
    c.eq([n for n, fr in F.items() if any("Exception" in m for m in fr["_ws.expert.message"])], [],
         "sctp.pcap: no exceptions (truncated message handled)")
    for n in range(1, 22):
        c.check(F[n]["npmp.type"] != [], "sctp F%d decoded as NPMP" % n)
    f = F[21]  # strings that fill their fields (no NUL)
    c.eq((f["npmp.description"], f["npmp.cc"], f["npmp.flow.description"], f["npmp.ordered"]),
         ([P.FULL_DESCRIPTION.decode()], [P.FULL_CC.decode()], [P.FULL_DESCRIPTION.decode()], ["0xffffffff"]),
         "S21 32-byte description and 16-byte CC without NUL")
    c.eq(npmp_experts(f), [], "S21 experts")
    f = F[1]  # ADD_FLOW with on/off events over SCTP
    c.eq((f["npmp.length"], f["npmp.protocol"], f["npmp.description"]), (["266"], ["132"], ["sctp flow"]),
         "S1 ADD_FLOW")
    c.eq((num(f["npmp.ordered"][0]), num(f["npmp.reliable"][0])), (0x7FFFFFFF, 0x80000000), "S1 ordered/reliable")
    c.check(abs(float(f["npmp.ordered_fraction"][0]) - 0.5) < 1e-6, "S1 ordered fraction shown as number")
    c.eq((f["npmp.addflow.flags.debug"], f["npmp.cmt"]), (["1"], ["1"]), "S1 debug flag, CMT")
    c.eq((f["npmp.retranstrials.is_time"], f["npmp.retranstrials.value"]), (["1"], [str(0x7FFFFFFF)]),
         "S1 retrans default")
    c.eq(f["npmp.onoff.rng"], ["1", "3"], "S1 on/off RNGs")
    c.eq(f["npmp.onoff.flags.reltime"], ["1", "0"], "S1 on/off flags")
    c.eq([float(x) for x in f["npmp.onoff.value"]], [3.0, 0, 0, 0, 1.0, 2.0, 0, 0], "S1 on/off values")
    c.eq(npmp_experts(f), [], "S1 experts")
    c.eq((F[3]["npmp.type"], F[3]["npmp.identify.flags.compress_vectors"]), (["4"], ["1"]), "S3 IDENTIFY flags")
    f = F[5]
    c.eq((f["npmp.start.flags.compress_vectors"], f["npmp.start.flags.compress_scalars"],
          f["npmp.start.flags.no_vectors"], f["npmp.start.flags.no_scalars"]),
         (["0"], ["1"], ["0"], ["1"]), "S5 START flags")
    c.eq((F[7]["npmp.type"], F[7]["sctp.data_payload_proto_id"], F[7]["npmp.data.flags.frame_begin"],
          F[7]["npmp.data.flags.frame_end"]), (["5"], ["37"], ["1"], ["0"]), "S7 DATA ppid 37")
    c.eq((F[8]["npmp.type"], F[8]["sctp.data_payload_proto_id"], F[8]["npmp.seqnumber"]),
         (["5"], [str(0x29097606)], ["1"]), "S8 DATA legacy ppid")
    c.eq(F[8]["npmp.flow.identify_in"], ["3"], "S8 linked to IDENTIFY")
    c.eq((F[12]["npmp.results.flags.eof"], F[12]["npmp.length"]), (["1"], ["4"]), "S12 empty EOF RESULTS")
    c.eq((F[14]["npmp.type"], F[14]["npmp.status"]), (["1"], ["1"]), "S14 ACK status error")

    f = F[15]  # truncated ADD_FLOW
    c.eq((f["npmp.type"], f["npmp.length"], f["npmp.flowid"], f["npmp.description"]),
         (["2"], ["194"], ["5"], ["short"]), "S15 truncated ADD_FLOW fields present")
    c.check(f["npmp.expert.truncated"] != [], "S15 expert truncated")
    c.check(any("Length 194, only 120 bytes present" in m for m in f["_ws.expert.message"]), "S15 expert text")
    c.eq(len(f["npmp.framesize"]), 3, "S15 only the fields that fit (3 frame sizes)")
    c.eq(f["npmp.onoffevents"], [], "S15 no on/off count")
    f = F[16]
    c.check(f["npmp.expert.length_mismatch"] != [], "S16 expert length mismatch")
    c.check(any("Length 194 does not match the expected 266" in m for m in f["_ws.expert.message"]), "S16 text")
    c.check(F[17]["npmp.expert.bad_magic"] != [], "S17 expert bad magic")
    c.eq(F[17]["npmp.flow.addflow_in"], ["1"], "S17 flow still linked")
    c.check(F[18]["npmp.expert.unknown_type"] != [], "S18 expert unknown type")
    c.eq(F[18]["npmp.type"], ["200"], "S18 type")
    c.eq(F[19]["npmp.type"], ["6", "5"], "S19 bundled START+DATA")
    c.eq(F[19]["sctp.data_payload_proto_id"], ["36", "37"], "S19 ppids")
    c.check(F[20]["npmp.expert.unknown_flow"] != [], "S20 unknown flow")
    for n in range(1, 15):
        c.eq(npmp_experts(F[n]), [], "S%d no expert" % n)


def check_dccp(c, ts, pcap):
    F = ts.fields(pcap, ["npmp.type", "npmp.flowid", "npmp.seqnumber", "_ws.malformed"])
    c.eq((F[1]["npmp.type"], F[2]["npmp.type"], F[2]["npmp.flowid"]), (["4"], ["5"], ["3"]), "DCCP heuristic")
    c.eq(F[3]["npmp.type"], [], "DCCP random bytes not claimed")


WARMUP_FIELDS = ["npmp.type", "npmp.start.warmup", "npmp.padding32", "npmp.measurementid",
                 "npmp.start.flags.compress_vectors", "npmp.start.flags.no_vectors", "npmp.expert.length_mismatch",
                 "_ws.malformed"]


def check_warmup(c, ts, pcap, tcp_pcap, sctp_pcap):
    """START carries this project's warm-up (u32 ms, big-endian) at offset 4, where the reference
    has Padding (0); STOP keeps its padding."""
    F = ts.fields(pcap, WARMUP_FIELDS)
    c.eq(len(F), 5, "warmup.pcap frame count")
    f = F[1]
    c.eq((f["npmp.type"], f["npmp.start.warmup"], f["npmp.padding32"], f["npmp.measurementid"]),
         (["6"], [str(P.WARMUP_MS)], [], [MEAS]), "W1 START warm-up 2500 ms")
    c.eq((f["npmp.start.flags.compress_vectors"], f["npmp.start.flags.no_vectors"]), (["1"], ["1"]),
         "W1 START flags unchanged")
    c.eq((F[3]["npmp.type"], F[3]["npmp.start.warmup"], F[3]["npmp.padding32"]), (["7"], [], ["0x00000000"]),
         "W3 STOP keeps its padding")
    c.eq((F[4]["npmp.type"], F[4]["npmp.start.warmup"], F[4]["npmp.measurementid"]), (["6"], ["0"], [MEAS2]),
         "W4 START without warm-up")
    c.eq((F[5]["npmp.type"], F[5]["npmp.start.warmup"]), (["6"], [str(P.WARMUP_BIG_MS)]), "W5 SCTP START u32 warm-up")
    for n, fr in F.items():
        c.eq((fr["_ws.malformed"], fr["npmp.expert.length_mismatch"]), ([], []), "W%d well-formed" % n)
    D = ts.fields(pcap, ["npmp.type"], ["-Y", "npmp.start.warmup == %d" % P.WARMUP_MS])
    c.eq(sorted(D), [1], "display filter npmp.start.warmup == 2500")
    text = ts.run(["-n", "-r", pcap] + ts.ours() + ["-V"]).stdout
    c.eq(text.count("Warm-up: %d ms" % P.WARMUP_MS), 1, "label 'Warm-up: 2500 ms'")
    c.eq(text.count("Warm-up: %d ms" % P.WARMUP_BIG_MS), 1, "label 'Warm-up: 100000 ms'")
    c.eq(text.count("Warm-up: none"), 1, "label 'Warm-up: none' for 0")
    # the STARTs of the other crafted captures carry no warm-up
    for label, path, frames in (("tcp", tcp_pcap, [5]), ("sctp", sctp_pcap, [5, 19])):
        G = ts.fields(path, ["npmp.start.warmup", "npmp.padding32"], ["-Y", "npmp.type == 6"])
        c.eq(sorted(G), frames, "%s: START frames" % label)
        for n in frames:
            c.eq((G[n]["npmp.start.warmup"], G[n]["npmp.padding32"]), (["0"], []),
                 "%s F%d START warm-up 0" % (label, n))


def cmd_crafted(args):
    work = make_world_dir()
    try:
        P.main(["npmp_pcap.py", work])
        ts = Tshark(args.impl, work, plugin=args.plugin, lua=args.lua)
        ts.verify_loaded()
        c = Checker("crafted-" + args.impl)
        check_tcp(c, ts, os.path.join(work, "tcp.pcap"))
        check_sctp(c, ts, os.path.join(work, "sctp.pcap"))
        check_dccp(c, ts, os.path.join(work, "dccp.pcap"))
        check_warmup(c, ts, os.path.join(work, "warmup.pcap"), os.path.join(work, "tcp.pcap"),
                     os.path.join(work, "sctp.pcap"))
        return 0 if c.finish() else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------- parity ----
def all_npmp_fields(ts):
    out = ts.run([], first=["-G", "fields"]).stdout
    return [line.split("\t")[2] for line in out.splitlines()
            if line.startswith("F\t") and line.split("\t")[2].startswith("npmp.")]


def cmd_parity(args):
    """C plugin and Lua twin produce identical output."""
    work = make_world_dir()
    try:
        P.main(["npmp_pcap.py", work])
        tc = Tshark("c", work, plugin=args.plugin)
        tl = Tshark("lua", work, lua=args.lua)
        tc.verify_loaded()
        tl.verify_loaded()
        c = Checker("parity")
        for g in ("fields", "values", "protocols", "heuristic-decodes"):
            a = sorted(line for line in tc.run([], first=["-G", g]).stdout.splitlines() if "npmp" in line)
            b = sorted(line for line in tl.run([], first=["-G", g]).stdout.splitlines() if "npmp" in line)
            c.check(a != [], "-G %s lists npmp" % g)
            c.eq(b, a, "-G %s identical" % g)
        # Both installed: the Lua twin steps aside without an error.
        r = tc.run(["-X", "lua_script:" + os.path.join(work, "npmp.lua"), "-n", "-r",
                    os.path.join(work, "tcp.pcap")] + tc.ours(), check=False)
        c.check(r.returncode == 0 and "Lua" not in r.stderr and "NPMP" in r.stdout,
                "C plugin + npmp.lua together: rc %d, %r" % (r.returncode, r.stderr[-500:]))
        names = all_npmp_fields(tc) + ["_ws.col.Info", "_ws.col.Protocol", "_ws.expert.message",
                                       "_ws.expert.severity", "_ws.expert.group", "_ws.malformed"]
        for pc in ("tcp", "sctp", "dccp", "warmup"):
            pcap = os.path.join(work, pc + ".pcap")
            for extra in ([], ["-2"], ["-d", "tcp.port==15001,npmp", "-o", "npmp.udp_ports:15002"]):
                a = tc.fields(pcap, names, extra)
                b = tl.fields(pcap, names, extra)
                for n in sorted(set(a) | set(b)):
                    if a.get(n) != b.get(n):
                        diff = {k: (a.get(n, {}).get(k), b.get(n, {}).get(k)) for k in names
                                if a.get(n, {}).get(k) != b.get(n, {}).get(k)}
                        c.check(False, "%s %s frame %d differs (C, Lua): %r" % (pc, extra, n, diff))
                        break
                else:
                    c.check(True, "")
            za = tc.run(["-n", "-q", "-r", pcap] + tc.ours() + ["-z", "npmp,stat"]).stdout
            zb = tl.run(["-n", "-q", "-r", pcap] + tl.ours() + ["-z", "npmp,stat"]).stdout
            c.check("NPMP Statistics" in za, "%s: -z npmp,stat output" % pc)
            c.eq(zb, za, "%s: -z npmp,stat identical" % pc)
        return 0 if c.finish() else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------- robust ----
def cmd_robust(args):
    """Randomly corrupted crafted pcaps (editcap -E, fixed seeds): no dissector
    bug, no Lua error, tshark succeeds, and C and Lua still agree."""
    if not shutil.which("editcap"):
        skip("editcap not installed")
    work = make_world_dir()
    try:
        P.main(["npmp_pcap.py", work])
        tc = Tshark("c", work, plugin=args.plugin)
        tl = Tshark("lua", work, lua=args.lua)
        tc.verify_loaded()
        tl.verify_loaded()
        c = Checker("robust")
        names = all_npmp_fields(tc) + ["_ws.expert.message", "_ws.malformed"]
        prefs = ["-o", "npmp.udp_ports:8999-9001,15002", "-o", "npmp.tcp_ports:8999-9001,15001"]
        for pc in ("tcp", "sctp", "dccp", "warmup"):
            for seed in range(1, args.seeds + 1):
                src = os.path.join(work, pc + ".pcap")
                dst = os.path.join(work, "%s-%d.pcap" % (pc, seed))
                subprocess.run(["editcap", "--seed", str(seed), "-E", "0.05", src, dst],
                               check=True, capture_output=True)
                os.chmod(dst, 0o644)
                for ts in (tc, tl):
                    r = ts.run(["-n", "-r", dst, "-V"] + ts.ours() + prefs, check=False)
                    bad = [line for line in (r.stdout + r.stderr).splitlines()
                           if "Dissector bug" in line or "Lua Error" in line]
                    c.check(r.returncode == 0 and not bad,
                            "%s %s: rc %d %r" % (ts.impl, os.path.basename(dst), r.returncode, bad[:3]))
                a = tc.fields(dst, names, prefs)
                b = tl.fields(dst, names, prefs)
                diff = [n for n in a if a[n] != b.get(n)]
                c.eq(diff, [], "%s: frames where C and Lua differ" % os.path.basename(dst))
        return 0 if c.finish() else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -------------------------------------------------------------- builtin ----
# Built-in field -> our field, for the message types where the 4.0 built-in is right.
BUILTIN_MAP = {
    "netperfmeter.message_type": "npmp.type",
    "netperfmeter.message_flags": "npmp.flags",
    "netperfmeter.message_length": "npmp.length",
}
for _t in ("acknowledge", "removeflow", "identifyflow", "data"):
    for _f in ("flowid", "measurementid", "streamid"):
        BUILTIN_MAP["netperfmeter.%s_%s" % (_t, _f)] = "npmp." + _f
BUILTIN_MAP.update({
    "netperfmeter.acknowledge_status": "npmp.status",
    "netperfmeter.identifyflow_magicnumber": "npmp.magic",
    "netperfmeter.dentifyflow_flags.compress_vectors": "npmp.identify.flags.compress_vectors",
    "netperfmeter.dentifyflow_flags.no_vectors": "npmp.identify.flags.no_vectors",
    "netperfmeter.data_padding": "npmp.padding",
    "netperfmeter.data_frameid": "npmp.frameid",
    "netperfmeter.data_packetseqnumber": "npmp.seqnumber",
    "netperfmeter.data_byteseqnumber": "npmp.byteseqnumber",
    "netperfmeter.data_timestamp": "npmp.timestamp_abs",
    "netperfmeter.data_payload": "npmp.payload",
    "netperfmeter.data_flags.frame_begin": "npmp.data.flags.frame_begin",
    "netperfmeter.data_flags.frame_end": "npmp.data.flags.frame_end",
    "netperfmeter.start_measurementid": "npmp.measurementid",
    "netperfmeter.start_flags.compress_vectors": "npmp.start.flags.compress_vectors",
    "netperfmeter.start_flags.compress_scalars": "npmp.start.flags.compress_scalars",
    "netperfmeter.start_flags.no_vectors": "npmp.start.flags.no_vectors",
    "netperfmeter.start_flags.no_scalars": "npmp.start.flags.no_scalars",
    "netperfmeter.stop_measurementid": "npmp.measurementid",
    "netperfmeter.results_data": "npmp.results.data",
    "netperfmeter.results_flags.eof": "npmp.results.flags.eof",
})
COMPARED_TYPES = {"1", "3", "4", "5", "6", "7", "8"}


def norm(v):
    try:
        return int(v, 0)
    except ValueError:
        return v


def compare_builtin(c, ours, builtin, label, prefix_ok, min_msgs=1):
    """ours/builtin: frame -> [message dicts]; compares every mapped field."""
    compared = 0
    for n, bmsgs in sorted(builtin.items()):
        if not bmsgs:
            continue
        omsgs = ours.get(n, [])
        if any("_ws.malformed" in m for m in bmsgs):
            continue
        btypes = [m.get("netperfmeter.message_type", [None])[0] for m in bmsgs]
        otypes = [m.get("npmp.type", [None])[0] for m in omsgs]
        if prefix_ok:  # the 4.0 built-in drops every message after the first in a TCP segment
            c.check(otypes[:len(btypes)] == btypes, "%s F%d types built-in %r are a prefix of ours %r"
                    % (label, n, btypes, otypes))
        else:
            c.eq(otypes, btypes, "%s F%d message types" % (label, n))
        for bm, om in zip(bmsgs, omsgs):
            if bm.get("netperfmeter.message_type", [None])[0] not in COMPARED_TYPES:
                continue
            for bf, vals in bm.items():
                of = BUILTIN_MAP.get(bf)
                if of is None:
                    continue
                c.eq([norm(v) for v in om.get(of, [])], [norm(v) for v in vals],
                     "%s F%d %s vs %s" % (label, n, of, bf))
            compared += 1
    c.check(compared >= min_msgs, "%s: compared %d messages (want >= %d)" % (label, compared, min_msgs))
    return compared


def cmd_builtin(args):
    work = make_world_dir()
    try:
        P.main(["npmp_pcap.py", work])
        tc = Tshark("c", work, plugin=args.plugin)
        tb = Tshark("builtin", work)
        tc.verify_loaded()
        tb.verify_loaded()
        c = Checker("builtin")
        sctp = os.path.join(work, "sctp.pcap")
        compare_builtin(c, tc.messages(sctp, "npmp"), tb.messages(sctp, "netperfmeter"), "sctp", False, 15)
        tcp = os.path.join(work, "tcp.pcap")
        compare_builtin(c, tc.messages(tcp, "npmp"), tb.messages(tcp, "netperfmeter"), "tcp", True, 5)
        return 0 if c.finish() else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -------------------------------------------------------------- profile ----
def cmd_profile(args):
    work = make_world_dir()
    try:
        P.main(["npmp_pcap.py", work])
        tc = Tshark("c", work, plugin=args.plugin)
        tc.verify_loaded()
        prof = os.path.join(tc.home, ".config/wireshark/profiles/NetPerfMeter")
        os.makedirs(prof)
        for f in ("colorfilters", "dfilters", "dfilter_buttons", "preferences"):
            shutil.copy(os.path.join(args.profile_dir, f), prof)
        for root, dirs, files in os.walk(os.path.join(tc.home, ".config")):
            os.chmod(root, 0o755)
            for f in files:
                os.chmod(os.path.join(root, f), 0o644)
        c = Checker("profile")
        pcap = os.path.join(work, "tcp.pcap")
        r = tc.run(["-C", "NetPerfMeter", "--color", "-n", "-r", pcap, "-T", "fields",
                    "-e", "frame.number", "-e", "frame.coloring_rule.name"])
        rules = dict(line.split("\t", 1) for line in r.stdout.splitlines())
        c.check("rror" not in r.stderr and "arning" not in r.stderr, "no warnings loading the profile: %r" % r.stderr)
        c.eq(rules.get("1"), "NPMP Add Flow", "colour rule ADD_FLOW")
        c.eq(rules.get("2"), "NPMP Acknowledge", "colour rule ACK")
        c.eq(rules.get("10"), "NPMP Lost/Reordered", "colour rule lost")
        c.eq(rules.get("17"), "NPMP Data UDP", "colour rule UDP data")
        c.eq(rules.get("22"), "NPMP Identify Flow", "colour rule IDENTIFY")
        prefs = tc.run([], first=["-G", "currentprefs", "-C", "NetPerfMeter"]).stdout
        c.check("tcp.reassemble_out_of_order: TRUE" in prefs, "profile preferences applied")
        # every display filter and button compiles and matches something
        filters = []
        with open(os.path.join(args.profile_dir, "dfilters")) as f:
            for line in f:
                m = re.match(r'"([^"]*)"\s+(.*)$', line.strip())
                if m:
                    filters.append((m.group(1), m.group(2)))
        with open(os.path.join(args.profile_dir, "dfilter_buttons")) as f:
            for line in f:
                m = re.match(r'"TRUE","([^"]*)","([^"]*)"', line.strip())
                if m:
                    filters.append(("button " + m.group(1), m.group(2)))
        c.check(len(filters) >= 8, "filters found")
        for name, flt in filters:
            r = tc.run(["-n", "-r", pcap, "-Y", flt], check=False)
            c.check(r.returncode == 0, "filter %s compiles: %s" % (name, r.stderr.strip()))
            if "error" not in name:
                c.check(r.stdout.strip() != "", "filter %s matches tcp.pcap" % name)
        return 0 if c.finish() else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -------------------------------------------------------------- install ----
def cmd_install(args):
    """cmake --install of the dissectors component puts every file in place."""
    work = make_world_dir()
    try:
        env = dict(os.environ, DESTDIR=os.path.join(work, "root"))
        r = subprocess.run(["cmake", "--install", args.build_dir, "--component", "dissectors"],
                           capture_output=True, text=True, env=env)
        c = Checker("install")
        c.eq(r.returncode, 0, "cmake --install: " + r.stdout[-2000:] + r.stderr[-2000:])
        root = os.path.join(work, "root")

        def inst(path):
            return os.path.join(root, path.lstrip("/"))
        share = os.path.join(args.datadir, "netperfmeter", "wireshark")
        c.check(os.path.isfile(inst(os.path.join(share, "npmp.lua"))), "npmp.lua installed under " + share)
        for f in ("colorfilters", "dfilters", "dfilter_buttons", "preferences"):
            c.check(os.path.isfile(inst(os.path.join(share, "profiles", "NetPerfMeter", f))), "profile file " + f)
        so = inst(os.path.join(args.plugin_dir, "npmp.so"))
        c.check(os.path.isfile(so), "npmp.so installed into %s" % args.plugin_dir)
        c.check(re.search(r"/wireshark/plugins/\d+\.\d+/epan$", args.plugin_dir) is not None,
                "plugin dir %s is a Wireshark epan plugin dir" % args.plugin_dir)
        return 0 if c.finish() else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------- realcapture ----
def cmd_realcapture(args):
    import npmp_realcapture
    return npmp_realcapture.main(args, Tshark, Checker, make_world_dir, skip)


def cmd_realcapture_sctp(args):
    import npmp_realcapture_sctp
    return npmp_realcapture_sctp.main(args, Tshark, Checker, make_world_dir, skip)


def cmd_realcapture_kernel_sctp(args):
    import npmp_realcapture_sctp
    return npmp_realcapture_sctp.main(args, Tshark, Checker, make_world_dir, skip, kernel=True)


def cmd_realcapture_quic(args):
    import npmp_realcapture_quic
    return npmp_realcapture_quic.main(args, Tshark, Checker, make_world_dir, skip)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["crafted", "parity", "robust", "builtin", "profile", "realcapture",
                                     "realcapture-sctp", "realcapture-kernel-sctp", "realcapture-quic", "install"])
    ap.add_argument("--impl", choices=["c", "lua"], default="c")
    ap.add_argument("--plugin")
    ap.add_argument("--lua")
    ap.add_argument("--profile-dir")
    ap.add_argument("--netperfmeter")
    ap.add_argument("--port", type=int, default=18100)
    ap.add_argument("--flows", help="realcapture: subset of tcp,udp,mptcp (default all)")
    ap.add_argument("--sctp-udp-port", type=int, default=18599,
                    help="realcapture-sctp(-quic): the passive's UDP port of userland SCTP (RFC 6951)")
    ap.add_argument("--quic-built", default="OFF", help="realcapture-quic: the build's NPM_QUIC_BUILT (ON or OFF)")
    ap.add_argument("--keep", help="copy the capture to this path")
    ap.add_argument("--build-dir")
    ap.add_argument("--seeds", type=int, default=6, help="robust: corrupted copies per pcap")
    ap.add_argument("--plugin-dir")
    ap.add_argument("--datadir")
    args = ap.parse_args()
    if not shutil.which("tshark") and args.mode != "install":
        skip("tshark is not installed")
    needs_plugin = (args.mode in ("parity", "robust", "builtin", "profile", "install")
                    or (args.mode == "crafted" and args.impl == "c"))
    if needs_plugin and (not args.plugin or not os.path.exists(args.plugin)):
        skip("C plugin not built (%s)" % args.plugin)
    try:
        return {"crafted": cmd_crafted, "parity": cmd_parity, "robust": cmd_robust, "builtin": cmd_builtin,
                "profile": cmd_profile, "realcapture": cmd_realcapture,
                "realcapture-sctp": cmd_realcapture_sctp, "realcapture-kernel-sctp": cmd_realcapture_kernel_sctp,
                "realcapture-quic": cmd_realcapture_quic,
                "install": cmd_install}[args.mode](args)
    except Failure as e:
        print("ERROR: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
