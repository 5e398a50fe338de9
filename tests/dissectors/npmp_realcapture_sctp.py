"""Real-capture test over SCTP: capture a loopback netperfmeter run whose
control and data run over userland SCTP encapsulated in UDP (RFC 6951), and
decode it.

Called by npmp_test.py realcapture-sctp.  Runs (as root, capture on lo):

    netperfmeter BASE -nodisplay --sctp-stack=userland --sctp-udp-port=UDPPORT   (passive)
    netperfmeter 127.0.0.1:BASE -x --sctp-stack=userland \\
        --sctp-remote-udp-port=UDPPORT -runtime=2 -nodisplay \\
        -sctp const10:const1000:const10:const1000:KNOBS const10:const500:unordered=1:KNOBS \\
        -tcp const10:const800 \\
        -scalar=DIR/run.sca -vector=DIR/run.vec -loglevel=1                     (active)

Control (NPMP-CONTROL, PPID 36, stream 0) is an SCTP association to BASE+1;
the two -sctp specs are one association to BASE with streams 0 and 1 (flows
0 and 1: IDENTIFY with PPID 36 on the flow's stream, DATA with PPID 37), flow
2 is TCP to BASE.  The capture is decoded with -d udp.port==UDPPORT,sctp
(tshark 4.0 knows only 9899 as SCTP over UDP) by the C plugin and the Lua
twin, with the same checks: zero malformed, no expert errors, one decoded
NPMP message per complete SCTP DATA chunk with PPID 36/37 (and per payload
byte), flow IDs 0..2 with protocols SCTP, SCTP, TCP and stream IDs 0, 1, 0,
one IDENTIFY per flow on its stream/connection, START/STOP acknowledged,
RESULTS ending with EOF, one measurement ID everywhere (the $<hex> the active
logs), DATA counts per flow equal to the active's "Transmission" lines.
"""
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time

from npmp_realcapture import (conclude, decode_with_each, listening, parse_flow_stats, pick_base, pick_udp_port,
                              run_captured)

# (option, spec, protocol number, SCTP stream, outbound size, inbound size or None)
# The association's CMT-SCTP tuning travels in ADD_FLOW flag bits 3-7 and the NDiffPorts field.
KNOBS = ":cmt=cmt:nrsack=on:bufsplit=both:sctpcc=htcp:rtomin=300:dac=on"
KNOB_FIELDS = {"cmt": 1, "addflow.flags.nrsack": 1, "addflow.flags.bufsplit": 3, "addflow.flags.sctpcc": 2,
               "sctp.rtomin": 300, "sctp.dac": 1}
FLOWS = [
    ("-sctp", "const10:const1000:const10:const1000" + KNOBS, 132, 0, 1000, 1000),
    ("-sctp", "const10:const500:unordered=1" + KNOBS, 132, 1, 500, None),
    ("-tcp", "const10:const800", 6, 0, 800, None),
]
# Kernel SCTP, not encapsulated, captured in a VM running Debian's kernel (tests/vm; this
# host's kernel has no SCTP): the same flows without the CMT knobs (CMT needs the userland stack).
KERNEL_FLOWS = [
    ("-sctp", "const10:const1000:const10:const1000", 132, 0, 1000, 1000),
    ("-sctp", "const10:const500:unordered=1", 132, 1, 500, None),
    ("-tcp", "const10:const800", 6, 0, 800, None),
]
KERNEL_BASE = 9000
RUNTIME = 2
PPID_CONTROL, PPID_DATA = 36, 37


class Setup:
    """What a capture holds: its flows, the CMT knobs their ADD_FLOWs carry, and how tshark finds
    the SCTP in it (-d udp.port==P,sctp for SCTP over UDP; nothing for kernel SCTP)."""

    def __init__(self, name, flows, knobs, decode):
        self.name, self.flows, self.knobs, self.decode = name, flows, knobs, decode


PI_ERROR = "8388608"


def udp_bound(port):
    for name in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    if int(line.split()[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def build_active_cmd(netperfmeter, base, outdir, stack_args, flows):
    cmd = [netperfmeter, "127.0.0.1:%d" % base, "-x", *stack_args, "-runtime=%d" % RUNTIME, "-nodisplay",
           "-scalar=" + os.path.join(outdir, "run.sca"), "-vector=" + os.path.join(outdir, "run.vec"),
           "-loglevel=1"]
    # -sctp swallows every following non-option argument as another stream,
    # so the streams of the one association follow it directly.
    i = 0
    while i < len(flows):
        opt = flows[i][0]
        cmd.append(opt)
        while i < len(flows) and flows[i][0] == opt:
            cmd.append(flows[i][1])
            i += 1
            if opt != "-sctp":
                break
    return cmd


def capture_run(args, work, skip):
    """Returns (pcap path, base port, active output text)."""
    args.sctp_udp_port = pick_udp_port(args.sctp_udp_port, skip, "userland SCTP")
    base = pick_base(args.port, skip, lambda base: [(args.sctp_udp_port, socket.SOCK_DGRAM)])
    outdir = os.path.join(work, "results")
    os.makedirs(outdir)
    active_cmd = build_active_cmd(args.netperfmeter, base, outdir, [
        "--sctp-stack=userland", "--sctp-remote-udp-port=%d" % args.sctp_udp_port], FLOWS)
    pcap, out = run_captured(work, "udp port %d or tcp portrange %d-%d" % (args.sctp_udp_port, base - 1, base + 1),
                             [args.netperfmeter, str(base), "-nodisplay", "-loglevel=1",
                              "--sctp-stack=userland", "--sctp-udp-port=%d" % args.sctp_udp_port],
                             lambda: listening(base) and udp_bound(args.sctp_udp_port), active_cmd, skip,
                             keep=args.keep)
    return pcap, base, out


FRAME_FIELDS = ["tcp.stream", "tcp.srcport", "tcp.dstport", "tcp.len", "tcp.analysis.retransmission",
                "sctp.srcport", "sctp.dstport", "sctp.chunk_type", "sctp.chunk_length",
                "sctp.data_sid", "sctp.data_payload_proto_id", "sctp.data_e_bit", "sctp.retransmission",
                "npmp.type", "npmp.length", "npmp.streamid",
                "_ws.malformed", "_ws.expert.severity", "_ws.expert.message"]


def capture_in_vm(args, work, skip):
    """Kernel SCTP: the run and the capture (dumpcap on lo) in a VM; returns (pcap, base, active output)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vm"))
    import npmvm
    why = npmvm.missing()
    if why:
        skip(why)
    base = KERNEL_BASE
    active = build_active_cmd(args.netperfmeter, base, "results", ["--sctp-stack=kernel"], KERNEL_FLOWS)
    script = f"""
modprobe sctp || exit 3
mkdir -p results
dumpcap -i lo -f 'sctp or tcp portrange {base - 1}-{base + 1}' -w run.pcapng 2>capture.err &
C=$!
for i in $(seq 100); do grep -q '^File:' capture.err && break; sleep 0.1; done  # capturing (after 'Capturing on')
{shlex.quote(args.netperfmeter)} {base} -nodisplay -loglevel=1 --sctp-stack=kernel >passive.log 2>&1 &
P=$!
for i in $(seq 300); do grep -q 'waiting for incoming connections' passive.log && break; sleep 0.1; done
{" ".join(shlex.quote(a) for a in active)} >active.log 2>&1
rc=$?
sleep 1
kill -INT $P; wait $P
kill -INT $C; wait $C
exit $rc
"""
    rc, output = npmvm.VM().run(script, timeout=180, workdir=work)
    logs = {}
    for name in ("active.log", "passive.log", "capture.err"):
        path = os.path.join(work, name)
        logs[name] = ""
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                logs[name] = f.read()
    if rc != 0:
        raise RuntimeError("the run in the VM exited with %d:\n%s\n%s" % (rc, output[-3000:], "\n".join(
            "--- %s\n%s" % (k, v[-3000:]) for k, v in logs.items())))
    pcap = os.path.join(work, "run.pcapng")
    os.chmod(pcap, 0o644)  # tshark runs as nobody
    if args.keep:
        shutil.copy(pcap, args.keep)
    return pcap, base, logs["active.log"]


def analyse(c, ts, pcap, base, active_out, label, setup):
    FLOWS, KNOB_FIELDS = setup.flows, setup.knobs
    n_flows = len(FLOWS)
    prefs = setup.decode + ["-o", "npmp.tcp_ports:%d-%d" % (base - 1, base + 1)]
    F = ts.fields(pcap, FRAME_FIELDS, prefs)
    M = ts.messages(pcap, "npmp", prefs)
    c.check(len(F) > 50, "%s: capture has %d frames" % (label, len(F)))

    # --- zero malformed, no expert errors
    c.eq([n for n, f in F.items() if f["_ws.malformed"]], [], "%s: frames with _ws.malformed" % label)
    errs = [(n, f["_ws.expert.message"]) for n, f in F.items() if PI_ERROR in f["_ws.expert.severity"]]
    c.eq(errs, [], "%s: expert errors" % label)
    retrans = [n for n, f in F.items() if f["sctp.retransmission"]]
    c.eq(retrans, [], "%s: no retransmitted SCTP DATA chunks on lo" % label)

    # --- SCTP: one decoded message per complete DATA chunk with PPID 36/37,
    # in chunk order; TCP: every payload byte inside a decoded message.
    sctp_frames = [n for n, f in F.items() if f["sctp.srcport"]]
    c.check(len(sctp_frames) > 20, "%s: %d SCTP frames" % (label, len(sctp_frames)))
    chunks = []        # (frame, sid, ppid, payload length) of complete DATA chunks
    n_chunks, n_sctp_msgs = {PPID_CONTROL: 0, PPID_DATA: 0}, 0
    per_frame_ok = []
    tcp_payload, tcp_decoded = {}, {}
    for n, f in F.items():
        if f["sctp.srcport"]:
            lengths = [int(x) for t, x in zip(f["sctp.chunk_type"], f["sctp.chunk_length"]) if t == "0"]
            mine = []
            for sid, ppid, e, ln in zip(f["sctp.data_sid"], f["sctp.data_payload_proto_id"],
                                        f["sctp.data_e_bit"], lengths):
                if int(ppid, 0) in n_chunks and e in ("1", "True"):
                    n_chunks[int(ppid, 0)] += 1
                    mine.append((n, int(sid, 0), int(ppid, 0), ln - 16))
            chunks += mine
            n_sctp_msgs += len(f["npmp.type"])
            per_frame_ok.append((n, len(mine) == len(f["npmp.type"]) and
                                 [x[3] for x in mine] == [int(x) for x in f["npmp.length"]]))
        elif f["tcp.stream"]:
            key = int(f["tcp.stream"][0])
            if not f["tcp.analysis.retransmission"]:
                tcp_payload[key] = tcp_payload.get(key, 0) + int(f["tcp.len"][0] or 0)
                tcp_decoded[key] = tcp_decoded.get(key, 0) + sum(int(x) for x in f["npmp.length"])
    print("  %s: %d SCTP DATA chunks with PPID 36, %d with PPID 37; %d NPMP messages over SCTP"
          % (label, n_chunks[PPID_CONTROL], n_chunks[PPID_DATA], n_sctp_msgs))
    c.check(n_chunks[PPID_CONTROL] >= 10 and n_chunks[PPID_DATA] >= 5 * RUNTIME,
            "%s: SCTP DATA chunks with PPID 36 (%d) and 37 (%d) present"
            % (label, n_chunks[PPID_CONTROL], n_chunks[PPID_DATA]))
    c.eq(n_sctp_msgs, len(chunks), "%s: NPMP messages over SCTP == SCTP DATA chunks with PPID 36/37" % label)
    c.eq([n for n, ok in per_frame_ok if not ok], [],
         "%s: frames whose NPMP messages do not match their DATA chunks one to one (lengths)" % label)
    c.check(len(tcp_payload) >= 1, "%s: %d TCP data connection(s)" % (label, len(tcp_payload)))
    c.eq(tcp_decoded, tcp_payload, "%s: TCP: decoded message bytes == payload bytes per connection" % label)

    # --- message level.  SCTP messages carry the stream and PPID of their chunk.
    msgs = []
    sctp_chunks_by_frame = {}
    for ch in chunks:
        sctp_chunks_by_frame.setdefault(ch[0], []).append(ch)
    for n in sorted(M):
        f = F.get(n, {})
        tr = "sctp" if f.get("sctp.srcport") else "tcp"
        sport = int((f.get(tr + ".srcport") or ["0"])[0])
        dport = int((f.get(tr + ".dstport") or ["0"])[0])
        fch = sctp_chunks_by_frame.get(n, [])
        for k, m in enumerate(M[n]):
            d = dict(frame=n, transport=tr, sport=sport, dport=dport,
                     **{key[5:]: v for key, v in m.items() if key.startswith("npmp.")})
            if tr == "sctp" and k < len(fch):
                d["sid"], d["ppid"] = fch[k][1], fch[k][2]
            msgs.append(d)

    def first(m, k):
        v = m.get(k)
        return int(v[0], 0) if v else None

    by_type = {}
    for m in msgs:
        by_type.setdefault(first(m, "type"), []).append(m)

    # PPIDs: DATA on 37, everything else on 36; control on stream 0 of BASE+1.
    sm = [m for m in msgs if m["transport"] == "sctp"]
    c.eq(sorted({(first(m, "type") == 5, m.get("ppid")) for m in sm}), [(False, PPID_CONTROL), (True, PPID_DATA)],
         "%s: (is DATA, PPID) pairs over SCTP" % label)
    ctl = [m for m in sm if base + 1 in (m["sport"], m["dport"])]
    c.eq(sorted({first(m, "type") for m in ctl}), sorted([1, 2, 6, 7, 8] + ([3] if by_type.get(3) else [])),
         "%s: control message types on the SCTP association to BASE+1" % label)
    c.eq(sorted({m.get("sid") for m in ctl}), [0], "%s: control on stream 0" % label)
    c.eq(sorted({m["dport"] for m in msgs if first(m, "type") in (2, 3, 6, 7)}), [base + 1],
         "%s: control requests to BASE+1" % label)

    addflows = by_type.get(2, [])
    c.eq(sorted(first(m, "flowid") for m in addflows), list(range(n_flows)), "%s: ADD_FLOW flow IDs" % label)
    af = sorted(addflows, key=lambda m: first(m, "flowid"))
    c.eq([first(m, "protocol") for m in af], [f[2] for f in FLOWS], "%s: ADD_FLOW protocols SCTP, SCTP, TCP" % label)
    c.eq([first(m, "streamid") for m in af], [f[3] for f in FLOWS], "%s: ADD_FLOW stream IDs 0, 1, 0" % label)

    def value(m, k):
        v = m.get(k)
        return None if not v else 1 if v[0] in ("True", "true") else 0 if v[0] in ("False", "false") else int(v[0], 0)
    for m, f in zip(af, FLOWS):
        want = {k: (v if f[2] == 132 else 0) for k, v in KNOB_FIELDS.items()}
        c.eq({k: value(m, k) for k in KNOB_FIELDS}, want,
             "%s: flow %d ADD_FLOW CMT-SCTP tuning (flag bits 3-7, RTO.min, DAC)" % (label, first(m, "flowid")))

    meas = {m["measurementid"][0] for m in msgs if "measurementid" in m}
    c.eq(len(meas), 1, "%s: one measurement ID in the capture (%s)" % (label, meas))
    mid = int(next(iter(meas)), 16) if meas else None
    logged = {int(x, 16) for x in re.findall(r"\$([0-9A-Fa-f]{1,16})\b", active_out)}
    c.check(mid is not None and mid in logged, "%s: measurement ID %x among the logged $<hex> IDs %s"
            % (label, mid or 0, sorted("%x" % x for x in logged)))

    logged_stats = parse_flow_stats(active_out)
    c.eq(sorted(k for k, v in logged_stats.items() if "tx" in v), list(range(n_flows)),
         "%s: the active logs a Transmission line per flow" % label)
    ids = by_type.get(4, [])
    for i, (opt, spec, proto, sid, out_size, in_size) in enumerate(FLOWS):
        tr = "sctp" if proto == 132 else "tcp"
        mine = [m for m in ids if first(m, "flowid") == i]
        c.eq(len(mine), 1, "%s: flow %d (%s %s): IDENTIFY count" % (label, i, opt, spec))
        if mine:
            m = mine[0]
            c.eq((m["transport"], m["dport"], first(m, "streamid")), (tr, base, sid),
                 "%s: flow %d IDENTIFY transport, port, stream ID" % (label, i))
            c.eq(first(m, "magic"), 0x4bcdf3aa303c6774, "%s: flow %d IDENTIFY magic" % (label, i))
            if tr == "sctp":
                c.eq((m.get("sid"), m.get("ppid")), (sid, PPID_CONTROL),
                     "%s: flow %d IDENTIFY on SCTP stream %d with PPID 36" % (label, i, sid))
        data = [m for m in by_type.get(5, []) if first(m, "flowid") == i]
        a2p = [m for m in data if first(m, "direction") == 0]
        p2a = [m for m in data if first(m, "direction") == 1]
        c.check(len(a2p) >= 5 * RUNTIME, "%s: flow %d: %d DATA active->passive" % (label, i, len(a2p)))
        c.eq(sorted({first(m, "length") for m in a2p}), [out_size], "%s: flow %d outbound DATA size" % (label, i))
        if in_size:
            c.check(len(p2a) >= 2 * RUNTIME, "%s: flow %d: %d DATA passive->active" % (label, i, len(p2a)))
            c.eq(sorted({first(m, "length") for m in p2a}), [in_size], "%s: flow %d inbound DATA size" % (label, i))
        else:
            c.eq(len(p2a), 0, "%s: flow %d: no inbound DATA" % (label, i))
        for d in (a2p, p2a):
            seqs = [first(m, "seqnumber") for m in d]
            c.eq(seqs, list(range(len(seqs))), "%s: flow %d SeqNumbers 0..n-1 in order" % (label, i))
        c.eq(sorted({(m["transport"], first(m, "streamid"), m.get("sid", sid)) for m in data}),
             [(tr, sid, sid)] if data else [], "%s: flow %d DATA transport, StreamID, SCTP stream" % (label, i))
        c.check(all(base in (m["sport"], m["dport"]) for m in data), "%s: flow %d DATA on BASE" % (label, i))
        c.check(all(m.get("flow.description") for m in data), "%s: flow %d DATA linked to ADD_FLOW" % (label, i))
        c.check(all(m.get("flow.identify_in") for m in data), "%s: flow %d DATA linked to IDENTIFY" % (label, i))
        c.check(all(first(m, "flow.protocol") == proto for m in data),
                "%s: flow %d DATA shows protocol %d" % (label, i, proto))
        st = logged_stats.get(i, {})
        if "tx" in st:
            lens = [first(m, "length") for m in a2p]
            c.eq((len(lens), sum(lens)), (st["tx"][1], st["tx"][0]),
                 "%s: flow %d DATA active->passive (messages, bytes) == logged transmission" % (label, i))
        if "rx" in st:
            lens = [first(m, "length") for m in p2a]
            c.check(len(lens) >= st["rx"][1] and sum(lens) >= st["rx"][0],
                    "%s: flow %d DATA passive->active %d msgs/%d B >= logged reception %d/%d"
                    % (label, i, len(lens), sum(lens), st["rx"][1], st["rx"][0]))
    c.eq(sorted({first(m, "flowid") for m in by_type.get(5, [])}), list(range(n_flows)), "%s: DATA flow IDs" % label)
    lost = [m["frame"] for m in msgs if m.get("seq.lost") or m.get("seq.reordered")]
    c.eq(lost, [], "%s: no lost/reordered DATA" % label)

    # The statistics tap splits the flows by measurement, flow, stream and
    # direction; its counts are the logged ones.
    import npmp_test as T
    stats = T.parse_stat(ts.run(["-n", "-q", "-r", pcap] + ts.ours() + prefs + ["-z", "npmp,stat"]).stdout)
    mkey = "0x%016x" % (mid or 0)
    want_rows = sorted([(mkey, i, f[3], "A->P") for i, f in enumerate(FLOWS)] +
                       [(mkey, i, f[3], "P->A") for i, f in enumerate(FLOWS) if f[5]])
    c.eq(sorted(stats["flows"]), want_rows, "%s: -z npmp,stat flow rows (measurement, flow, stream, dir)" % label)
    for i in range(n_flows):
        st = logged_stats.get(i, {})
        row = stats["flows"].get((mkey, i, FLOWS[i][3], "A->P"))
        if "tx" in st and row:
            c.eq(row[:2], (st["tx"][1], st["tx"][0]),
                 "%s: -z npmp,stat flow %d A->P == logged transmission" % (label, i))
    c.eq(stats["types"].get("Data", (0, 0))[0], len(by_type.get(5, [])), "%s: -z npmp,stat DATA count" % label)

    c.eq(len(by_type.get(6, [])), 1, "%s: one START" % label)
    c.eq(len(by_type.get(7, [])), 1, "%s: one STOP" % label)
    acks = by_type.get(1, [])
    # OK, or OK with the per-path vector following (REMOVE_FLOW of a TCP, MPTCP or SCTP flow)
    c.check(all(first(m, "status") in (0, 5) for m in acks), "%s: all ACKs OK" % label)
    c.eq(sum(first(m, "status") == 5 for m in acks), sum(f[0] != "-udp" for f in FLOWS),
         "%s: a per-path vector for every flow but UDP's" % label)
    c.check(len(acks) >= 2 * n_flows + 2, "%s: %d ACKs (ADD_FLOW, IDENTIFY, START, STOP)" % (label, len(acks)))
    for t, name in ((6, "START"), (7, "STOP")):
        req = by_type.get(t, [])
        if req:
            later = [m for m in acks if m["frame"] >= req[0]["frame"] and m["transport"] == "sctp"
                     and m["sport"] == base + 1]
            c.check(len(later) >= 1, "%s: %s acknowledged over the control association" % (label, name))
    res = by_type.get(8, [])
    c.check(len(res) >= 1, "%s: %d RESULTS" % (label, len(res)))
    if res:
        c.eq(first(res[-1], "results.flags.eof"), 1, "%s: last RESULTS has EOF" % label)
        # One EOF per downloaded results file (scalars, vectors, per-flow vectors).
        eofs = [m for m in res if first(m, "results.flags.eof")]
        files = len(re.findall(r"Downloading .*results", active_out))
        c.check(len(eofs) >= 2, "%s: %d RESULTS with EOF (one per results file)" % (label, len(eofs)))
        if files:
            c.eq(len(eofs), files, "%s: RESULTS with EOF == results files the active logs downloading" % label)
        short = [m["frame"] for m in res if first(m, "results.flags.eof") == 0 and first(m, "length") != 1404]
        c.eq(short, [], "%s: RESULTS chunks before EOF are full (1404 B)" % label)
        c.eq([m["frame"] for m in res if first(m, "length") > 1404], [], "%s: RESULTS <= 1404 B" % label)
    return msgs


def main(args, Tshark, Checker, make_world_dir, skip, kernel=False):
    """Userland SCTP over UDP on this host's loopback; with `kernel`, kernel SCTP in a VM."""
    if os.geteuid() != 0:
        skip("capturing on lo needs root")
    if not args.netperfmeter or not os.access(args.netperfmeter, os.X_OK):
        skip("netperfmeter binary not found: %s" % args.netperfmeter)
    args.netperfmeter = os.path.abspath(args.netperfmeter)  # it runs in the work dir
    help_text = subprocess.run([args.netperfmeter, "--help"], capture_output=True, text=True).stdout
    if "--sctp-stack" not in help_text:
        skip("this netperfmeter has no userland SCTP (--sctp-stack)")
    if kernel:
        setup = Setup("realcapture-kernel-sctp", KERNEL_FLOWS, {k: 0 for k in KNOB_FIELDS}, [])
        capture = capture_in_vm
    else:
        setup = Setup("realcapture-sctp", FLOWS, KNOB_FIELDS, ["-d", "udp.port==%d,sctp" % args.sctp_udp_port])
        capture = capture_run
    work = make_world_dir()
    ok = True
    try:
        t0 = time.time()
        try:
            pcap, base, out = capture(args, work, skip)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("ERROR: the netperfmeter run failed, nothing to decode:\n%s" % e)
            return 1
        print("run and capture: %.1f s" % (time.time() - t0))
        impls, results, decoded = decode_with_each(
            args, work, Tshark, Checker, setup.name + "-",
            lambda c, ts: analyse(c, ts, pcap, base, out, ts.impl, setup))
        ok = decoded and ok
        if args.plugin and os.path.exists(args.plugin):
            # The built-in dissector decodes SCTP PPIDs 36/37 completely (and
            # TCP by heuristics, first message of a segment only): where it
            # decodes, ours must agree.
            import npmp_test as T
            tb = Tshark("builtin", work)
            tb.verify_loaded()
            prefs = setup.decode + ["-o", "npmp.tcp_ports:%d-%d" % (base - 1, base + 1)]
            c = Checker(setup.name + "-builtin")
            T.compare_builtin(c, impls[0].messages(pcap, "npmp", prefs),
                              tb.messages(pcap, "netperfmeter", setup.decode), "real-sctp", True, 20)
            ok = c.finish() and ok
        ok = conclude(ok, results, Checker, setup.name, out, pcap, args.keep)
        print("total: %.1f s" % (time.time() - t0))
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
