"""Wire compatibility: a real run captured on lo; Wireshark's built-in NetPerfMeter dissector
decodes IDENTIFY and DATA without malformed packets, and every message of every TCP stream
(control included) is checked against the byte offsets of the reference (§3.3)."""

import os
import shutil
import subprocess
import tempfile
import unittest

from harness import Capture, free_base_port, Passive, run_active

import npmp  # noqa: E402  (tests/lib, on the path through harness)

PORT, _ = free_base_port(span=2)  # this test's ports: PORT - 1 .. PORT + 3, its own
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
            """(kind, flags, the message, its fields) of each message of a stream."""
            try:
                for m in npmp.split(data):
                    f = npmp.decode(m)  # the lengths of every type checked against the layout
                    yield f["kind"], f["flags"], m, f
            except ValueError as e:
                self.fail(str(e))

        measurement = None
        for kind, flags, m, f in messages(control_up[0]):
            counts[kind] = counts.get(kind, 0) + 1
            if kind == npmp.ADD_FLOW:
                self.assertEqual(len(m), npmp.ADD_FLOW_LENGTH + npmp.EVENT_LENGTH * f["n_events"])
                flow, protocol = f["flow"], f["protocol"]  # protocol: little-endian
                self.assertIn(protocol, PROTOCOLS)
                self.assertEqual(f["stream"], 0)
                measurement = measurement or f["meas"]
                self.assertEqual(f["meas"], measurement)
                self.assertIn(f["rate_rng"], range(6))
                self.assertIn(f["size_rng"], range(6))
                self.assertEqual((f["ndiffports"], f["pathmgr"]), (0, b"\0" * 16))  # obsolete
                self.assertEqual(f["cc"], b"default")
                # Scheduler (obsolete): this project's runtime in its first 4 bytes, the CMT-SCTP
                # mechanisms (none here) in the next 4, and the run's seed (-seed) in the last 8
                self.assertEqual(f["runtime"], 2000)
                self.assertEqual(f["mechanisms"], 0)
                self.assertEqual(f["seed"], SEED)
                if flow == 5:
                    self.assertEqual(protocol, 262)
                    self.assertEqual(f["n_events"], 2)
                    (_, first, values), (_, second, _) = f["events"]
                    self.assertEqual(first & 1, 0)   # 0.2: absolute
                    self.assertEqual(second & 1, 1)  # +1: relative
                    self.assertEqual(values[0], 0.2)
                if flow == 0:
                    self.assertEqual(f["description"], b"tcp")
                    self.assertEqual(f["maxmsgsize"], 1400)
                    self.assertEqual(f["rate"][0], 20.0)  # inbound rate
                    self.assertEqual(f["size"][0], 800.0)  # inbound size
            elif kind in (npmp.START, npmp.STOP):
                self.assertEqual(f["warmup"], 0)
                self.assertEqual(f["meas"], measurement)
                if kind == npmp.START:
                    self.assertEqual(flags, 0x02)  # COMPRESS_SCALARS (vectors plain)
            elif kind == npmp.REMOVE_FLOW:
                pass
            else:
                self.fail(f"unexpected message type {kind} towards the passive")
        self.assertEqual((counts.get(2), counts.get(6), counts.get(7), counts.get(3)), (3, 1, 1, 3))

        acks, results_eof, path_vectors = 0, 0, []
        for kind, flags, m, f in messages(control_down[0]):
            if kind == npmp.ACKNOWLEDGE:
                self.assertEqual(f["pad"], 0)
                # OK, or (this implementation's extension) OK with the per-path vector following
                # the per-flow vector, for the REMOVE_FLOW of a TCP or MPTCP flow.
                self.assertIn(f["status"], (0, 5))
                if f["status"] == 5:
                    path_vectors.append(f["flow"])
                acks += 1
            elif kind == npmp.RESULTS:
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
                for kind, flags, m, f in messages(data):
                    if mptcp:
                        if m in seen:
                            continue
                        seen.add(m)
                    if first and direction is data_up:
                        self.assertEqual(kind, npmp.IDENTIFY)
                        flow = f["flow"]
                        self.assertEqual(f["magic"], npmp.MAGIC)
                        # plain vectors, and the per-path vector asked for (0x04: this
                        # implementation's; the reference's passive ignores the bit)
                        self.assertEqual(flags, 0x04)
                        self.assertEqual(f["meas"], measurement)
                        first = False
                        continue
                    first = False
                    self.assertEqual(kind, npmp.DATA)
                    self.assertEqual(f["meas"], measurement)
                    self.assertEqual(f["pad"], 0)
                    if flow is not None:
                        self.assertEqual(f["flow"], flow)
                    if seq is not None:
                        self.assertEqual(f["seq"], seq + 1)
                        self.assertEqual(f["byteseq"], byteseq)
                    seq, byteseq = f["seq"], f["byteseq"] + len(m)
                    self.assertGreater(f["ts"], 1.6e15)
                    pattern = f["payload"][:8]
                    if pattern:
                        up = direction is data_up
                        self.assertEqual(pattern[0], 30 if up else 127)
                self.assertIsNotNone(seq, f"no DATA on {key}")


if __name__ == "__main__":
    from harness import main
    main()
