"""Real-capture test over QUIC: capture a loopback netperfmeter run with QUIC flows and decode
NPMP inside the decrypted QUIC streams.

Called by npmp_test.py realcapture-quic.  Runs (as root, capture on lo):

    netperfmeter BASE -nodisplay -tls-key K -tls-cert C --sctp-udp-port=P       (passive)
    SSLKEYLOGFILE=DIR/keys.log netperfmeter 127.0.0.1:BASE -control-over-tcp -tls-ca C \\
        -runtime=1 -nodisplay -quic BULK VOICE -scalar=DIR/run.sca -loglevel=1   (active)

BULK sends 12000-byte frames cut into 400-byte messages (several messages in one STREAM frame,
messages cut at packet boundaries), VOICE 3000-byte messages both ways (each one larger than
a QUIC packet, so split over several STREAM frames).  BULK is not saturated (const0): that put
75 MB, 188000 messages, into 1 s here, too much for two decoders in the test's time budget;
each of its frames is a 30-message burst that fills packets back to back as a saturated flow
does.  One QUIC connection to UDP BASE-1, ALPN
netperfmeter/data, flow n on the client's stream (n << 2) | 2 and the server's (n << 2) | 3.

The capture is decoded with `-o tls.keylog_file:DIR/keys.log` by the C plugin and by the Lua
twin (same checks): the QUIC packets decrypt; per flow one IDENTIFY on the client's stream,
and per flow and direction the DATA messages have the flow's ID, the stream's number and type,
the requested sizes, sequence numbers 0..n-1 without loss or reordering, and as many messages
and bytes as the sender's scalars say it transmitted; C == Lua message by message.  Without
the key log the same capture holds no NPMP in its QUIC packets (the control connection over
TCP still decodes).
"""
import os
import shutil
import socket
import subprocess
import sys

from npmp_realcapture import conclude, decode_with_each, listening, pick_base, pick_udp_port, run_captured
from npmp_realcapture_sctp import udp_bound

# The integration tests' scalar reader and their CA and server certificate (localhost, 127.0.0.1)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import read_scalars  # noqa: E402

# (description, FLOWSPEC, outbound message size, inbound message size)
FLOWS = [
    ("Bulk", "const100:const12000:const10:const2000:maxmsgsize=400:description=Bulk", 400, 400),
    ("Voice", "const20:const3000:const20:const3000:description=Voice", 3000, 3000),
]
RUNTIME = 1
PROTO_QUIC = 261
PI_ERROR = "8388608"


def capture_run(args, work, skip):
    """Returns (pcap, key log, base port, {side: scalars}, active output)."""
    udp_port = pick_udp_port(args.sctp_udp_port, skip, "the passive's userland SCTP")
    # QUIC on UDP BASE-1 (control on TCP BASE+1, the passive's other listeners on BASE)
    base = pick_base(args.port, skip, lambda base: [(base - 1, socket.SOCK_DGRAM), (udp_port, socket.SOCK_DGRAM)])
    from test_quic import make_certificates  # noqa: E402  (imported here: it picks its ports when imported)
    files = make_certificates(work)
    key, cert, ca = files["server.key"], files["server.pem"], files["ca.pem"]
    keylog = os.path.join(work, "keys.log")
    outdir = os.path.join(work, "results")
    os.makedirs(outdir)
    active_cmd = [args.netperfmeter, "127.0.0.1:%d" % base, "-control-over-tcp", "-tls-ca", ca,
                  "-runtime=%d" % RUNTIME, "-nodisplay", "-quic"] + [spec for _, spec, _, _ in FLOWS] + [
                  "-scalar=" + os.path.join(outdir, "run.sca"), "-loglevel=1"]
    print("SSLKEYLOGFILE=" + keylog)
    try:
        pcap, out = run_captured(work, "udp port %d or tcp port %d" % (base - 1, base + 1),
                                 [args.netperfmeter, str(base), "-nodisplay", "-loglevel=1",
                                  "--sctp-udp-port=%d" % udp_port, "-tls-key", key, "-tls-cert", cert],
                                 lambda: listening(base + 1) and udp_bound(base - 1), active_cmd, skip,
                                 keep=args.keep, env={"SSLKEYLOGFILE": keylog})
    finally:
        if os.path.exists(keylog):
            os.chmod(keylog, 0o644)
            if args.keep:
                shutil.copy(keylog, args.keep + ".keys")
    scalars = {side: read_scalars(os.path.join(outdir, "run-%s.sca" % side)) for side in ("active", "passive")}
    return pcap, keylog, base, scalars, out


FRAME_FIELDS = ["udp.srcport", "quic.stream.stream_id", "quic.decryption_failed", "tls.handshake.extensions_alpn_str",
                "npmp.type", "_ws.malformed", "_ws.expert.severity", "_ws.expert.message"]


def first(m, k):
    v = m.get(k)
    return int(v[0], 0) if v else None


def analyse(c, ts, pcap, keylog, base, scalars, label):
    prefs = ["-o", "npmp.tcp_ports:%d-%d" % (base - 1, base + 1)]
    keys = ["-o", "tls.keylog_file:" + keylog]
    F = ts.fields(pcap, FRAME_FIELDS, prefs + keys)
    quic_frames = [n for n, f in F.items() if f["udp.srcport"]]
    c.check(len(quic_frames) > 100, "%s: %d QUIC datagrams captured" % (label, len(quic_frames)))
    c.check(any("netperfmeter/data" in f["tls.handshake.extensions_alpn_str"] for f in F.values()),
            "%s: the handshake offers ALPN netperfmeter/data" % label)
    # The QUIC packets decrypt: no decryption failure, STREAM frames seen.
    c.eq([n for n in quic_frames if F[n]["quic.decryption_failed"]], [], "%s: QUIC decryption failures" % label)
    c.check(sum(1 for n in quic_frames if F[n]["quic.stream.stream_id"]) > 50,
            "%s: decrypted STREAM frames" % label)
    c.eq([n for n, f in F.items() if f["_ws.malformed"]], [], "%s: frames with _ws.malformed" % label)
    errs = [(n, f["_ws.expert.message"]) for n, f in F.items() if PI_ERROR in f["_ws.expert.severity"]]
    c.eq(errs, [], "%s: expert errors" % label)

    M = ts.messages(pcap, "npmp", prefs + keys)
    msgs = []
    for n in sorted(M):
        if not F.get(n, {}).get("udp.srcport"):
            continue  # control over TCP
        for m in M[n]:
            msgs.append(dict(frame=n, **{k[5:]: v for k, v in m.items() if k.startswith("npmp.")}))
    c.check(all(m.get("quic.stream_id") for m in msgs), "%s: every NPMP message in QUIC has its Stream ID" % label)

    # ADD_FLOW on the control connection says QUIC for both flows.
    addflows = [m for ms in M.values() for m in ms if first(m, "npmp.type") == 2]
    c.eq(sorted((first(m, "npmp.flowid"), first(m, "npmp.protocol")) for m in addflows),
         [(i, PROTO_QUIC) for i in range(len(FLOWS))], "%s: ADD_FLOW per flow with protocol QUIC" % label)

    result = []
    for i, (name, spec, out_size, in_size) in enumerate(FLOWS):
        mine = [m for m in msgs if first(m, "flowid") == i]
        ids = [m for m in mine if first(m, "type") == 4]
        c.eq([(first(m, "quic.stream_id"), first(m, "streamid"), first(m, "quic.stream_type")) for m in ids],
             [((i << 2) | 2, i, 2)], "%s: flow %d: one IDENTIFY on the client's stream %d" % (label, i, (i << 2) | 2))
        for direction, stype, size, sender in ((0, 2, out_size, "active"), (1, 3, in_size, "passive")):
            data = [m for m in mine if first(m, "type") == 5 and first(m, "direction") == direction]
            what = "%s: flow %d %s" % (label, i, "active->passive" if direction == 0 else "passive->active")
            c.check(len(data) >= 10, "%s: %d DATA" % (what, len(data)))
            c.eq(sorted({(first(m, "quic.stream_id"), first(m, "quic.stream_number"), first(m, "quic.stream_type"),
                          first(m, "streamid")) for m in data}), [((i << 2) | stype, i, stype, i)],
                 "%s: DATA on stream %d (number %d, type %d)" % (what, (i << 2) | stype, i, stype))
            c.eq(sorted({first(m, "length") for m in data}), [size], "%s: DATA sizes" % what)
            seqs = [first(m, "seqnumber") for m in data]
            c.eq(seqs, list(range(len(seqs))), "%s: SeqNumbers 0..n-1 in order" % what)
            c.eq([m["frame"] for m in data if m.get("seq.lost") or m.get("seq.reordered")], [],
                 "%s: no lost or reordered DATA" % what)
            c.check(all(m.get("flow.identify_in") and m.get("flow.description") == [name] for m in data),
                    "%s: DATA linked to ADD_FLOW (%s) and IDENTIFY" % (what, name))
            obj = "netPerfMeter.%s.flow[%d]" % (sender, i)
            sent = (scalars[sender].get((obj, "Transmitted Packets")), scalars[sender].get((obj, "Transmitted Bytes")))
            c.eq((len(data), sum(first(m, "length") for m in data)), sent,
                 "%s: DATA (messages, bytes) == the %s's Transmitted Packets/Bytes" % (what, sender))
            result.append((i, direction, len(data)))
    # Reassembly both ways: several messages in one STREAM frame (BULK's 400-byte messages),
    # and messages larger than a packet (VOICE's 3000 bytes: all of them decoded above).
    per_frame = {}
    for m in msgs:
        key = (m["frame"], first(m, "quic.stream_id"))
        per_frame[key] = per_frame.get(key, 0) + 1
    packed = sum(1 for n in per_frame.values() if n >= 2)
    c.check(packed >= 10, "%s: %d packets with several messages of one stream" % (label, packed))
    print("  %s: DATA per (flow, direction): %s; %d packets with several messages of one stream"
          % (label, result, packed))
    return [(m["frame"], sorted((k, v) for k, v in m.items() if k != "frame")) for m in msgs]


def check_without_keys(c, ts, pcap, base, label):
    """Without the key log nothing in the QUIC packets decodes as NPMP; the control connection does."""
    F = ts.fields(pcap, ["udp.srcport", "quic.stream.stream_id", "npmp.type"],
                  ["-o", "npmp.tcp_ports:%d-%d" % (base - 1, base + 1), "-o", "tls.keylog_file:"])
    udp = [f for f in F.values() if f["udp.srcport"]]
    c.check(len(udp) > 100, "%s: %d QUIC datagrams" % (label, len(udp)))
    c.eq(sum(len(f["quic.stream.stream_id"]) for f in udp), 0, "%s: STREAM frames without the key log" % label)
    c.eq(sum(len(f["npmp.type"]) for f in udp), 0, "%s: NPMP messages in QUIC without the key log" % label)
    c.check(sum(len(f["npmp.type"]) for f in F.values() if not f["udp.srcport"]) > 0,
            "%s: the control connection (TCP) still decodes" % label)


def main(args, Tshark, Checker, make_world_dir, skip):
    if os.geteuid() != 0:
        skip("capturing on lo needs root")
    if not args.netperfmeter or not os.access(args.netperfmeter, os.X_OK):
        skip("netperfmeter binary not found: %s" % args.netperfmeter)
    if args.quic_built != "ON":
        skip("the build has no QUIC (NPM_QUIC_BUILT is %r)" % args.quic_built)
    if not shutil.which("openssl"):
        skip("openssl is not installed (the passive's certificate)")
    work = make_world_dir()
    try:
        try:
            pcap, keylog, base, scalars, out = capture_run(args, work, skip)
        except (RuntimeError, subprocess.TimeoutExpired, subprocess.CalledProcessError) as e:
            print("ERROR: the netperfmeter run failed, nothing to decode:\n%s" % e)
            return 1
        impls, results, ok = decode_with_each(
            args, work, Tshark, Checker, "realcapture-quic-",
            lambda c, ts: analyse(c, ts, pcap, keylog, base, scalars, ts.impl))
        for ts in impls:
            c = Checker("realcapture-quic-nokeys-" + ts.impl)
            check_without_keys(c, ts, pcap, base, ts.impl)
            ok = c.finish() and ok
        ok = conclude(ok, results, Checker, "realcapture-quic", out, pcap, args.keep, [(keylog, "keys")])
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
