"""What a run really had, from the network and the stacks: a capture of its first seconds in the
passive's namespace (headers only), the congestion controls in force (ss), and the counters
of every queue, delay line and stack MIB before and after it. From these, the checks that a run
measured the configuration its study asks for; a run that fails one is marked invalid.

Evidence of a run, in its directory:
  capture.pcapng    the first seconds at the passive's interfaces, 256 bytes per packet
  evidence.json     what was seen per flow (NR-SACK, a_rwnd, windows, paths and subflows, CCs),
                    the checks and their verdict ("valid")
  counters.json     per path and direction the queue's counters (sent, drops, overlimits,
                    backlog) and the delay line's, and the nstat deltas of both hosts
"""

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import threading
import time

from . import tshark
from .study import CAPTURE_SECONDS, spec_options
from .errors import LabError

SNAPLEN = 256
NR_SACK, SACK, DATA, INIT = 16, 3, 0, 1


flow_options = spec_options  # the name=value options of a FLOWSPEC


def _on(value):
    return value.lower() in ("on", "1", "yes", "true")


# ------------------------------------------------------------------------------------ capture
class Capture:
    """dumpcap (tshark's capture engine, installed with it) in the passive's namespace on all its
    path interfaces for the first seconds of a run (CAPTURE_SECONDS, or what the study's
    `capture` says; it ends by itself, or with stop() when the run is shorter), headers only
    (SNAPLEN bytes of each packet); nothing when tshark is not installed. dumpcap captures once it
    names its output file ("File: ..."), not when it says "Capturing on": that line comes before
    the capture filter is set, and setting it drops what the sockets took until then (measured on
    two interfaces: the first 6-15 ms of traffic lost in 10 of 10 starts after "Capturing on", none
    after "File:"; at 100 Mbit/s 4 runs of 12 had missed their association's INIT). tshark itself
    would load every dissector first (about 0.4 s a run)."""

    def __init__(self, topo, path, seconds=CAPTURE_SECONDS):
        self.path = path
        self.proc = None
        self.interfaces = [topo.device("passive", i) for i in range(len(topo.paths))]
        if shutil.which("tshark") is None:
            return
        cmd = ["ip", "netns", "exec", topo.P, "dumpcap", "-q", "-s", str(SNAPLEN), "-a", f"duration:{seconds:g}",
               "-w", path, "-f", "tcp or udp"]
        for dev in self.interfaces:
            cmd += ["-i", dev]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if line.startswith("File:"):
                return
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise LabError("dumpcap did not start capturing in the passive's namespace")

    def stop(self):
        """Ends the capture now if it is still going (after a run shorter than the capture:
        waiting out its duration cost each short run over a second)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def available(self):
        return self.proc is not None and os.path.exists(self.path)


def _tshark(path, display_filter, fields, decode=()):
    return tshark.read_fields(path, display_filter, fields, decode, error=LabError)


def _ints(text):
    return [int(v, 0) for v in text.split(",") if v]


def data_tsns(payload_hex):
    """(verification tag, TSN) of each DATA chunk in the captured part of an SCTP packet (hex of
    the UDP payload: the common header, then chunks). The lab's captures keep the first SNAPLEN
    bytes, so a full-sized packet shows its first chunk's header only, which is where a DATA
    chunk's TSN is; tshark decodes no chunk of a truncated packet, hence this."""
    b = bytes.fromhex(payload_hex) if payload_hex else b""
    tsns, offset = [], 12
    vtag = int.from_bytes(b[4:8], "big") if len(b) >= 12 else None
    while offset + 4 <= len(b):
        kind, length = b[offset], int.from_bytes(b[offset + 2:offset + 4], "big")
        if kind == DATA and offset + 8 <= len(b):
            tsns.append((vtag, int.from_bytes(b[offset + 4:offset + 8], "big")))
        if length < 4:
            break
        offset += (length + 3) & ~3
    return tsns


SUPPORTED_EXTENSIONS = 0x8008  # the INIT/INIT-ACK parameter that lists the chunk types a side supports


def init_extensions(payload_hex):
    """(chunk type, {supported chunk types}) of an SCTP packet whose first chunk is an INIT (1) or
    an INIT-ACK (2), from the hex of the UDP payload: its Supported Extensions parameter (RFC 5061)
    as far as the capture kept the packet; the set is None when the parameter lies beyond the
    captured bytes (an INIT-ACK carries a state cookie of some hundred bytes: tshark decodes no
    chunk of the truncated packet), empty when the whole chunk was captured without it. (None,
    None) for other packets."""
    b = bytes.fromhex(payload_hex) if payload_hex else b""
    if len(b) < 12 + 20 or b[12] not in (INIT, 2):
        return None, None
    kind, end = b[12], 12 + int.from_bytes(b[14:16], "big")
    offset = 12 + 20  # the chunk header (4) and the fixed part (16)
    while offset + 4 <= min(end, len(b)):
        ptype, length = int.from_bytes(b[offset:offset + 2], "big"), int.from_bytes(b[offset + 2:offset + 4], "big")
        if length < 4:
            break
        if ptype == SUPPORTED_EXTENSIONS:
            if offset + length > len(b):
                return kind, None
            return kind, set(b[offset + 4:offset + length])
        offset += (length + 3) & ~3
    return kind, (set() if end <= len(b) else None)


# The CMT DAC bits of a SACK or NR-SACK chunk's flags: usrsctp's receiver puts there how many
# packets arrived since its last SACK (1 to 3; 4 wraps to 0) when the association uses CMT with DAC
# (sctp_output.c, sctp_send_sack: flags |= cmt_dac_pkts_rcvd << 6), and leaves them 0 otherwise.
# Wireshark 4.0 names no field for them (its SACK flags field is the nonce sum, bit 0): the lab
# reads them from sctp.chunk_flags.
DAC_BITS = 0xC0


def summarise_sctp(path, udp_port):
    """What the capture shows of the userland SCTP association(s) on `udp_port` (the passive's
    encapsulation port): NR-SACK offered and used, the passive's a_rwnd once data flows, the
    SACKs of each side and how many carry the CMT DAC bits, the path interfaces that carried
    DATA (packets and bytes), and the DATA chunks that arrived a second time (a TSN already
    received: the sender retransmitted a chunk that had not been lost), counted per interface of
    the first copy (duplicate_tsns_per_interface) and of the second."""
    rows = _tshark(path, f"udp.port == {udp_port}",
                   ["frame.time_epoch", "frame.interface_id", "udp.srcport", "udp.length", "sctp.chunk_type",
                    "sctp.sack_a_rwnd", "sctp.nr_sack_a_rwnd", "udp.payload", "sctp.chunk_flags"],
                   decode=[f"udp.port=={udp_port},sctp"])
    # A capture of several interfaces is in the file by interface buffer, not by time (packets of
    # one path may follow another path's later ones by tens of ms): what came first is decided
    # by the timestamps.
    rows = [row[1:] for row in sorted(rows, key=lambda row: float(row[0]))]
    out = {"init_offers_nr_sack": None, "init_ack_offers_nr_sack": None, "nr_sacks_from_passive": 0,
           "sacks_from_passive": 0, "sacks_from_active": 0, "nr_sacks_from_active": 0,
           "dac_sacks_from_passive": 0, "dac_sacks_from_active": 0, "max_a_rwnd_passive": None,
           "data_packets_per_interface": {}, "data_bytes_per_interface": {},
           "data_chunks_per_interface": {}, "duplicate_tsns_per_interface": {}, "duplicate_copies_per_interface": {}}
    data_seen = 0
    windows = []
    received = {}  # (verification tag, TSN) -> the interface it first arrived on
    for iface, src, length, types, a_rwnd, nr_a_rwnd, payload, flags in rows:
        chunk_types = _ints(types)
        from_passive = src == str(udp_port)
        side = "passive" if from_passive else "active"
        key = str(int(iface))
        kind, extensions = init_extensions(payload)
        if kind == INIT and not from_passive:
            out["init_offers_nr_sack"] = None if extensions is None else NR_SACK in extensions
        if kind == 2 and from_passive:
            out["init_ack_offers_nr_sack"] = None if extensions is None else NR_SACK in extensions
        out[f"sacks_from_{side}"] += chunk_types.count(SACK)
        out[f"nr_sacks_from_{side}"] += chunk_types.count(NR_SACK)
        # every chunk has a type and flags: the two lists pair up
        out[f"dac_sacks_from_{side}"] += sum(1 for chunk, bits in zip(chunk_types, _ints(flags))
                                             if chunk in (SACK, NR_SACK) and bits & DAC_BITS)
        if from_passive:
            if data_seen > 20:  # the set-up's SACKs come before the flow's buffer sizes
                windows += _ints(a_rwnd) + _ints(nr_a_rwnd)
            continue
        tsns = data_tsns(payload)
        if length and int(length) > 500:  # DATA (a truncated packet shows no chunks)
            data_seen += 1
            out["data_packets_per_interface"][key] = out["data_packets_per_interface"].get(key, 0) + 1
        if tsns or (length and int(length) > 500):  # the packet's bytes, for the paths' shares
            out["data_bytes_per_interface"][key] = out["data_bytes_per_interface"].get(key, 0) + int(length or 0)
        for tsn in tsns:
            out["data_chunks_per_interface"][key] = out["data_chunks_per_interface"].get(key, 0) + 1
            if tsn not in received:
                received[tsn] = key
            else:
                first = received[tsn]
                duplicates, copies = out["duplicate_tsns_per_interface"], out["duplicate_copies_per_interface"]
                duplicates[first] = duplicates.get(first, 0) + 1
                copies[key] = copies.get(key, 0) + 1
    out["max_a_rwnd_passive"] = max(windows) if windows else None
    return out


def summarise_tcp(path, port):
    """What the capture shows of the TCP or MPTCP connection(s) to `port` at the passive: the
    subflows (SYNs with MP_CAPABLE or MP_JOIN), data packets and bytes (TCP payload) per path
    interface from the active, and the passive's largest advertised window once connected."""
    rows = _tshark(path, f"tcp.port == {port}",
                   ["frame.interface_id", "tcp.srcport", "tcp.flags.syn", "tcp.flags.ack", "tcp.len",
                    "tcp.options.mptcp.subtype", "tcp.window_size"])
    out = {"syns_per_interface": {}, "mp_joins_per_interface": {}, "data_packets_per_interface": {},
           "data_bytes_per_interface": {}, "max_window_passive": None}
    windows = []
    for iface, src, syn, ack, length, subtypes, window in rows:
        key = str(int(iface))
        from_passive = src == str(port)
        if syn in ("1", "True") and ack in ("0", "False"):
            out["syns_per_interface"][key] = out["syns_per_interface"].get(key, 0) + 1
            if 1 in _ints(subtypes):
                out["mp_joins_per_interface"][key] = out["mp_joins_per_interface"].get(key, 0) + 1
        elif from_passive and window:
            windows.append(int(window))
        if not from_passive and length and int(length) > 0:
            out["data_packets_per_interface"][key] = out["data_packets_per_interface"].get(key, 0) + 1
            out["data_bytes_per_interface"][key] = out["data_bytes_per_interface"].get(key, 0) + int(length)
    out["max_window_passive"] = max(windows) if windows else None
    return out


def quic_headers(payload_hex):
    """(long header?, QUIC version or None, long packet type or None) of a UDP payload's first
    packet (hex). A QUIC packet's first byte and a long header's version are never protected or
    encrypted (RFC 9000, 17.2 and 17.3), so they read from any capture, truncated or not."""
    b = bytes.fromhex(payload_hex) if payload_hex else b""
    if not b:
        return None, None, None
    if not b[0] & 0x80:
        return False, None, None
    version = int.from_bytes(b[1:5], "big") if len(b) >= 5 else None
    return True, version, (b[0] & 0x30) >> 4


QUIC_V1, QUIC_INITIAL, QUIC_HANDSHAKE = 1, 0, 2


def summarise_quic(path, port):
    """What the capture shows of the QUIC connection to `port` (the passive's UDP BASE-1), from the
    first packet of each datagram: the active's Initial packets and the versions of its long
    headers, the passive's long-header packets (its Initial, with its Handshake coalesced behind
    it, and Handshake packets), the short (1-RTT) packets of each side, and the active's
    full-sized packets (data) per path interface."""
    rows = _tshark(path, f"udp.port == {port}", ["frame.interface_id", "udp.srcport", "udp.length", "udp.payload"])
    out = {"versions": [], "initial_from_active": 0, "long_from_passive": 0, "short_from_active": 0,
           "short_from_passive": 0, "data_packets_per_interface": {}, "data_bytes_per_interface": {}}
    versions = set()
    for iface, src, length, payload in rows:
        side = "passive" if src == str(port) else "active"
        long_header, version, kind = quic_headers(payload)
        if long_header is None:
            continue
        if not long_header:
            out[f"short_from_{side}"] += 1
        elif side == "active":
            versions.add(version)
            out["initial_from_active"] += kind == QUIC_INITIAL
        else:
            out["long_from_passive"] += kind in (QUIC_INITIAL, QUIC_HANDSHAKE)
        if side == "active" and length and int(length) > 500:
            key = str(int(iface))
            out["data_packets_per_interface"][key] = out["data_packets_per_interface"].get(key, 0) + 1
            out["data_bytes_per_interface"][key] = out["data_bytes_per_interface"].get(key, 0) + int(length)
    out["versions"] = sorted(f"0x{v:08x}" for v in versions if v is not None)
    return out


def document_ccs(path):
    """{flow id: congestion control} of a run's JSON document ({} when it cannot be read): for
    QUIC flows ngtcp2's, which no ss shows."""
    try:
        with open(path, encoding="utf-8") as f:
            return {int(flow["flow_id"]): flow.get("congestion_control") for flow in json.load(f)["flows"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


# ------------------------------------------------------------------------ congestion control
_SS_CC = re.compile(r"\b(reno|cubic|bbr|bbr2|htcp|vegas|westwood|illinois|dctcp|hybla|highspeed|scalable|veno|yeah|"
                    r"lp|nv|cdg|npm_\w+)\b")


def congestion_controls(topo, side, port):
    """{cc names} of the established TCP connections (MPTCP subflows) of `side` to/from `port`."""
    selector = f"sport = :{port}" if side == "passive" else f"dport = :{port}"
    out = topo.ns(side, "ss", "-tinH", "state", "established", selector, check=False)
    return set(_SS_CC.findall(out))


def lingering(ss_output, ports):
    """The connections in `ss -tanH` output that use one of `ports` and are still open (neither
    listening nor in TIME-WAIT, which carries no data): ["STATE LOCAL PEER", ...]."""
    found, wanted = [], {str(p) for p in ports}
    for line in ss_output.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[0] in ("LISTEN", "TIME-WAIT"):
            continue
        local, peer = parts[3], parts[4]
        if any(a.rpartition(":")[2] in wanted for a in (local, peer)):
            found.append(f"{parts[0]} {local} {peer}")
    return found


def open_connections(topo, ports):
    """{side: lingering connections} of both namespaces (see lingering)."""
    return {side: lingering(topo.ns(side, "ss", "-tanH", check=False), ports) for side in ("active", "passive")}


# ---------------------------------------------------------------------------------- counters
NSTAT_KEYS = re.compile(r"^(Udp|Tcp|TcpExt|MPTcpExt|Sctp|Ip)")


def nstat(topo, side):
    """The host's MIB counters (nstat -az: absolute values, zeros included)."""
    out = topo.ns(side, "nstat", "-az", "--json", check=False)
    try:
        data = json.loads(out)
    except ValueError:
        return {}
    counters = {}
    for table in data.values():
        for k, v in table.items():
            if NSTAT_KEYS.match(k):
                counters[k] = int(v)
    return counters


def snapshot(topo):
    """Every counter that a run's result depends on, now."""
    paths = {}
    for i in range(len(topo.paths)):
        paths[str(i + 1)] = {"forward": topo.path_counters("active", i), "reverse": topo.path_counters("passive", i)}
    snap = {"paths": paths, "delay_lines": topo.delay_counters(),
            "nstat": {s: nstat(topo, s) for s in ("active", "passive")}}
    if hasattr(topo, "bottleneck_counters"):
        snap["bottleneck"] = {"forward": topo.bottleneck_counters("active"),
                              "reverse": topo.bottleneck_counters("passive")}
    return snap


LEVELS = ("backlog", "qlen")  # queue levels, not counts: kept as before and after


def _queue_delta(before, after):
    out = {k: v - before.get(k, 0) for k, v in after.items() if k not in LEVELS}
    for k in LEVELS:
        if k in after:
            out[k + "_before"], out[k + "_after"] = before.get(k, 0), after[k]
    return out


def delta(before, after):
    """What happened during a run: counts after - before, queue levels before and after."""
    out = {}
    for key in ("paths", "bottleneck"):
        if key in after:
            if key == "paths":
                out[key] = {p: {d: _queue_delta(before[key][p][d], c) for d, c in dirs.items()}
                            for p, dirs in after[key].items()}
            else:
                out[key] = {d: _queue_delta(before[key][d], c) for d, c in after[key].items()}

    def line_delta(b, a):  # a delay line's counts (its lateness quantiles are in delay_lines.json)
        return {k: v - b.get(k, 0) for k, v in a.items()}

    out["delay_lines"] = {p: {d: line_delta(before["delay_lines"].get(p, {}).get(d, {}), c) for d, c in dirs.items()}
                          for p, dirs in after.get("delay_lines", {}).items()}
    out["nstat"] = {}
    for side in ("active", "passive"):
        b, a = before["nstat"].get(side, {}), after["nstat"].get(side, {})
        out["nstat"][side] = {k: v - b.get(k, 0) for k, v in a.items() if v - b.get(k, 0) != 0}
    return out


# ------------------------------------------------------------------------------ host load
# Other work on the host during a run (builds, tests, a browser) takes the CPU from the
# transports and delay lines under test and biases what they measure (seen: 0.3 Mbit/s less of
# 10 on a saturated path while a build ran). A run whose host was busier than its own processes
# by more than this (in cores, averaged over the run) is invalid; the lab's own processes need
# well below a tenth of a core at the shipped studies' rates.
FOREIGN_LOAD_LIMIT = 0.25


def _cpu_seconds_of(pid):
    """CPU time (user + system) of a running process, 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class HostLoad:
    """The host's CPU time during a run against what the run's own processes used: the lab and
    its finished children (netperfmeter pairs, capture, tc, nstat: reaped by the end) and the
    long-lived `others` (the delay lines). The difference is other work."""

    def __init__(self, others=()):
        self.others = list(others)
        self.start = self._sample()

    def _sample(self):
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
        # Not softirq: that is mostly the run's own packets (veth, tbf, forwarding), charged to
        # no process of it.
        user, nice, system, _idle, _iowait, irq, _softirq, steal = fields
        busy = (user + nice + system + irq + steal) / os.sysconf("SC_CLK_TCK")
        own = sum(getattr(resource.getrusage(who), field)
                  for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) for field in ("ru_utime", "ru_stime"))
        own += sum(_cpu_seconds_of(p.pid) for p in self.others)
        return time.monotonic(), busy, own

    def finish(self):
        """{"seconds", "busy_cores", "own_cores", "foreign_cores"} over the run."""
        (t0, busy0, own0), (t1, busy1, own1) = self.start, self._sample()
        seconds = max(t1 - t0, 1e-9)
        busy, own = (busy1 - busy0) / seconds, (own1 - own0) / seconds
        return {"seconds": round(seconds, 3), "busy_cores": round(busy, 3), "own_cores": round(own, 3),
                "foreign_cores": round(max(0.0, busy - own), 3)}


# ------------------------------------------------------------------------- process load
# A netperfmeter process that used more than this of a core over its measurement was bound by
# its CPU, not by the network it measures (seen: each side used 42-44 % of the 2-core host at
# rho = 40); its run is invalid. --max-process-load changes it.
PROCESS_LOAD_LIMIT = 0.95


def _process_times(pid):
    """(start time in clock ticks since boot, CPU seconds: user + system) of a process from
    /proc/PID/stat (a process that has ended but is not reaped yet still reads), None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[19]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class ProcessCpu:
    """The CPU time of a run's netperfmeter processes ({name: pid}), read from /proc every
    `period` seconds in a thread of its own while they run; finish() says per process how many
    cores it used over a window of the run (its measurement) between the samples inside it."""

    def __init__(self, processes, period=0.2):
        self.processes, self.period = dict(processes), period
        self.samples = {name: [] for name in self.processes}  # name -> [(epoch s, CPU s)]
        self._born = {}
        self._stop = threading.Event()
        self._sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self):
        now = time.time()
        for name, pid in self.processes.items():
            times = _process_times(pid)
            if times is None or self._born.setdefault(name, times[0]) != times[0]:
                continue  # gone (or its pid taken by another process)
            self.samples[name].append((now, times[1]))

    def _loop(self):
        while not self._stop.wait(self.period):
            self._sample()

    def stop(self):
        """Ends the sampling (again: nothing)."""
        self._stop.set()
        self._thread.join()

    def finish(self, window=None):
        """{name: {"seconds", "cpu_seconds", "cores"}} over `window` (epoch seconds from, to; the
        whole sampled time when None); "cores" is None for a process with less than half a second
        of samples in it (not measured)."""
        self.stop()
        out = {}
        for name, samples in self.samples.items():
            inside = [s for s in samples if window is None or window[0] <= s[0] <= window[1]]
            if len(inside) < 2 or inside[-1][0] - inside[0][0] < 0.5:
                out[name] = {"seconds": None, "cpu_seconds": None, "cores": None}
                continue
            seconds, cpu = inside[-1][0] - inside[0][0], inside[-1][1] - inside[0][1]
            out[name] = {"seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3), "cores": round(cpu / seconds, 3)}
        return out


# ------------------------------------------------------------------- what the stacks hold
# netperfmeter's log line of each SCTP association once it is up (the active) or identified (the
# passive): what the stack holds after being tuned, read back with getsockopt
# (src/control/active_flows.cc, src/control/flow_registry.cc; sctp::describe). Knobs that are
# off are left out of it (bufsplit-on=, smartfr=, reschedule=, pktdrop=).
_HOLDS = re.compile(r"Flow #(\d+): SCTP association (?:up|from .*?), the stack holds (.*)$", re.M)
_HELD_WHEN_LEFT_OUT = {"bufsplit-on": "outstanding", "smartfr": "off", "reschedule": "off", "pktdrop": "off"}
# cmt= as the FLOWSPEC takes it (src/flowspec/flowspec.cc, parseCmt) -> as the stack's line names it
_CMT = {"off": "off", "0": "off", "cmt": "cmt", "normal": "cmt", "on": "cmt", "1": "cmt", "cmtrpv1": "cmtrpv1",
        "rp": "cmtrpv1", "2": "cmtrpv1", "cmtrpv2": "cmtrpv2", "3": "cmtrpv2", "mptcp": "like-mptcp",
        "like-mptcp": "like-mptcp", "mptcp-like": "like-mptcp", "4": "like-mptcp", "wprsctp": "wprsctp",
        "w-pr-sctp": "wprsctp", "5": "wprsctp"}


def stack_holds(text):
    """{flow id: {knob: value}} of what a netperfmeter log says its SCTP stack holds per flow (the
    last line of a flow: the association in force)."""
    out = {}
    for m in _HOLDS.finditer(text):
        held = dict(_HELD_WHEN_LEFT_OUT)
        for token in m.group(2).split():
            knob, eq, value = token.partition("=")
            if eq:
                held[knob] = value
        out[int(m.group(1))] = held
    return out


def log_holds(path):
    """stack_holds() of a log file ({} when there is none)."""
    try:
        with open(path, errors="replace") as f:
            return stack_holds(f.read())
    except OSError:
        return {}


def _switch(value):
    v = value.lower()
    return "on" if v in ("on", "1", "yes", "true") else "off" if v in ("off", "0", "no", "false") else v


def asked_tuning(options):
    """{knob, as the stack's line names it: value} of the SCTP knobs a FLOWSPEC's options set."""
    out = {}
    if "cmt" in options:
        out["cmt"] = _CMT.get(options["cmt"], "custom")
    if "sctpcc" in options:
        out["cc"] = options["sctpcc"]
    for knob in ("bufsplit", "bufsplit-on"):
        if knob in options:
            out[knob] = options[knob]
    for knob in ("dac", "nrsack", "smartfr", "reschedule", "pktdrop"):
        if knob in options:
            out[knob] = _switch(options[knob])
    if "rtomin" in options:
        out["rtomin"] = str(int(options["rtomin"])) if options["rtomin"].isdigit() else options["rtomin"]
    return out


def path_share(per_interface, paths):
    """{"1": share, ...}: each path's share of the bytes a flow's capture shows it send (None when
    it shows none)."""
    total = sum(per_interface.values())
    if not total:
        return None
    return {str(p + 1): per_interface.get(str(p), 0) / total for p in range(paths)}


# ------------------------------------------------------------------------------------ checks
START_SKEW_LIMIT = 0.5  # s between the first and the last pair's START
# The 99th percentile of how late a delay line sent packets after their due time, per direction
# (delay_lines.json: the p99_us of each link's lateness histogram over the run, an upper bucket
# edge): above it, the delay line and not the path set the delay. --max-lateness changes it.
# 10 ms, not 1: a saturated TCP flow over a 10 Mbit/s tbf path with 5 ms of delay, on an idle
# host, had 6.3 % of its frames more than 1 ms late (p99 in the 2-5 ms bucket, maximum 6.8 ms;
# 2026-12-02), so that with 1 ms every lab run was invalid; what makes the delay line that
# late is open (the lab's ceiling). delay_line_lateness_us in evidence.json records it.
LATENESS_LIMIT_US = 10000
UDP_SNDBUF_ERRORS = ("UdpSndbufErrors", "Udp6SndbufErrors")


def _lateness(record):
    """[(where, field, microseconds)]: the p99 lateness of each link and direction of a run's
    delay-line record (topology.delayline_record(), delay_lines.json) that sent frames."""
    found = []
    for link, entry in sorted((record or {}).items()):
        for direction in ("forward", "reverse"):
            late = (entry.get(direction) or {}).get("lateness") or {}
            if late.get("frames") and isinstance(late.get("p99_us"), (int, float)):
                found.append((f"link {link} {direction}", "p99_us", late["p99_us"]))
    return found


def aqm_links(topo):
    """[(link index, Path)] of the topology's links with an AQM (the delay line's link numbers: path
    i is link i + 1, a shared topology's bottleneck the last)."""
    links = [(i + 1, p) for i, p in enumerate(topo.paths)]
    if getattr(topo, "bottleneck", None) is not None:
        links.append((len(topo.paths) + 1, topo.bottleneck))
    return [(index, p) for index, p in links if getattr(p, "aqm", "droptail") != "droptail"]


def _check_aqm(result, topo, delay_lines):
    """Whether each configured AQM was in effect in the run: its delay line ran it (the command's
    -a), counted in the run (delay_lines.json), and where the queue built up far enough to drop,
    the AQM dropped or marked (a RED queue that only overflowed did not run RED). A link without a
    record of the run leaves the AQM unverified."""
    for index, path in aqm_links(topo):
        record = (delay_lines or {}).get(str(index))
        where = f"link {index} ({path.name})"
        if not record or "forward" not in record:
            result["unverified"].append(f"the {path.aqm} queue of {where} (no delay-line record of the run)")
            continue
        forward = record["forward"]
        acted = forward.get("aqm_drops", 0) + forward.get("marks", 0)
        tail = forward.get("tail_drops", 0)
        result.setdefault("aqm", {})[str(index)] = {"aqm": path.aqm, "aqm_drops": forward.get("aqm_drops", 0),
                                                    "marks": forward.get("marks", 0), "tail_drops": tail,
                                                    "in": forward.get("in", 0)}
        if f"-a {path.aqm}" not in record.get("command", ""):
            result["problems"].append(f"{where}: the delay line ran without its {path.aqm} queue "
                                      f"({record.get('command', 'no command recorded')})")
        elif tail > 0 and acted == 0:
            result["problems"].append(f"{where}: the {path.aqm} queue dropped {tail} packets by overflow and none by "
                                      f"{path.aqm}: the AQM was not in effect")


def judge(groups, topo, capture, ccs, counters, starts, udp_ports, ports, host=None, max_other_load=FOREIGN_LOAD_LIMIT,
          no_capture="no capture (tshark is not installed)", holds=None, processes=None,
          max_process_load=PROCESS_LOAD_LIMIT, max_lateness_us=LATENESS_LIMIT_US, strict=True, delay_lines=None):
    """Whether a run measured what its study asks for: per flow what was seen, what the stacks
    hold, each check (expected, observed, ok) and the paths' shares of its data. The run is valid
    when no check failed and every check was verified: one that the evidence cannot decide (no
    capture, no SACKs, no read-back) is listed in "unverified" and makes the run invalid too;
    only `strict=False` (the hosts topology, which captures nothing) lets it pass, listed.
    `no_capture` says why there is no capture when there is none. groups[i]: the flows of pair i
    (udp_ports[i], ports[i]), a Flow for a pair of one; holds[i]: {"active"/"passive": {flow id:
    {knob: value}}} of pair i's logs (stack_holds); processes: ProcessCpu.finish() of the run's
    netperfmeter processes."""
    result = {"flows": [], "problems": [], "unverified": [], "strict": strict}
    paths = len(topo.paths)
    pcap = capture.path if capture is not None and capture.available() else None

    def check(flow, what, expected, observed, ok):
        entry = {"check": what, "expected": expected, "observed": observed,
                 "ok": ok if ok is not None else "unverified"}
        flow["checks"].append(entry)
        if ok is False:
            result["problems"].append(f"flow {flow['flow']}: {what}: expected {expected}, seen {observed}")
        elif ok is None:
            result["unverified"].append(f"flow {flow['flow']}: {what}")

    flows = [(i, f) for i, group in enumerate(groups) for f in (group if isinstance(group, list) else [group])]
    quic_seen = {}  # pair -> the capture's summary of its QUIC connection
    for i, f in flows:
        options = flow_options(f.spec)
        entry = {"flow": f.number, "pair": i, "protocol": f.protocol, "spec": f.spec, "checks": []}
        result["flows"].append(entry)
        rcvbuf = int(options["rcvbuf"]) if options.get("rcvbuf", "").isdigit() else None
        flow_id = int(options["id"]) if options.get("id", "").isdigit() else f.number
        if f.protocol == "sctp":
            seen = summarise_sctp(pcap, udp_ports[i]) if pcap else None
            entry["seen"] = seen
            # what each side's stack holds (its log), against what the FLOWSPEC asks for
            asked = asked_tuning(options)
            held = {side: (holds or {}).get(i, {}).get(side, {}).get(flow_id) for side in ("active", "passive")}
            entry["stack_holds"] = held
            for knob, value in asked.items():
                for side in ("active", "passive"):
                    got = held[side].get(knob) if held[side] else None
                    check(entry, f"{knob}= held by the stack ({side})", value,
                          got if held[side] else f"no \"the stack holds\" line for flow #{flow_id} in its log",
                          None if got is None else got == value)
            # the DAC bits in the SACKs on the wire, where CMT or dac= makes them a question. DAC
            # is a CMT mechanism: usrsctp sets the bits (sctp_send_sack), delays SACKs for it
            # (sctp_process_data) and reads them (sctp_handle_sack) only where sctp_cmt_on_off > 0,
            # so dac=on without CMT leaves every SACK without them (and is held, as asked)
            if asked.get("cmt", "off") != "off" or "dac" in asked:
                cmt = asked.get("cmt", "off") != "off"
                dac = asked.get("dac", "off") == "on" and cmt
                sacks = dac_sacks = None
                if seen is not None:
                    sacks = sum(seen[f"{k}sacks_from_{s}"] for k in ("", "nr_") for s in ("active", "passive"))
                    dac_sacks = seen["dac_sacks_from_active"] + seen["dac_sacks_from_passive"]
                check(entry, "CMT DAC bits in the SACKs on the wire",
                      "in SACKs" if dac else "in no SACK" if cmt or asked["dac"] == "off"
                      else "in no SACK (DAC acts only with CMT)",
                      "no capture" if seen is None else f"in {dac_sacks} of {sacks} SACKs",
                      None if not sacks else (dac_sacks > 0) == dac)
            # NR-SACK negotiated (INIT and INIT-ACK offer it) when nrsack= asks for it; whether the
            # receiver then sends NR-SACKs is behaviour: a metric (nr_sack_share)
            if "nrsack" in asked:
                offers = (seen["init_offers_nr_sack"], seen["init_ack_offers_nr_sack"]) if seen else (None, None)
                check(entry, "NR-SACK negotiated (offered in INIT and INIT-ACK)", asked["nrsack"] == "on",
                      "no capture" if seen is None else
                      ("INIT or INIT-ACK not captured" if None in offers else all(offers)),
                      None if None in offers else all(offers) == (asked["nrsack"] == "on"))
            if seen is not None:
                sacks = seen["sacks_from_passive"] + seen["nr_sacks_from_passive"]
                entry["nr_sack_share"] = seen["nr_sacks_from_passive"] / sacks if sacks else None
            if rcvbuf is not None:
                window = seen["max_a_rwnd_passive"] if seen else None
                check(entry, "passive a_rwnd (rcvbuf)", f"{rcvbuf // 2} to {rcvbuf}", window,
                      None if window is None else rcvbuf // 2 <= window <= rcvbuf)
        elif f.protocol in ("tcp", "mptcp"):
            port = ports[i] - (1 if f.protocol == "mptcp" else 0)
            seen = summarise_tcp(pcap, port) if pcap else None
            entry["seen"] = seen
            if rcvbuf is not None:
                window = seen["max_window_passive"] if seen else None
                # Linux doubles SO_RCVBUF and advertises a share of it
                check(entry, "passive window (rcvbuf)", f"{rcvbuf // 4} to {2 * rcvbuf}", window,
                      None if window is None else rcvbuf // 4 <= window <= 2 * rcvbuf)
            if f.protocol == "mptcp" and paths > 1:
                # the subflows are the path manager's configuration (the passive's endpoints);
                # how the scheduler then uses them is behaviour: the paths' shares
                syns = sorted(int(k) + 1 for k, n in (seen or {}).get("syns_per_interface", {}).items() if n)
                check(entry, "MPTCP: a subflow on every path", list(range(1, paths + 1)),
                      syns if seen else "no capture", None if seen is None else syns == list(range(1, paths + 1)))
            cc = options.get("cc")
            if cc:
                for side in ("active", "passive"):
                    found = ccs.get(i, {}).get(side, [])
                    check(entry, f"congestion control ({side})", [cc], found, None if not found else found == [cc])
        elif f.protocol == "quic":
            first = i not in quic_seen
            if first:
                quic_seen[i] = summarise_quic(pcap, ports[i] - 1) if pcap else None
            seen = entry["seen"] = quic_seen[i]
            if first:  # the connection's checks, once (its other flows are streams of it)
                wanted = ("Initial (QUIC v1) from the active, Initial/Handshake from the passive, "
                          "1-RTT packets both ways")
                if seen is None:
                    check(entry, "QUIC connection on the wire", wanted, "no capture", None)
                else:
                    ok = (seen["initial_from_active"] > 0 and seen["versions"] == [f"0x{QUIC_V1:08x}"]
                          and seen["long_from_passive"] > 0 and seen["short_from_active"] > 0
                          and seen["short_from_passive"] > 0)
                    observed = {k: seen[k] for k in ("versions", "initial_from_active", "long_from_passive",
                                                     "short_from_active", "short_from_passive")}
                    check(entry, "QUIC connection on the wire", wanted, observed, ok)
            cc = options.get("cc", "default")
            wanted_cc = "reno" if cc in ("default", "") else cc
            found = ccs.get(i, {}).get("document", {}).get(flow_id)
            # The document names the algorithm netperfmeter made the connection with; ngtcp2 0.12
            # has no call that reads it back and no ss shows a QUIC connection: this check rests
            # on netperfmeter's own account (the check's name says so), and a document that
            # names none leaves it unverified.
            check(entry, "congestion control (netperfmeter's document, as configured; not readable from ngtcp2)",
                  wanted_cc, found, None if found is None else found == wanted_cc)
        else:
            seen = None
        # which paths carried the flow's data (the capture's first seconds, from the active): a
        # metric of the run (data_share_f<flow>_path<N>), not a condition of its validity
        if seen is not None and paths > 1 and "data_bytes_per_interface" in seen:
            entry["path_share"] = path_share(seen["data_bytes_per_interface"], paths)
    known = [t for t in starts if t is not None]
    if len(known) > 1:
        skew = max(known) - min(known)
        result["start_skew_s"] = skew
        if skew > START_SKEW_LIMIT:
            result["problems"].append(f"the flows' pairs started {skew:.3f} s apart (limit {START_SKEW_LIMIT} s)")
    if host is not None:
        result["host"] = host
        if host["foreign_cores"] > max_other_load:
            result["problems"].append(f"the host was busy with other work: {host['foreign_cores']:.2f} of a core "
                                      f"beyond the run's own processes (limit {max_other_load:g}, --max-other-load)")
    # packets the sending host's own UDP stack dropped: lost before any path, not by it
    for side, changed in sorted(counters.get("nstat", {}).items()):
        errors = sum(changed.get(k, 0) for k in UDP_SNDBUF_ERRORS)
        if errors > 0:
            result["problems"].append(f"{errors} UDP send-buffer errors on the {side} host (packets dropped in the "
                                      "host before any path: UdpSndbufErrors)")
    if processes is not None:
        result["processes"] = processes
        for name, load in sorted(processes.items()):
            if load["cores"] is None:
                result["unverified"].append(f"the CPU load of netperfmeter ({name}) (not sampled during its "
                                            "measurement)")
            elif load["cores"] > max_process_load:
                result["problems"].append(f"netperfmeter ({name}) used {load['cores']:.2f} of a core during its "
                                          f"measurement: bound by its CPU (limit {max_process_load:g}, "
                                          "--max-process-load)")
    elif strict:
        result["unverified"].append("the netperfmeter processes' CPU load (not measured)")
    lateness = _lateness(delay_lines)
    result["delay_line_lateness_us"] = {f"{where} {field}".strip(): v for where, field, v in lateness}
    for where, field, value in lateness:
        if value > max_lateness_us:
            result["problems"].append(f"delay line {where}: {field} = {value:g} us (limit {max_lateness_us:g} us, "
                                      "--max-lateness): the delay line, not the path, set the delay")
    _check_aqm(result, topo, delay_lines)
    # A delay line that reports no lateness cannot show that it kept its delay.
    if counters.get("delay_lines") and not lateness:
        result["unverified"].append("the delay lines' lateness (no delay_lines.json record of the run)")
    if pcap is None:
        result["unverified"].append(no_capture)
    if strict and result["unverified"]:
        result["problems"].append("not verified: " + "; ".join(result["unverified"]))
    result["valid"] = not result["problems"]
    return result
