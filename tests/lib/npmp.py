"""NPMP, NetPerfMeter's own protocol, for the tests: every message encoded and decoded here,
from the wire format of the reference (NetPerfMeter 2.0, reference section 3.3 of
shared/reference/upstream-netperfmeter.md), written independently of the C++ (src/npmp) so that
the tests check the implementation against the layout rather than against itself. Python's
standard library only.

All fields are big-endian but ADD_FLOW's protocol, which the reference sends in host order
(little-endian on the machines it runs on). Each message starts with a 4-byte header: type,
flags, length (of the whole message, header included).
"""
import struct

MAGIC = 0x4BCDF3AA303C6774  # IDENTIFY's magic number

ACKNOWLEDGE, ADD_FLOW, REMOVE_FLOW, IDENTIFY, DATA, START, STOP, RESULTS = range(1, 9)
NAMES = {ACKNOWLEDGE: "ACKNOWLEDGE", ADD_FLOW: "ADD_FLOW", REMOVE_FLOW: "REMOVE_FLOW", IDENTIFY: "IDENTIFY",
         DATA: "DATA", START: "START", STOP: "STOP", RESULTS: "RESULTS"}
ADD_FLOW_LENGTH = 194  # without its on/off events
EVENT_LENGTH = 36
DATA_HEADER_LENGTH = 48
RESULTS_MAX = 1404  # a RESULTS message with its header: chunks of at most 1400 bytes

_HEADER = struct.Struct("!BBH")


# ------------------------------------------------------------------ encoding ----
def header(kind, flags, length):
    return _HEADER.pack(kind, flags, length)


def ack(flow, meas, stream=0, status=0):
    return header(ACKNOWLEDGE, 0, 24) + struct.pack("!IQHHI", flow, meas, stream, 0, status)


def _doubles(values):
    return b"".join(struct.pack("!d", v) for v in values)


def add_flow(flow, meas, stream=0, protocol=6, description=b"", flags=0,
             ordered=0xFFFFFFFF, reliable=0xFFFFFFFF, retrans=0xFFFFFFFF,
             rate=(0.0, 0.0, 0.0, 0.0), size=(0.0, 0.0, 0.0, 0.0),
             rate_rng=0, size_rng=0, rcvbuf=233016, sndbuf=233016,
             maxmsgsize=16000, cmt=0, ccid=0, cc=b"default",
             events=(), length=None, n_events=None, ndiffports=0, runtime=0, mechanisms=0, seed=0):
    """ADD_FLOW. rate, size: the outbound and inbound rate/size values (four each: outbound
    value 1, inbound value 1, then the second parameters); events: (rng, flags, (v1, v2, v3,
    v4)) each; length and n_events: a length or event count other than the true one."""
    body = struct.pack("!IQH", flow, meas, stream)
    body += struct.pack("<H", protocol)             # the one little-endian field
    body += description.ljust(32, b"\0")[:32]
    body += struct.pack("!III", ordered, reliable, retrans)
    body += _doubles(rate) + _doubles(size)
    body += struct.pack("!BBIIHBB", rate_rng, size_rng, rcvbuf, sndbuf, maxmsgsize, cmt, ccid)
    body += struct.pack("!H", ndiffports)           # NDiffPorts: here SCTP RTO.min (bits 0-14), DAC (15)
    body += b"\0" * 16                              # PathMgr
    body += cc.ljust(16, b"\0")[:16]                # CongestionControl
    body += struct.pack("!IIQ", runtime, mechanisms, seed)  # Scheduler: runtime, SCTP mechanisms, seed
    body += struct.pack("!H", len(events) if n_events is None else n_events)
    for rng, eflags, values in events:
        body += struct.pack("!BBH", rng, eflags, 0) + _doubles(values)
    real = 4 + len(body)
    assert real == ADD_FLOW_LENGTH + EVENT_LENGTH * len(events)
    return header(ADD_FLOW, flags, real if length is None else length) + body


def remove_flow(flow, meas, stream=0):
    return header(REMOVE_FLOW, 0, 18) + struct.pack("!IQH", flow, meas, stream)


def identify(flow, meas, stream=0, flags=0, magic=MAGIC):
    return header(IDENTIFY, flags, 26) + struct.pack("!IQQH", flow, magic, meas, stream)


def data(flow, meas, seq, stream=0, frame=None, byteseq=None, ts=0, payload=b"", flags=0x03):
    frame = seq if frame is None else frame
    byteseq = seq * (DATA_HEADER_LENGTH + len(payload)) if byteseq is None else byteseq
    body = struct.pack("!IQHHIQQQ", flow, meas, stream, 0, frame, seq, byteseq, ts)
    return header(DATA, flags, DATA_HEADER_LENGTH + len(payload)) + body + payload


def start(meas, flags=0, warmup=0):
    """warmup: milliseconds at offset 4 (the reference's Padding, always 0 there)."""
    return header(START, flags, 16) + struct.pack("!IQ", warmup, meas)


def stop(meas):
    return header(STOP, 0, 16) + struct.pack("!IQ", 0, meas)


def results(chunk, eof=False):
    return header(RESULTS, 1 if eof else 0, 4 + len(chunk)) + chunk


# This implementation's access control (--access-key; src/README.md): the passive's challenge
# and the active's answer, before anything else on a control connection.
AUTH_HELLO, AUTH_CHALLENGE, AUTH_RESPONSE = 9, 10, 11


def auth_hello(nonce):
    return header(AUTH_HELLO, 0, 36) + nonce


def auth_challenge(nonce, mac):
    return header(AUTH_CHALLENGE, 0, 68) + nonce + mac


def auth_response(mac):
    return header(AUTH_RESPONSE, 0, 36) + mac


# ------------------------------------------------------------------ decoding ----
def parse_header(b, offset=0):
    """(type, flags, length) of the message at `offset`."""
    return _HEADER.unpack_from(b, offset)


def split(stream):
    """The messages of a byte stream (a TCP connection's bytes), each as bytes; ValueError
    when a header is cut off, a length is below 4 or a message runs past the end."""
    offset = 0
    while offset < len(stream):
        if len(stream) - offset < 4:
            raise ValueError(f"a truncated header at byte {offset}")
        _, _, length = parse_header(stream, offset)
        if length < 4:
            raise ValueError(f"a length of {length} at byte {offset}")
        if offset + length > len(stream):
            raise ValueError(f"a message of {length} bytes at byte {offset} runs past the stream")
        yield bytes(stream[offset:offset + length])
        offset += length


def read_message(sock):
    """One message from a stream socket (b"" when the peer closed first)."""
    head = _recv_exact(sock, 4)
    if len(head) < 4:
        return b""
    _, _, length = parse_header(head)
    return head + _recv_exact(sock, length - 4)


def _recv_exact(sock, n):
    got = b""
    while len(got) < n:
        more = sock.recv(n - len(got))
        if not more:
            break
        got += more
    return got


def decode(m):
    """The fields of one message as a dict: kind, flags, length and those of its type (the
    names of the encoders' parameters). ValueError when the length does not fit the type."""
    kind, flags, length = parse_header(m)
    f = {"kind": kind, "flags": flags, "length": length}
    fixed = {ACKNOWLEDGE: 24, REMOVE_FLOW: 18, IDENTIFY: 26, START: 16, STOP: 16}
    if kind in fixed and length != fixed[kind]:
        raise ValueError(f"{NAMES[kind]} of {length} bytes, not {fixed[kind]}")
    if len(m) < length:
        raise ValueError(f"{NAMES.get(kind, kind)}: {len(m)} of its {length} bytes")
    if kind == ACKNOWLEDGE:
        f["flow"], f["meas"], f["stream"], f["pad"], f["status"] = struct.unpack_from("!IQHHI", m, 4)
    elif kind == ADD_FLOW:
        if length < ADD_FLOW_LENGTH:
            raise ValueError(f"ADD_FLOW of {length} bytes, shorter than {ADD_FLOW_LENGTH}")
        f["flow"], f["meas"], f["stream"] = struct.unpack_from("!IQH", m, 4)
        f["protocol"] = struct.unpack_from("<H", m, 18)[0]
        f["description"] = m[20:52].rstrip(b"\0")
        f["ordered"], f["reliable"], f["retrans"] = struct.unpack_from("!III", m, 52)
        f["rate"] = struct.unpack_from("!4d", m, 64)
        f["size"] = struct.unpack_from("!4d", m, 96)
        (f["rate_rng"], f["size_rng"], f["rcvbuf"], f["sndbuf"], f["maxmsgsize"], f["cmt"], f["ccid"],
         f["ndiffports"]) = struct.unpack_from("!BBIIHBBH", m, 128)
        f["pathmgr"] = m[144:160]
        f["cc"] = m[160:176].rstrip(b"\0")
        f["runtime"], f["mechanisms"], f["seed"], f["n_events"] = struct.unpack_from("!IIQH", m, 176)
        if length != ADD_FLOW_LENGTH + EVENT_LENGTH * f["n_events"]:
            raise ValueError(f"ADD_FLOW of {length} bytes with {f['n_events']} on/off events")
        f["events"] = [(m[o], m[o + 1], struct.unpack_from("!4d", m, o + 4))
                       for o in range(ADD_FLOW_LENGTH, length, EVENT_LENGTH)]
    elif kind == REMOVE_FLOW:
        f["flow"], f["meas"], f["stream"] = struct.unpack_from("!IQH", m, 4)
    elif kind == IDENTIFY:
        f["flow"], f["magic"], f["meas"], f["stream"] = struct.unpack_from("!IQQH", m, 4)
    elif kind == DATA:
        if length < DATA_HEADER_LENGTH:
            raise ValueError(f"DATA of {length} bytes, shorter than {DATA_HEADER_LENGTH}")
        (f["flow"], f["meas"], f["stream"], f["pad"], f["frame"], f["seq"], f["byteseq"],
         f["ts"]) = struct.unpack_from("!IQHHIQQQ", m, 4)
        f["payload"] = m[DATA_HEADER_LENGTH:length]
    elif kind in (START, STOP):
        f["warmup"], f["meas"] = struct.unpack_from("!IQ", m, 4)
    elif kind == RESULTS:
        if length > RESULTS_MAX:
            raise ValueError(f"RESULTS of {length} bytes, longer than {RESULTS_MAX}")
        f["chunk"] = m[4:length]
    return f


def plausible_header(b):
    """The dissectors' port-level plausibility check of a message's first bytes."""
    if len(b) < 4:
        return False
    t, fl, ln = parse_header(b)
    return ((t == 1 and fl == 0 and ln == 24) or
            (t == 2 and fl & ~7 == 0 and ln >= 194 and (ln - 194) % 36 == 0) or
            (t == 3 and fl == 0 and ln == 18) or (t == 4 and fl & ~3 == 0 and ln == 26) or
            (t == 5 and fl & ~3 == 0 and ln >= 48) or (t == 6 and fl & ~15 == 0 and ln == 16) or
            (t == 7 and fl == 0 and ln == 16) or (t == 8 and fl & ~1 == 0 and ln <= 1404))
