"""Real-capture test: capture a loopback netperfmeter run and decode it.

Called by npmp_test.py realcapture.  Runs (as root, capture on lo):

    netperfmeter BASE -nodisplay                                  (passive)
    netperfmeter 127.0.0.1:BASE -control-over-tcp -runtime=2 -nodisplay \\
        -tcp const10:const1000:const10:const1000 \\
        -udp const10:const500:const5:const500 -mptcp const10:const800 \\
        -scalar=DIR/run.sca -vector=DIR/run.vec -loglevel=1        (active)

and checks the capture with the C plugin and the Lua twin (same checks):
zero malformed, every payload byte of the NPMP connections inside a decoded
message, flow IDs 0..n-1 with the protocols of the command line, one ADD_FLOW,
IDENTIFY and REMOVE_FLOW per flow, START/STOP acknowledged, DATA sizes as
requested, no sequence gaps, RESULTS chunks of 1404 bytes ending with EOF,
and one measurement ID everywhere (the one the active logs as $<hex>).
The checks rely on the capture and the command line, not on log wording.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

# The test harness of the integration tests: its Capture (tshark, ready when it takes packets).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
import harness  # noqa: E402

# Flows of the command line: (option, spec, protocol number, data port offset,
# outbound message size, inbound message size or None)
FLOWS = [
    ("-tcp", "const10:const1000:const10:const1000", 6, 0, 1000, 1000),
    ("-udp", "const10:const500:const5:const500", 17, 0, 500, 500),
    ("-mptcp", "const10:const800", 262, -1, 800, None),
]
RUNTIME = 2
SEED = 9007199254740991   # -seed: the largest run seed, in every ADD_FLOW


def select_flows(names):
    """--flows tcp,udp,mptcp (default all): a subset of FLOWS, in this order."""
    if not names:
        return list(FLOWS)
    want = [n.strip().lower() for n in names.split(",")]
    return [f for f in FLOWS if f[0][1:] in want]


def bind_free(port, kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    try:
        s.bind(("0.0.0.0", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def ports_free(base, extra=()):
    """Whether TCP BASE-1..BASE+1, UDP BASE and the (port, socket kind) pairs of extra are free."""
    wanted = [(base - 1, socket.SOCK_STREAM), (base, socket.SOCK_STREAM), (base + 1, socket.SOCK_STREAM),
              (base, socket.SOCK_DGRAM), *extra]
    return all(bind_free(port, kind) for port, kind in wanted)


def pick_base(first, skip, extra=lambda base: ()):
    """A base port in 18001-18998, from first on in steps of 3, whose ports are free
    (ports_free with extra(base)); skips the test if there is none."""
    base = first
    for _ in range(40):
        if 18001 <= base <= 18998 and ports_free(base, extra(base)):
            return base
        base += 3
        if base > 18998:
            base = 18001
    skip("no free port triple in 18000-18999")


def pick_udp_port(first, skip, what):
    """The first free UDP port of first..first+19; skips the test if there is none."""
    for port in range(first, first + 20):
        if bind_free(port, socket.SOCK_DGRAM):
            return port
    skip("no free UDP port in %d-%d for %s" % (first, first + 19, what))


def listening(port):
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    p = line.split()
                    if int(p[1].rsplit(":", 1)[1], 16) == port and p[3] == "0A":
                        return True
        except OSError:
            pass
    return False


def stop_process(proc, sig=signal.SIGINT, timeout=10):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_captured(work, bpf, passive_cmd, ready, active_cmd, skip, keep=None, env=None):
    """Captures lo (tshark -f bpf, the test harness's Capture) into work/run.pcapng while a
    passive netperfmeter (passive_cmd) runs and, once ready() says its listeners are up and its
    log says it waits for connections (every listener open), the active (active_cmd,
    environment env). Returns (pcap, active output); raises RuntimeError when the capture, the
    passive or the active fails."""
    pcap = os.path.join(work, "run.pcapng")
    try:
        capture = harness.Capture(pcap, bpf)
    except FileNotFoundError:
        skip("no tshark")
    passive = None
    plog_name = os.path.join(work, "passive.log")
    try:
        try:
            capture.__enter__()
        except RuntimeError as e:
            if capture.proc.poll() is not None:  # tshark gave up: no capture on lo here
                skip("cannot capture on lo: " + str(e))
            raise
        with open(plog_name, "w") as plog:
            passive = subprocess.Popen(passive_cmd, stdout=plog, stderr=subprocess.STDOUT, cwd=work)
        deadline = time.time() + 15
        while not (ready() and "waiting for incoming connections" in harness.read_text(plog_name)):
            if passive.poll() is not None:
                raise RuntimeError("passive netperfmeter exited with %d:\n%s"
                                   % (passive.returncode, open(plog_name).read()))
            if time.time() > deadline:
                raise RuntimeError("passive netperfmeter did not get ready:\n" + open(plog_name).read())
            time.sleep(0.02)
        print("active:", " ".join(active_cmd))
        act = subprocess.run(active_cmd, capture_output=True, text=True, timeout=120, cwd=work,
                             env=dict(os.environ, **(env or {})))
        out = act.stdout + act.stderr
        if act.returncode != 0:
            raise RuntimeError("active netperfmeter exited with %d:\n%s\n--- passive log ---\n%s"
                               % (act.returncode, out[-4000:], open(plog_name).read()[-4000:]))
    finally:
        stop_process(passive)
        capture.__exit__(None, None, None)  # once everything sent is in the file
        if os.path.exists(pcap):
            capture.without_markers()
            os.chmod(pcap, 0o644)
            if keep:
                shutil.copy(pcap, keep)
    return pcap, out


def capture_run(args, work, skip):
    """Returns (pcap path, base port, active output text, active command)."""
    base = pick_base(args.port, skip)
    outdir = os.path.join(work, "results")
    os.makedirs(outdir)
    active_cmd = [args.netperfmeter, "127.0.0.1:%d" % base, "-control-over-tcp",
                  "-runtime=%d" % RUNTIME, "-nodisplay", "-seed=%d" % SEED]
    for opt, spec, *_ in args.flow_list:
        active_cmd += [opt, spec]
    active_cmd += ["-scalar=" + os.path.join(outdir, "run.sca"),
                   "-vector=" + os.path.join(outdir, "run.vec"), "-loglevel=1"]
    pcap, out = run_captured(work, "tcp portrange %d-%d or udp port %d" % (base - 1, base + 1, base),
                             [args.netperfmeter, str(base), "-nodisplay", "-loglevel=1"],
                             lambda: listening(base + 1) and listening(base), active_cmd, skip, keep=args.keep)
    return pcap, base, out, active_cmd


FRAME_FIELDS = ["tcp.stream", "udp.stream", "tcp.srcport", "tcp.dstport", "udp.srcport", "udp.dstport",
                "tcp.len", "udp.length", "tcp.analysis.retransmission", "npmp.length",
                "_ws.malformed", "_ws.expert.severity", "_ws.expert.message"]


def analyse(c, ts, pcap, base, active_out, label, args):
    flows = args.flow_list
    n_flows = len(flows)
    prefs = ["-o", "npmp.tcp_ports:%d-%d" % (base - 1, base + 1), "-o", "npmp.udp_ports:%d" % base]
    F = ts.fields(pcap, FRAME_FIELDS, prefs)
    M = ts.messages(pcap, "npmp", prefs)
    c.check(len(F) > 50, "%s: capture has %d frames" % (label, len(F)))

    # --- zero malformed, no NPMP errors
    c.eq([n for n, f in F.items() if f["_ws.malformed"]], [], "%s: frames with _ws.malformed" % label)
    errs = [(n, f["_ws.expert.message"]) for n, f in F.items() if "8388608" in f["_ws.expert.severity"]]  # PI_ERROR
    c.eq(errs, [], "%s: expert errors" % label)

    # --- every payload byte is inside a decoded message (per connection)
    payload, decoded = {}, {}
    for n, f in F.items():
        if f["tcp.stream"]:
            key = "tcp%s" % f["tcp.stream"][0]
            if f["tcp.analysis.retransmission"]:
                continue
            payload[key] = payload.get(key, 0) + int(f["tcp.len"][0] or 0)
        elif f["udp.stream"]:
            key = "udp%s" % f["udp.stream"][0]
            payload[key] = payload.get(key, 0) + int(f["udp.length"][0]) - 8
        else:
            continue
        decoded[key] = decoded.get(key, 0) + sum(int(x) for x in f["npmp.length"])
    c.check(len(payload) >= 1 + n_flows, "%s: %d NPMP connections (control + one per flow)" % (label, len(payload)))
    c.eq(decoded, payload, "%s: decoded message bytes == transport payload bytes per connection" % label)
    # The same without port preferences: the heuristics (ADD_FLOW on control,
    # IDENTIFY/DATA on data connections) find every connection by themselves.
    H = ts.fields(pcap, ["tcp.stream", "udp.stream", "tcp.analysis.retransmission", "npmp.length"])
    heur = {}
    for n, f in H.items():
        key = (("tcp%s" % f["tcp.stream"][0]) if f["tcp.stream"]
               else ("udp%s" % f["udp.stream"][0]) if f["udp.stream"] else None)
        if key and not (f["tcp.stream"] and f["tcp.analysis.retransmission"]):
            heur[key] = heur.get(key, 0) + sum(int(x) for x in f["npmp.length"])
    c.eq(heur, payload, "%s: heuristics alone decode every connection completely" % label)

    # --- message level
    msgs = []
    for n in sorted(M):
        f = F.get(n, {})
        tr = "tcp" if f.get("tcp.stream") else "udp"
        sport = int((f.get(tr + ".srcport") or ["0"])[0])
        dport = int((f.get(tr + ".dstport") or ["0"])[0])
        for m in M[n]:
            msgs.append(dict(frame=n, transport=tr, sport=sport, dport=dport,
                             **{k[5:]: v for k, v in m.items() if k.startswith("npmp.")}))

    def first(m, k, conv=int):
        v = m.get(k)
        return conv(v[0], 0) if conv is int and v else (conv(v[0]) if v else None)

    by_type = {}
    for m in msgs:
        by_type.setdefault(first(m, "type"), []).append(m)
    addflows = by_type.get(2, [])
    c.eq(sorted(first(m, "flowid") for m in addflows), list(range(n_flows)), "%s: ADD_FLOW flow IDs" % label)
    c.eq([first(m, "protocol") for m in sorted(addflows, key=lambda m: first(m, "flowid"))],
         [f[2] for f in flows], "%s: ADD_FLOW protocols in command-line order" % label)
    # -seed travels to the passive in every ADD_FLOW (bytes 184-191), as given.
    c.eq([first(m, "addflow.seed") for m in addflows], [SEED] * n_flows, "%s: ADD_FLOW seed" % label)
    meas = {m["measurementid"][0] for m in msgs if "measurementid" in m}
    c.eq(len(meas), 1, "%s: one measurement ID in the capture (%s)" % (label, meas))
    mid = int(next(iter(meas)), 16) if meas else None
    logged = {int(x, 16) for x in re.findall(r"\$([0-9A-Fa-f]{1,16})\b", active_out)}
    if logged:
        c.check(mid in logged, "%s: measurement ID %x among the logged $<hex> IDs %s"
                % (label, mid or 0, sorted("%x" % x for x in logged)))
    else:
        print("  note: the active's output has no $<hex> measurement ID")

    ids = by_type.get(4, [])
    for i, (opt, spec, proto, poff, out_size, in_size) in enumerate(flows):
        mine = [m for m in ids if first(m, "flowid") == i]
        retries_ok = 1 <= len(mine) <= (5 if proto == 17 else 1)
        c.check(retries_ok, "%s: flow %d (%s): %d IDENTIFY" % (label, i, opt, len(mine)))
        if mine:
            m = mine[0]
            c.eq((m["transport"], m["dport"]), ("udp" if proto == 17 else "tcp", base + poff),
                 "%s: flow %d IDENTIFY on the data port" % (label, i))
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
        c.check(all(m.get("flow.description") for m in data), "%s: flow %d DATA linked to ADD_FLOW" % (label, i))
        c.check(all(m.get("flow.identify_in") for m in data), "%s: flow %d DATA linked to IDENTIFY" % (label, i))
        c.check(all(m["transport"] == ("udp" if proto == 17 else "tcp") and base + poff in (m["sport"], m["dport"])
                    for m in data), "%s: flow %d DATA on its data port" % (label, i))
    c.eq(sorted({first(m, "flowid") for m in by_type.get(5, [])}), list(range(n_flows)), "%s: DATA flow IDs" % label)

    # Per-flow statistics the active prints at the end, if it does ("Flow #N ...",
    # "Transmission B bytes ..., P packets", "Reception B bytes ..., P packets").
    logged_stats = parse_flow_stats(active_out)
    if not logged_stats:
        print("  note: no per-flow Transmission/Reception lines in the active's output")
    for fid, st in sorted(logged_stats.items()):
        data = [m for m in by_type.get(5, []) if first(m, "flowid") == fid]
        a2p = [first(m, "length") for m in data if first(m, "direction") == 0]
        p2a = [first(m, "length") for m in data if first(m, "direction") == 1]
        if "tx" in st:
            c.eq((len(a2p), sum(a2p)), (st["tx"][1], st["tx"][0]),
                 "%s: flow %d DATA active->passive (messages, bytes) == logged transmission" % (label, fid))
        if "rx" in st:
            c.check(len(p2a) >= st["rx"][1] and sum(p2a) >= st["rx"][0],
                    "%s: flow %d DATA passive->active %d msgs/%d B >= logged reception %d/%d"
                    % (label, fid, len(p2a), sum(p2a), st["rx"][1], st["rx"][0]))
    lost = [m["frame"] for m in msgs if m.get("seq.lost") or m.get("seq.reordered")]
    c.eq(lost, [], "%s: no lost/reordered DATA" % label)

    c.eq(len(by_type.get(6, [])), 1, "%s: one START" % label)
    c.eq(len(by_type.get(7, [])), 1, "%s: one STOP" % label)
    removes = by_type.get(3, [])
    c.eq(sorted(first(m, "flowid") for m in removes), list(range(n_flows)), "%s: REMOVE_FLOW per flow" % label)
    acks = by_type.get(1, [])
    # OK, or OK with the per-path vector following (REMOVE_FLOW of a TCP, MPTCP or SCTP flow)
    c.check(all(first(m, "status") in (0, 5) for m in acks), "%s: all ACKs OK" % label)
    c.eq(sum(first(m, "status") == 5 for m in acks), sum(f[0] != "-udp" for f in flows),
         "%s: a per-path vector for every flow but UDP's" % label)
    c.check(len(acks) >= 2 * n_flows + 2, "%s: %d ACKs (ADD_FLOW, IDENTIFY, START, STOP)" % (label, len(acks)))
    ctl = {m["dport"] for m in msgs if first(m, "type") in (2, 3, 6, 7)}
    c.eq(ctl, {base + 1}, "%s: control messages on BASE+1" % label)
    res = by_type.get(8, [])
    c.check(len(res) >= 1, "%s: %d RESULTS" % (label, len(res)))
    if res:
        c.eq(first(res[-1], "results.flags.eof"), 1, "%s: last RESULTS has EOF" % label)
        short = [m["frame"] for m in res if first(m, "results.flags.eof") == 0 and first(m, "length") != 1404]
        c.eq(short, [], "%s: RESULTS chunks before EOF are full (1404 B)" % label)
        big = [m["frame"] for m in res if first(m, "length") > 1404]
        c.eq(big, [], "%s: RESULTS <= 1404 B" % label)
    return msgs


def parse_flow_stats(text):
    stats, cur = {}, None
    for line in text.splitlines():
        m = re.search(r"Flow #(\d+) \(", line)
        if m:
            cur = stats.setdefault(int(m.group(1)), {})
            continue
        m = re.search(r"(Transmission|Reception)\s+(\d+) bytes.*?(\d+) packets", line)
        if m and cur is not None:
            cur["tx" if m.group(1) == "Transmission" else "rx"] = (int(m.group(2)), int(m.group(3)))
    return {k: v for k, v in stats.items() if v}


def decode_with_each(args, work, Tshark, Checker, prefix, analyse_one):
    """Runs analyse_one(checker, tshark) for the C plugin (if built) and the Lua twin.
    Returns ({impl: result}, all checks passed)."""
    impls = []
    if args.plugin and os.path.exists(args.plugin):
        impls.append(Tshark("c", work, plugin=args.plugin))
    else:
        print("note: C plugin not built, checking the Lua twin only")
    if args.lua:
        impls.append(Tshark("lua", work, lua=args.lua))
    results, ok = {}, True
    for ts in impls:
        ts.verify_loaded()
        c = Checker(prefix + ts.impl)
        results[ts.impl] = analyse_one(c, ts)
        ok = c.finish() and ok
    return impls, results, ok


def conclude(ok, results, Checker, name, out, pcap, keep, extra=()):
    """C == Lua (when both ran); on a failure the active's output, and the capture (with the
    files of extra, as <capture>.<suffix> for each (path, suffix)) kept in /tmp unless --keep
    has kept it.  Returns whether everything passed."""
    if len(results) == 2:
        c = Checker(name + "-parity")
        lua, cc = results["lua"], results["c"]
        if isinstance(lua, list) and isinstance(cc, list):  # only the first difference, not thousands of messages
            diff = next(((i, x, y) for i, (x, y) in enumerate(zip(lua, cc)) if x != y), None)
            what = "first difference (index, Lua, C): %r; %d and %d items" % (diff, len(lua), len(cc))
        else:
            what = "Lua %r, C %r" % (lua, cc)
        c.check(lua == cc, "C and Lua decode the real capture identically: " + what)
        ok = c.finish() and ok
    if not ok:
        print("--- active output (tail) ---\n" + out[-3000:])
        if not keep:
            kept = os.path.join("/tmp", "npmp-%s-failed.pcapng" % name)
            shutil.copy(pcap, kept)
            for path, suffix in extra:
                shutil.copy(path, kept + "." + suffix)
            print("capture kept as " + kept)
    return ok


def main(args, Tshark, Checker, make_world_dir, skip):
    if os.geteuid() != 0:
        skip("capturing on lo needs root")
    if not args.netperfmeter or not os.access(args.netperfmeter, os.X_OK):
        skip("netperfmeter binary not found: %s" % args.netperfmeter)
    args.flow_list = select_flows(args.flows)
    if not args.flow_list:
        skip("no flows selected by --flows %s" % args.flows)
    work = make_world_dir()
    ok = True
    try:
        try:
            pcap, base, out, cmd = capture_run(args, work, skip)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("ERROR: the netperfmeter run failed, nothing to decode:\n%s" % e)
            return 1
        impls, results, decoded = decode_with_each(
            args, work, Tshark, Checker, "realcapture-",
            lambda c, ts: analyse(c, ts, pcap, base, out, ts.impl, args))
        ok = decoded and ok
        if args.plugin and os.path.exists(args.plugin):
            # The built-in dissector finds IDENTIFY/DATA by heuristics (first
            # message of a segment only); where it decodes, it must agree.
            import npmp_test as T
            tb = Tshark("builtin", work)
            tb.verify_loaded()
            tc = impls[0]
            prefs = ["-o", "npmp.tcp_ports:%d-%d" % (base - 1, base + 1), "-o", "npmp.udp_ports:%d" % base]
            c = Checker("realcapture-builtin")
            T.compare_builtin(c, tc.messages(pcap, "npmp", prefs), tb.messages(pcap, "netperfmeter"),
                              "real", True, len(args.flow_list))
            ok = c.finish() and ok
        ok = conclude(ok, results, Checker, "realcapture", out, pcap, args.keep)
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
