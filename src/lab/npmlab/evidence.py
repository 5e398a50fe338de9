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
import time

from .study import CAPTURE_SECONDS, spec_options
from .topology import LabError, _run

SNAPLEN = 256
NR_SACK, SACK, DATA, INIT = 16, 3, 0, 1


flow_options = spec_options  # the name=value options of a FLOWSPEC


def _on(value):
    return value.lower() in ("on", "1", "yes", "true")


# ------------------------------------------------------------------------------------ capture
class Capture:
    """tshark in the passive's namespace on all its path interfaces for the first seconds of
    a run (CAPTURE_SECONDS, or what the study's `capture` says; it ends by itself), headers only
    (SNAPLEN bytes of each packet); nothing when tshark is not installed."""

    def __init__(self, topo, path, seconds=CAPTURE_SECONDS):
        self.path = path
        self.seconds = seconds
        self.proc = None
        self.interfaces = [topo.device("passive", i) for i in range(len(topo.paths))]
        if shutil.which("tshark") is None:
            return
        cmd = ["ip", "netns", "exec", topo.P, "tshark", "-q", "-s", str(SNAPLEN), "-a", f"duration:{seconds:g}",
               "-w", path, "-f", "tcp or udp"]
        for dev in self.interfaces:
            cmd += ["-i", dev]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if "Capturing on" in line:
                time.sleep(0.3)  # tshark takes packets a moment after it says so
                return
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise LabError("tshark did not start capturing in the passive's namespace")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def wait(self):
        if self.proc is not None:
            try:
                self.proc.wait(timeout=self.seconds + 30)
            except subprocess.TimeoutExpired:
                self.stop()

    def available(self):
        return self.proc is not None and os.path.exists(self.path)


def _tshark(path, display_filter, fields, decode=()):
    cmd = ["tshark", "-n", "-r", path]
    for rule in decode:
        cmd += ["-d", rule]
    cmd += ["-Y", display_filter, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in fields:
        cmd += ["-e", f]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise LabError(f"tshark could not read {path}: {r.stderr.strip().splitlines()[-1:]}")
    return [line.split("\t") for line in r.stdout.splitlines() if line.strip()]


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


def summarise_sctp(path, udp_port):
    """What the capture shows of the userland SCTP association(s) on `udp_port` (the passive's
    encapsulation port): NR-SACK offered and used, the passive's a_rwnd once data flows, the
    path interfaces that carried DATA, and the DATA chunks that arrived a second time (a TSN
    already received: the sender retransmitted a chunk that had not been lost), counted per
    interface of the first copy (duplicate_tsns_per_interface) and of the second."""
    rows = _tshark(path, f"udp.port == {udp_port}",
                   ["frame.time_epoch", "frame.interface_id", "udp.srcport", "udp.length", "sctp.chunk_type",
                    "sctp.supported_chunk_type", "sctp.sack_a_rwnd", "sctp.nr_sack_a_rwnd", "udp.payload"],
                   decode=[f"udp.port=={udp_port},sctp"])
    # A capture of several interfaces is in the file by interface buffer, not by time (packets of
    # one path may follow another path's later ones by tens of ms): what came first is decided
    # by the timestamps.
    rows = [row[1:] for row in sorted(rows, key=lambda row: float(row[0]))]
    out = {"init_offers_nr_sack": None, "init_ack_offers_nr_sack": None, "nr_sacks_from_passive": 0,
           "sacks_from_passive": 0, "max_a_rwnd_passive": None, "data_packets_per_interface": {},
           "data_chunks_per_interface": {}, "duplicate_tsns_per_interface": {}, "duplicate_copies_per_interface": {}}
    data_seen = 0
    windows = []
    received = {}  # (verification tag, TSN) -> the interface it first arrived on
    for iface, src, length, types, supported, a_rwnd, nr_a_rwnd, payload in rows:
        chunk_types = _ints(types)
        from_passive = src == str(udp_port)
        key = str(int(iface))
        if INIT in chunk_types and not from_passive:
            out["init_offers_nr_sack"] = NR_SACK in _ints(supported)
        if 2 in chunk_types and from_passive:
            out["init_ack_offers_nr_sack"] = NR_SACK in _ints(supported)
        if from_passive:
            out["nr_sacks_from_passive"] += chunk_types.count(NR_SACK)
            out["sacks_from_passive"] += chunk_types.count(SACK)
            if data_seen > 20:  # the set-up's SACKs come before the flow's buffer sizes
                windows += _ints(a_rwnd) + _ints(nr_a_rwnd)
            continue
        if length and int(length) > 500:  # DATA (a truncated packet shows no chunks)
            data_seen += 1
            out["data_packets_per_interface"][key] = out["data_packets_per_interface"].get(key, 0) + 1
        for tsn in data_tsns(payload):
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
    subflows (SYNs with MP_CAPABLE or MP_JOIN) and data packets per path interface, and the
    passive's largest advertised window once connected."""
    rows = _tshark(path, f"tcp.port == {port}",
                   ["frame.interface_id", "tcp.srcport", "tcp.flags.syn", "tcp.flags.ack", "tcp.len",
                    "tcp.options.mptcp.subtype", "tcp.window_size"])
    out = {"syns_per_interface": {}, "mp_joins_per_interface": {}, "data_packets_per_interface": {},
           "max_window_passive": None}
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
           "short_from_passive": 0, "data_packets_per_interface": {}}
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
    snap = {"paths": paths, "delay_lines": topo.delay_counters(), "nstat": {s: nstat(topo, s) for s in ("active", "passive")}}
    if hasattr(topo, "bottleneck_counters"):
        snap["bottleneck"] = {"forward": topo.bottleneck_counters("active"), "reverse": topo.bottleneck_counters("passive")}
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
    out["delay_lines"] = {p: {d: {k: v - before["delay_lines"].get(p, {}).get(d, {}).get(k, 0) for k, v in c.items()}
                              for d, c in dirs.items()}
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


# ------------------------------------------------------------------------------------ checks
START_SKEW_LIMIT = 0.5  # s between the first and the last pair's START


def judge(groups, topo, capture, ccs, counters, starts, udp_ports, ports, host=None, max_other_load=FOREIGN_LOAD_LIMIT,
          no_capture="no capture (tshark is not installed)"):
    """Whether a run measured what its study asks for: per flow what was seen and each check
    (expected, observed, ok). The run is valid when no check failed; checks that the evidence
    cannot decide (no capture, no traffic of that kind) say so and do not fail it; `no_capture`
    says why there is no capture when there is none. groups[i]: the flows of pair i (udp_ports[i],
    ports[i]), a Flow for a pair of one."""
    result = {"flows": [], "problems": [], "unverified": []}
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
        if f.protocol == "sctp":
            seen = summarise_sctp(pcap, udp_ports[i]) if pcap else None
            entry["seen"] = seen
            wanted = _on(options.get("nrsack", "off"))
            if seen is None or seen["sacks_from_passive"] + seen["nr_sacks_from_passive"] == 0:
                check(entry, "NR-SACK", wanted, "no SACKs captured", None)
            else:
                used = seen["nr_sacks_from_passive"] > 0
                check(entry, "NR-SACK", wanted, used, used == wanted and (not wanted or bool(seen["init_offers_nr_sack"])))
            if rcvbuf is not None:
                window = seen["max_a_rwnd_passive"] if seen else None
                check(entry, "passive a_rwnd (rcvbuf)", f"{rcvbuf // 2} to {rcvbuf}", window,
                      None if window is None else rcvbuf // 2 <= window <= rcvbuf)
            cmt = options.get("cmt", "off")
            if cmt not in ("off", "0") and paths > 1:
                used = sorted(int(k) + 1 for k, n in (seen or {}).get("data_packets_per_interface", {}).items() if n)
                check(entry, "CMT: DATA on every path", list(range(1, paths + 1)), used if seen else "no capture",
                      None if seen is None else used == list(range(1, paths + 1)))
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
                wanted = "Initial (QUIC v1) from the active, Initial/Handshake from the passive, 1-RTT packets both ways"
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
            flow_id = int(options["id"]) if options.get("id", "").isdigit() else f.number
            found = ccs.get(i, {}).get("document", {}).get(flow_id)
            # The document names the algorithm the connection was made with (from the FLOWSPEC);
            # ngtcp2 0.12 has no call that reads it back and no ss shows a QUIC connection, so a
            # match is recorded but does not verify anything: unverified, unless it contradicts.
            check(entry, "congestion control (netperfmeter's document, as configured; not readable from ngtcp2)",
                  wanted_cc, found, False if found is not None and found != wanted_cc else None)
    known = [t for t in starts if t is not None]
    if len(known) > 1:
        skew = max(known) - min(known)
        result["start_skew_s"] = skew
        if skew > START_SKEW_LIMIT:
            result["problems"].append(f"the flows' pairs started {skew:.3f} s apart (limit {START_SKEW_LIMIT} s)")
    if host is not None:
        result["host"] = host
        if host["foreign_cores"] > max_other_load:
            result["problems"].append(f"the host was busy with other work: {host['foreign_cores']:.2f} of a core beyond "
                                      f"the run's own processes (limit {max_other_load:g}, --max-other-load)")
    if pcap is None:
        result["unverified"].append(no_capture)
    result["valid"] = not result["problems"]
    return result
