"""Wire compatibility: a real run captured on lo; Wireshark's built-in NetPerfMeter dissector
decodes IDENTIFY and DATA without malformed packets, and every message of every TCP stream
(control included) is checked against the byte offsets of the reference (§3.3)."""

import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import unittest

from harness import Capture, free_base_port, Passive, run_active

PORT, _ = free_base_port(span=2)  # this test's ports: PORT - 1 .. PORT + 3, its own
MAGIC = 0x4BCDF3AA303C6774
PROTOCOLS = {6, 17, 33, 132, 261, 262}
SEED = 0x123456789ABCD  # -seed, which ADD_FLOW carries in bytes 184-191


@unittest.skipUnless(shutil.which("tshark"), "tshark is not installed")
@unittest.skipUnless(os.geteuid() == 0, "capturing on lo needs root")
class WireFormat(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="npm-wire-")
        cls.pcap = os.path.join(cls.dir, "run.pcapng")
        with Capture(cls.pcap, f"port {PORT - 1} or port {PORT} or port {PORT + 1}"), Passive(PORT):
            cls.result = run_active(f"127.0.0.1:{PORT}", "-y", "-runtime=2", f"-seed={SEED}", "-vector=run.vec",
                                    "-scalar=run.sca.bz2",
                                    "-tcp", "const50:const3000:const20:const800:maxmsgsize=1400:description=tcp",
                                    "-udp", "const40:const300:const20:const200",
                                    "-mptcp", "const20:const500:onoff=0.2,+1:id=5",
                                    cwd=cls.dir)

    def tshark(self, *args):
        # Heuristics first: Wireshark otherwise hands a UDP datagram to the protocol registered
        # for either port, and the UDP flow's source port is an ephemeral one, 31 of which
        # (44818 ENIP, 54328 Elasticsearch, 34962 PROFINET, ...) Wireshark 4.0 knows -- then the
        # flow's IDENTIFY is not decoded as NetPerfMeter (seen once in an ASan gating run).
        result = subprocess.run(["tshark", "-n", "-r", self.pcap, "-o", "udp.try_heuristic_first:TRUE", *args],
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def test_builtin_dissector_decodes_identify_and_data(self):
        types = self.tshark("-Y", "netperfmeter", "-T", "fields", "-e", "netperfmeter.message_type").split()
        self.assertIn("4", types, "no IDENTIFY decoded")
        self.assertGreater(types.count("5"), 100, "too few DATA messages decoded")
        malformed = self.tshark("-Y", "_ws.malformed", "-T", "fields", "-e", "frame.number")
        self.assertEqual(malformed.strip(), "", "malformed frames")
        # The flow IDs of the IDENTIFY messages are those of the command line.
        ids = self.tshark("-Y", "netperfmeter.message_type == 4", "-T", "fields",
                          "-e", "netperfmeter.identifyflow_flowid").split()
        self.assertEqual(sorted(set(int(i, 0) for i in ids)), [0, 1, 5])

    def streams(self):
        """Reassembled TCP payload per (stream, source port), by sequence number."""
        out = self.tshark("-o", "tcp.relative_sequence_numbers:TRUE", "-Y", "tcp.len > 0", "-T", "fields",
                          "-e", "tcp.stream", "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "tcp.seq",
                          "-e", "tcp.payload")
        segments = {}
        for line in out.splitlines():
            stream, src, dst, seq, payload = line.split("\t")
            key = (int(stream), int(src), int(dst))
            segments.setdefault(key, {})[int(seq)] = bytes.fromhex(payload.replace(":", ""))
        streams = {}
        for key, parts in segments.items():
            data = bytearray()
            for seq in sorted(parts):
                offset = seq - 1
                data[offset:offset + len(parts[seq])] = parts[seq]
            streams[key] = bytes(data)
        return streams

    def test_every_tcp_message_matches_the_reference_layout(self):
        streams = self.streams()
        control_up = [d for (s, src, dst), d in streams.items() if dst == PORT + 1]
        control_down = [d for (s, src, dst), d in streams.items() if src == PORT + 1]
        data_up = {k: d for k, d in streams.items() if k[2] in (PORT, PORT - 1)}
        data_down = {k: d for k, d in streams.items() if k[1] in (PORT, PORT - 1)}
        self.assertEqual(len(control_up), 1)
        self.assertEqual(len(data_up), 2, "one TCP and one MPTCP data connection")
        counts = {}

        def messages(data):
            offset = 0
            while offset < len(data):
                self.assertGreaterEqual(len(data) - offset, 4, "truncated header")
                kind, flags, length = struct.unpack_from("!BBH", data, offset)
                self.assertGreaterEqual(length, 4)
                self.assertLessEqual(offset + length, len(data), "message runs past the stream")
                yield kind, flags, data[offset:offset + length]
                offset += length

        measurement = None
        for kind, flags, m in messages(control_up[0]):
            counts[kind] = counts.get(kind, 0) + 1
            if kind == 2:  # ADD_FLOW
                self.assertGreaterEqual(len(m), 194)
                events = struct.unpack_from("!H", m, 192)[0]
                self.assertEqual(len(m), 194 + 36 * events)
                flow, mid, stream = struct.unpack_from("!IQH", m, 4)
                protocol = struct.unpack_from("<H", m, 18)[0]  # little-endian
                self.assertIn(protocol, PROTOCOLS)
                self.assertEqual(stream, 0)
                measurement = measurement or mid
                self.assertEqual(mid, measurement)
                self.assertIn(m[128], range(6))
                self.assertIn(m[129], range(6))
                self.assertEqual(m[142:160], b"\0" * 18)  # NDiffPorts + PathMgr (obsolete)
                self.assertEqual(m[160:176].rstrip(b"\0"), b"default")
                # Scheduler (obsolete): this project's runtime in its first 4 bytes, the CMT-SCTP
                # mechanisms (none here) in the next 4, and the run's seed (-seed) in the last 8
                self.assertEqual(struct.unpack_from("!I", m, 176)[0], 2000)
                self.assertEqual(m[180:184], b"\0" * 4)
                self.assertEqual(struct.unpack_from("!Q", m, 184)[0], SEED)
                if flow == 5:
                    self.assertEqual(protocol, 262)
                    self.assertEqual(events, 2)
                    self.assertEqual(m[194 + 1] & 1, 0)   # 0.2: absolute
                    self.assertEqual(m[230 + 1] & 1, 1)   # +1: relative
                    self.assertEqual(struct.unpack_from("!d", m, 198)[0], 0.2)
                if flow == 0:
                    self.assertEqual(m[20:23], b"tcp")
                    self.assertEqual(struct.unpack_from("!H", m, 138)[0], 1400)
                    self.assertEqual(struct.unpack_from("!d", m, 64)[0], 20.0)   # inbound rate
                    self.assertEqual(struct.unpack_from("!d", m, 96)[0], 800.0)  # inbound size
            elif kind in (6, 7):  # START / STOP
                self.assertEqual(len(m), 16)
                self.assertEqual(m[4:8], b"\0\0\0\0")
                self.assertEqual(struct.unpack_from("!Q", m, 8)[0], measurement)
                if kind == 6:
                    self.assertEqual(flags, 0x02)  # COMPRESS_SCALARS (vectors plain)
            elif kind == 3:  # REMOVE_FLOW
                self.assertEqual(len(m), 18)
            else:
                self.fail(f"unexpected message type {kind} towards the passive")
        self.assertEqual((counts.get(2), counts.get(6), counts.get(7), counts.get(3)), (3, 1, 1, 3))

        acks, results_eof, path_vectors = 0, 0, []
        for kind, flags, m in messages(control_down[0]):
            if kind == 1:
                self.assertEqual(len(m), 24)
                self.assertEqual(m[18:20], b"\0\0")
                status = struct.unpack_from("!I", m, 20)[0]
                # OK, or (this implementation's extension) OK with the per-path vector following
                # the per-flow vector, for the REMOVE_FLOW of a TCP or MPTCP flow.
                self.assertIn(status, (0, 5))
                if status == 5:
                    path_vectors.append(struct.unpack_from("!I", m, 4)[0])
                acks += 1
            elif kind == 8:
                self.assertLessEqual(len(m), 1404)
                results_eof += flags & 1
            else:
                self.fail(f"unexpected message type {kind} towards the active")
        # ADD_FLOW, IDENTIFY per flow, START, STOP, REMOVE_FLOW per flow
        self.assertEqual(acks, 3 + 3 + 1 + 1 + 3)
        self.assertEqual(sorted(path_vectors), [0, 5])
        # vector + scalar, then a vector per flow and a per-path vector per TCP/MPTCP flow
        self.assertEqual(results_eof, 2 + 3 + 2)

        for direction in (data_up, data_down):
            for key, data in direction.items():
                first = True
                seq = byteseq = None
                flow = None
                # An MPTCP subflow may carry bytes twice: the connection retransmits at its data
                # level on a subflow with new TCP sequence numbers (seen on this kernel: the
                # IDENTIFY again 200 ms later), and the receiver delivers them once. This
                # reassembly is by TCP sequence number, so such a repeat is skipped here.
                mptcp = PORT - 1 in key[1:]
                seen = set()
                for kind, flags, m in messages(data):
                    if mptcp:
                        if bytes(m) in seen:
                            continue
                        seen.add(bytes(m))
                    if first and direction is data_up:
                        self.assertEqual(kind, 4)
                        self.assertEqual(len(m), 26)
                        flow, magic, mid, stream = struct.unpack_from("!IQQH", m, 4)
                        self.assertEqual(magic, MAGIC)
                        # plain vectors, and the per-path vector asked for (0x04: this
                        # implementation's; the reference's passive ignores the bit)
                        self.assertEqual(flags, 0x04)
                        self.assertEqual(mid, measurement)
                        first = False
                        continue
                    first = False
                    self.assertEqual(kind, 5)
                    self.assertGreaterEqual(len(m), 48)
                    f, mid, stream, pad, frame, s, bs, ts = struct.unpack_from("!IQHHIQQQ", m, 4)
                    self.assertEqual(mid, measurement)
                    self.assertEqual(pad, 0)
                    if flow is not None:
                        self.assertEqual(f, flow)
                    if seq is not None:
                        self.assertEqual(s, seq + 1)
                        self.assertEqual(bs, byteseq)
                    seq, byteseq = s, bs + len(m)
                    self.assertGreater(ts, 1.6e15)
                    pattern = m[48:56]
                    if pattern:
                        up = direction is data_up
                        self.assertEqual(pattern[0], 30 if up else 127)
                self.assertIsNotNone(seq, f"no DATA on {key}")


if __name__ == "__main__":
    from harness import main
    main()
