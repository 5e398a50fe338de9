#!/usr/bin/env python3
"""Crafted pcaps for the NPMP dissector tests (Python standard library only).

Writes classic libpcap files (Ethernet/IPv4) with NPMP messages over TCP,
UDP, SCTP over UDP (RFC 6951, port 9899) and DCCP.  The NPMP messages
come from the tests' codec (tests/lib/npmp.py, reference section 3.3).

    python3 npmp_pcap.py OUTDIR      # writes tcp.pcap, sctp.pcap, dccp.pcap, warmup.pcap

The module also exports the constants the assertions use (MEAS, flow IDs,
frame numbers), so test and pcap cannot disagree silently.
"""
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
MEAS = 0x0123456789ABCDEF     # measurement ID of the crafted runs
MEAS2 = 0x1122334455667788    # a second measurement (unknown flows)
TS0 = 1_700_000_000_000_000   # sender time stamp base, microseconds

ACTIVE = "10.0.0.1"
PASSIVE = "10.0.0.2"


# ---------------------------------------------------------------- NPMP ----
# The tests' one NPMP codec (tests/lib/npmp.py).
from npmp import (ack, add_flow, auth_challenge, auth_hello, auth_response, header as hdr,  # noqa: E402,F401
                  identify, plausible_header, remove_flow, results, start, stop)
import npmp  # noqa: E402


def payload_pattern(n, active=True):
    if active:
        return bytes(30 + (i % 98) for i in range(n))
    return bytes(127 - (i % 98) for i in range(n))


def data(flow, meas, seq, stream=0, frame=None, byteseq=None, payload_len=0,
         flags=0x03, ts=None, active=True):
    ts = TS0 + seq * 1000 if ts is None else ts
    return npmp.data(flow, meas, seq, stream=stream, frame=frame, byteseq=byteseq, ts=ts,
                     payload=payload_pattern(payload_len, active), flags=flags)


# ------------------------------------------------------------- packets ----
def csum16(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ip_bytes(a):
    return bytes(int(x) for x in a.split("."))


def ipv4(src, dst, proto, payload, ident=[0]):
    ident[0] += 1
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident[0] & 0xFFFF, 0x4000,
                    64, proto, 0, ip_bytes(src), ip_bytes(dst))
    h = h[:10] + struct.pack("!H", csum16(h)) + h[12:]
    return h + payload


def ether(ip_packet):
    return b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x08\x00" + ip_packet


def pseudo(src, dst, proto, length):
    return ip_bytes(src) + ip_bytes(dst) + struct.pack("!BBH", 0, proto, length)


def udp(src, sport, dst, dport, payload):
    seg = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    return ether(ipv4(src, dst, 17, seg))


class TcpConn:
    """A TCP connection without handshake; keeps the sequence numbers right."""

    def __init__(self, a, aport, b, bport):
        self.ep = {0: (a, aport), 1: (b, bport)}
        self.seq = {0: 1000, 1: 5000}

    def send(self, direction, payload):
        (src, sport), (dst, dport) = self.ep[direction], self.ep[1 - direction]
        hdr_ = struct.pack("!HHIIBBHHH", sport, dport, self.seq[direction], self.seq[1 - direction],
                           5 << 4, 0x18, 65535, 0, 0)
        c = csum16(pseudo(src, dst, 6, len(hdr_) + len(payload)) + hdr_ + payload)
        hdr_ = hdr_[:16] + struct.pack("!H", c) + hdr_[18:]
        self.seq[direction] = (self.seq[direction] + len(payload)) & 0xFFFFFFFF
        return ether(ipv4(src, dst, 6, hdr_ + payload))


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


class SctpAssoc:
    """SCTP over UDP (port 9899) carrying DATA chunks."""

    def __init__(self, aport, bport):
        self.ports = {0: (aport, bport), 1: (bport, aport)}
        self.tsn = {0: 100, 1: 900}
        self.ssn = {}

    def send(self, direction, chunks):
        """chunks: list of (stream, ppid, message)."""
        sport, dport = self.ports[direction]
        body = b""
        for stream, ppid, msg in chunks:
            ssn = self.ssn.get((direction, stream), 0)
            self.ssn[(direction, stream)] = ssn + 1
            ch = struct.pack("!BBHIHHI", 0, 0x03, 16 + len(msg), self.tsn[direction], stream, ssn, ppid) + msg
            self.tsn[direction] += 1
            body += ch + b"\0" * (-len(ch) % 4)
        common = struct.pack("!HHII", sport, dport, 0x11223344, 0)
        pkt = common + body
        c = crc32c(pkt)
        pkt = common[:8] + struct.pack("<I", c) + body
        src, dst = (ACTIVE, PASSIVE) if direction == 0 else (PASSIVE, ACTIVE)
        return udp(src, 9899, dst, 9899, pkt)


def dccp(src, sport, dst, dport, seq, payload):
    # Generic header with X=1 (48-bit sequence numbers), type 2 = DCCP-Data.
    h = struct.pack("!HHBBHBBHI", sport, dport, 4, 0, 0, (2 << 1) | 1, 0, seq >> 32, seq & 0xFFFFFFFF)
    c = csum16(pseudo(src, dst, 33, len(h) + len(payload)) + h + payload)
    h = h[:6] + struct.pack("!H", c) + h[8:]
    return ether(ipv4(src, dst, 33, h + payload))


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        t = 1_700_000_000.0
        for i, fr in enumerate(frames):
            ts = t + i * 0.001
            sec = int(ts)
            usec = int(round((ts - sec) * 1e6))
            f.write(struct.pack("<IIII", sec, usec, len(fr), len(fr)) + fr)


def random_garbage(seed, n):
    rnd = random.Random(seed)
    while True:
        b = bytes(rnd.randrange(256) for _ in range(n))
        if not plausible_header(b):
            return b


# ------------------------------------------------------------ captures ----
# tcp.pcap: frame numbers are asserted on by the tests.
TCP_EVENTS = ((0, 0x00, (1.0, 0.0, 0.0, 0.0)), (2, 0x01, (2.5, 0.0, 0.0, 0.0)))
TCP_SPLIT = (10, 500)           # DATA seq 1 split into 10 + 500 + rest bytes
TCP_DATA_PAYLOAD = 1000


def build_tcp():
    ctl = TcpConn(ACTIVE, 40001, PASSIVE, 9001)
    dat = TcpConn(ACTIVE, 40002, PASSIVE, 9000)
    f = []
    # 1 ADD_FLOW flow 0 (TCP) with two on/off events, 2 ACK
    f.append(ctl.send(0, add_flow(0, MEAS, protocol=6, description=b"tcp flow", flags=0x06,
                                  rate=(10.0, 0, 0, 0), size=(1000.0, 0, 0, 0), rate_rng=0, size_rng=2,
                                  cc=b"cubic", events=TCP_EVENTS, retrans=0x80000000 | 250)))
    f.append(ctl.send(1, ack(0, MEAS)))
    # 3 IDENTIFY + DATA seq 0 in one segment, 4 ACK
    f.append(dat.send(0, identify(0, MEAS) + data(0, MEAS, 0, payload_len=52)))
    f.append(ctl.send(1, ack(0, MEAS)))
    # 5 START, 6 ACK
    f.append(ctl.send(0, start(MEAS, flags=0x05)))
    f.append(ctl.send(1, ack(0, MEAS)))
    # 7,8,9 DATA seq 1 over three segments
    m = data(0, MEAS, 1, payload_len=TCP_DATA_PAYLOAD)
    a, b = TCP_SPLIT
    f.append(dat.send(0, m[:a]))
    f.append(dat.send(0, m[a:a + b]))
    f.append(dat.send(0, m[a + b:]))
    # 10 DATA seq 3 (seq 2 missing), 11 DATA seq 2 (late)
    f.append(dat.send(0, data(0, MEAS, 3, payload_len=100)))
    f.append(dat.send(0, data(0, MEAS, 2, payload_len=100)))
    # 12 passive -> active DATA seq 0 on the same connection
    f.append(dat.send(1, data(0, MEAS, 0, payload_len=20, active=False)))
    # 13 ADD_FLOW flow 1 (UDP), 14 ACK, 15 IDENTIFY over UDP, 16 ACK, 17 DATA flow 1
    f.append(ctl.send(0, add_flow(1, MEAS, protocol=17, description=b"udp flow")))
    f.append(ctl.send(1, ack(1, MEAS)))
    f.append(udp(ACTIVE, 40003, PASSIVE, 9000, identify(1, MEAS)))
    f.append(ctl.send(1, ack(1, MEAS)))
    f.append(udp(ACTIVE, 40003, PASSIVE, 9000, data(1, MEAS, 0, payload_len=10)))
    # 18 DATA on an unknown flow (UDP, port 9000)
    f.append(udp(ACTIVE, 40009, PASSIVE, 9000, data(7, MEAS2, 5, payload_len=10)))
    # 19 random bytes, TCP port 9000; 20 UDP port 9000; 21 TCP port 12345
    f.append(TcpConn(ACTIVE, 40004, PASSIVE, 9000).send(0, random_garbage(1, 200)))
    f.append(udp(ACTIVE, 40005, PASSIVE, 9000, random_garbage(2, 120)))
    f.append(TcpConn(ACTIVE, 40006, PASSIVE, 12345).send(0, random_garbage(3, 300)))
    # 22 heuristic on a non-default TCP port: IDENTIFY flow 2 + DATA in one segment
    f.append(TcpConn(ACTIVE, 40007, PASSIVE, 12000).send(0, identify(2, MEAS2) + data(2, MEAS2, 0)))
    # 23 STOP, 24 ACK, 25 RESULTS + RESULTS(EOF) in one segment
    f.append(ctl.send(0, stop(MEAS)))
    f.append(ctl.send(1, ack(0, MEAS)))
    f.append(ctl.send(1, results(bytes(range(100))) + results(b"", eof=True)))
    # 26 REMOVE_FLOW flow 0, 27 ACK
    f.append(ctl.send(0, remove_flow(0, MEAS)))
    f.append(ctl.send(1, ack(0, MEAS)))
    # 28 UDP (non-default port) with a DATA-like header but random body: it
    #    fails the heuristic (padding, time stamp) and must not be claimed
    f.append(udp(ACTIVE, 40010, PASSIVE, 12002, hdr(5, 0, 60) + random_garbage(4, 56)))
    # 29 STOP on TCP port 15001, 30 RESULTS(EOF) on UDP port 15002: no heuristic
    #    claims these; they decode only with Decode-As or the port preferences
    f.append(TcpConn(ACTIVE, 40011, PASSIVE, 15001).send(0, stop(MEAS2)))
    f.append(udp(PASSIVE, 15002, ACTIVE, 40012, results(b"", eof=True)))
    # 31-33 ordinary traffic on the NetPerfMeter ports must stay untouched:
    # HTTP on TCP 9000, a TLS ClientHello start on TCP 9001, and a DNS query on
    # UDP 9000 whose ID 0x0501 and flags 0x0100 even form a plausible DATA header
    f.append(TcpConn(ACTIVE, 40013, PASSIVE, 9000).send(0, b"GET / HTTP/1.1\r\nHost: example\r\n\r\n"))
    f.append(TcpConn(ACTIVE, 40014, PASSIVE, 9001).send(0, bytes.fromhex("160301005e0100005a0303") + bytes(80)))
    f.append(udp(ACTIVE, 40015, PASSIVE, 9000,
                 bytes.fromhex("050101000001000000000000076578616d706c6503636f6d0000010001")))
    # 34 AUTH_HELLO, 35 AUTH_CHALLENGE, 36 AUTH_RESPONSE (--auth-key-file), 37 ACK with status 3
    #    (authentication required), on a control connection of its own
    auth = TcpConn(ACTIVE, 40016, PASSIVE, 9001)
    f.append(auth.send(0, auth_hello(bytes(range(32)))))
    f.append(auth.send(1, auth_challenge(bytes(range(32, 64)), bytes(range(64, 96)))))
    f.append(auth.send(0, auth_response(bytes(range(96, 128)))))
    f.append(auth.send(1, ack(0, MEAS2, status=3)))
    # 38 ADD_FLOW of a CMT-SCTP flow with this implementation's tuning bits on TCP control:
    #    NR-SACK (bit 3), buffer splitting both (bits 4-5 = 3), SCTP CC H-TCP (bits 6-7 = 2),
    #    RTO.min 300 ms and DAC in NDiffPorts
    knobs = TcpConn(ACTIVE, 40017, PASSIVE, 9001)
    f.append(knobs.send(0, add_flow(3, MEAS2, protocol=132, description=b"cmt knobs", flags=0x08 | 0x30 | 0x80,
                                    cmt=3, ndiffports=300 | 0x8000, runtime=30000, mechanisms=0x0A,
                                    seed=ADDFLOW_SEED)))
    return f


SCTP_EVENTS = ((1, 0x01, (3.0, 0.0, 0.0, 0.0)), (3, 0x00, (1.0, 2.0, 0.0, 0.0)))


def build_sctp():
    ctl = SctpAssoc(5000, 9001)
    dat = SctpAssoc(5001, 9000)
    f = []
    # 1 ADD_FLOW with on/off events (SCTP, stream 0), 2 ACK
    f.append(ctl.send(0, [(0, 36, add_flow(0, MEAS, protocol=132, description=b"sctp flow", flags=0x01,
                                           ordered=0x7FFFFFFF, reliable=0x80000000,
                                           events=SCTP_EVENTS, cmt=1))]))
    f.append(ctl.send(1, [(0, 36, ack(0, MEAS))]))
    # 3 IDENTIFY (ppid 36 on the data association), 4 ACK
    f.append(dat.send(0, [(0, 36, identify(0, MEAS, flags=0x01))]))
    f.append(ctl.send(1, [(0, 36, ack(0, MEAS))]))
    # 5 START, 6 ACK(status 0)
    f.append(ctl.send(0, [(0, 36, start(MEAS, flags=0x0A))]))
    f.append(ctl.send(1, [(0, 36, ack(0, MEAS))]))
    # 7 DATA ppid 37, 8 DATA with the legacy ppid
    f.append(dat.send(0, [(0, 37, data(0, MEAS, 0, payload_len=64, flags=0x01))]))
    f.append(dat.send(0, [(0, 0x29097606, data(0, MEAS, 1, payload_len=64, flags=0x02))]))
    # 9 STOP, 10 ACK, 11 RESULTS, 12 RESULTS EOF
    f.append(ctl.send(0, [(0, 36, stop(MEAS))]))
    f.append(ctl.send(1, [(0, 36, ack(0, MEAS))]))
    f.append(ctl.send(1, [(0, 36, results(b"scalar \"x\" \"y\" 1\n" * 10))]))
    f.append(ctl.send(1, [(0, 36, results(b"", eof=True))]))
    # 13 REMOVE_FLOW, 14 ACK status ERROR
    f.append(ctl.send(0, [(0, 36, remove_flow(0, MEAS))]))
    f.append(ctl.send(1, [(0, 36, ack(0, MEAS, status=1))]))
    # 15 truncated ADD_FLOW: Length 194, only 120 bytes present
    f.append(ctl.send(0, [(0, 36, add_flow(5, MEAS, protocol=6, description=b"short")[:120])]))
    # 16 ADD_FLOW announcing 2 on/off events but Length 194 without them
    f.append(ctl.send(0, [(0, 36, add_flow(6, MEAS, protocol=6, description=b"liar", n_events=2))]))
    # 17 IDENTIFY with a bad magic, 18 unknown message type 200
    f.append(dat.send(0, [(0, 36, identify(0, MEAS, magic=0x1122334455667788))]))
    f.append(ctl.send(0, [(0, 36, hdr(200, 0, 12) + b"\xaa" * 8)]))
    # 19 bundle: START (ppid 36) + DATA (ppid 37) in one packet
    f.append(dat.send(0, [(0, 36, start(MEAS)), (0, 37, data(0, MEAS, 2, payload_len=8))]))
    # 20 DATA on an unknown flow
    f.append(dat.send(0, [(0, 37, data(9, MEAS2, 0, payload_len=8))]))
    # 21 ADD_FLOW whose description (32) and congestion control (16) fill their
    #    fields completely: no terminating NUL
    f.append(ctl.send(0, [(0, 36, add_flow(10, MEAS, protocol=6, description=FULL_DESCRIPTION, cc=FULL_CC))]))
    return f


FULL_DESCRIPTION = b"D123456789abcdefghijklmnopqrst32"
FULL_CC = b"C123456789abcd16"


def build_dccp():
    f = []
    f.append(dccp(ACTIVE, 40020, PASSIVE, 12003, 1, identify(3, MEAS2)))
    f.append(dccp(ACTIVE, 40020, PASSIVE, 12003, 2, data(3, MEAS2, 0, payload_len=30)))
    f.append(dccp(ACTIVE, 40021, PASSIVE, 12004, 1, random_garbage(5, 80)))
    return f


# warmup.pcap: START with the warm-up (offset 4) over TCP control and SCTP.
WARMUP_MS = 2500
ADDFLOW_SEED = 0xFEDCBA9876543210   # above 2^63: the field is unsigned
WARMUP_BIG_MS = 100000          # > 65535: the field is a u32


def build_warmup():
    ctl = TcpConn(ACTIVE, 40030, PASSIVE, 9001)
    sc = SctpAssoc(5010, 9001)
    f = []
    # 1 START warm-up 2500 ms, 2 ACK, 3 STOP (its Padding stays padding)
    f.append(ctl.send(0, start(MEAS, flags=0x05, warmup=WARMUP_MS)))
    f.append(ctl.send(1, ack(0, MEAS)))
    f.append(ctl.send(0, stop(MEAS)))
    # 4 START without warm-up (what the reference sends), 5 START warm-up 100000 ms over SCTP
    f.append(ctl.send(0, start(MEAS2)))
    f.append(sc.send(0, [(0, 36, start(MEAS2, warmup=WARMUP_BIG_MS))]))
    return f


def main(argv):
    if len(argv) != 2:
        print("usage: npmp_pcap.py OUTDIR", file=sys.stderr)
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    for name, builder in (("tcp", build_tcp), ("sctp", build_sctp), ("dccp", build_dccp),
                          ("warmup", build_warmup)):
        path = os.path.join(out, name + ".pcap")
        write_pcap(path, builder())
        os.chmod(path, 0o644)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
