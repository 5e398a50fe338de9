"""The passive's SCTP/UDP encapsulation port is no traffic amplifier: hand-built SCTP INITs
(32 bytes, correct CRC32c) sent from a local UDP socket are answered with INIT-ACKs (~400
bytes) at most `burst + rate x elapsed` times with --sctp-init-rate, every time with
--sctp-init-rate=0; measurements over SCTP work through the filter (it passes everything that
is not an INIT). Needs root for the BPF socket filter (otherwise the passive says that the port
is not rate-limited)."""

import os
import random
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import unittest

from harness import (free_base_port, take_ports, NETPERFMETER, Passive, read_scalars, run_active, skip_unless_root,
                     wait_for_text)

PORT, _ = free_base_port(span=42)  # this test's ports: PORT - 1 .. PORT + 43, its own
UDP = take_ports(5, (socket.SOCK_DGRAM,))  # own SCTP/UDP encapsulation ports UDP .. UDP + 4


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


CRC32C = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def sctp_packet(src_port, dst_port, vtag, chunks):
    """Common header + chunks, with the CRC32c that RFC 4960 (appendix B) asks for."""
    packet = bytearray(struct.pack("!HHII", src_port, dst_port, vtag, 0) + chunks)
    packet[8:12] = struct.pack("<I", crc32c(bytes(packet)))
    return bytes(packet)


def init_packet(src_port, dst_port):
    """An INIT (type 1, 20 bytes, no parameters): 32 bytes in all."""
    tag = random.randint(1, 0xFFFFFFFF)
    chunk = struct.pack("!BBHIIHHI", 1, 0, 20, tag, 65536, 10, 10, random.randint(0, 0xFFFFFFFF))
    return sctp_packet(src_port, dst_port, 0, chunk)


def first_chunk_type(datagram):
    return datagram[12] if len(datagram) > 12 else None


class InitFlood:
    """Sends INITs to the passive's encapsulation port from one local UDP socket (each from
    another SCTP port, as from many peers) and counts what comes back."""

    def __init__(self, udp_port, sctp_port):
        self.target = ("127.0.0.1", udp_port)
        self.sctp_port = sctp_port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind(("127.0.0.1", 0))
        self.sent = self.sent_bytes = self.init_acks = self.received_bytes = self.other = 0

    def close(self):
        self.sock.close()

    def send(self, count, batch=25, pause=0.0):
        """Sends `count` INITs in batches, reading replies (`pause` seconds) in between; returns
        the seconds from the first INIT to the last."""
        start = time.monotonic()
        last = start
        for i in range(count):
            data = init_packet(1024 + (self.sent % 60000), self.sctp_port)
            self.sock.sendto(data, self.target)
            last = time.monotonic()
            self.sent += 1
            self.sent_bytes += len(data)
            if i % batch == batch - 1:
                self.receive(pause)
        return last - start

    def receive(self, quiet):
        """Reads replies until none came for `quiet` seconds (0: only what is there)."""
        while True:
            ready, _, _ = select.select([self.sock], [], [], quiet)
            if not ready:
                return
            data = self.sock.recv(65536)
            if first_chunk_type(data) == 2:
                self.init_acks += 1
                self.received_bytes += len(data)
            else:
                self.other += 1


# What a netperfmeter built without clang, bpftool or libbpf-dev says instead of loading the filter.
NOT_BUILT = "built without the BPF INIT filter"


class InitRateLimit(unittest.TestCase):
    def skip_unless_built(self, output):
        if NOT_BUILT in output:
            self.skipTest("netperfmeter was built without the BPF INIT filter")

    def measure_through(self, port, udp, associations=3):
        """A measurement with SCTP control and `associations` SCTP associations; their data passes
        the filter. Returns the passive's scalars."""
        with tempfile.TemporaryDirectory() as d:
            flows = ["-sctp"] + ["const0:const1000"] * 2
            for _ in range(associations - 1):
                flows += ["-sctp", "const200:const500"]
            run_active(f"127.0.0.1:{port}", "-x", "--sctp-stack=userland", f"--sctp-remote-udp-port={udp}",
                       "-runtime=1.5", "-scalar=run.sca", *flows, cwd=d, timeout=60)
            return read_scalars(os.path.join(d, "run-passive.sca"))

    def assert_received(self, scalars, flow_ids):
        for flow_id in flow_ids:
            got = scalars[(f"netPerfMeter.passive.flow[{flow_id}]", "Received Bytes")]
            self.assertGreater(got, 0, f"flow {flow_id} received nothing")

    @skip_unless_root("loading a BPF socket filter needs root (CAP_BPF)")
    def test_limited_inits_are_answered_at_the_rate(self):
        rate, burst = 20, 10
        with Passive(PORT, "--sctp-stack=userland", f"--sctp-udp-port={UDP}", f"--sctp-init-rate={rate}/{burst}") \
                as passive:
            self.skip_unless_built(passive.output())
            self.assertIn(f"SCTP/UDP port {UDP}: INITs limited to {rate}/s, burst {burst} (BPF socket filter on",
                          passive.output())
            flood = InitFlood(UDP, PORT)
            try:
                # 20 INITs every 50 ms or so (one INIT's worth of time at this rate) for about 1 s:
                # far more than the rate, so that every INIT the bucket allows is used.
                elapsed = flood.send(400, batch=20, pause=0.05)
                flood.receive(1.0)
            finally:
                flood.close()
            allowed = burst + rate * elapsed + 2
            print(f"\nlimited {rate}/{burst}: {flood.sent} INITs ({flood.sent_bytes} B) in {elapsed:.3f} s -> "
                  f"{flood.init_acks} INIT-ACKs ({flood.received_bytes} B), "
                  f"amplification {flood.received_bytes / flood.sent_bytes:.2f}")
            self.assertGreater(elapsed, 0.5)
            self.assertGreaterEqual(flood.init_acks, burst + int(rate * elapsed) - 3)
            self.assertLessEqual(flood.init_acks, allowed)
            self.assertEqual(flood.other, 0)
            # Real peers retransmit a dropped INIT; a measurement through the same passive works.
            scalars = self.measure_through(PORT, UDP)
            self.assert_received(scalars, (0, 1, 2, 3))
            self.assertTrue(passive.alive())

    def test_without_a_limit_every_init_is_answered(self):
        with Passive(PORT + 10, "--sctp-stack=userland", f"--sctp-udp-port={UDP + 1}", "--sctp-init-rate=0") \
                as passive:
            self.assertIn(f"SCTP/UDP port {UDP + 1}: INITs are not rate-limited (--sctp-init-rate=0)", passive.output())
            flood = InitFlood(UDP + 1, PORT + 10)
            try:
                # In batches, each answered before the next: a burst of hundreds can overflow the
                # stack's socket buffers, which would lose INITs for a reason other than a limit.
                flood.send(400, batch=10, pause=0.02)
                flood.receive(1.0)
            finally:
                flood.close()
            print(f"\nunlimited: {flood.sent} INITs ({flood.sent_bytes} B) -> {flood.init_acks} INIT-ACKs "
                  f"({flood.received_bytes} B), amplification {flood.received_bytes / flood.sent_bytes:.2f}")
            self.assertEqual(flood.init_acks, flood.sent)
            self.assertGreater(flood.received_bytes, 10 * flood.sent_bytes)  # what the limit is for
            # The filter looks at the first chunk only. That is enough: the stack answers an INIT
            # only as the first and only chunk of a packet, not after (or before) another chunk.
            flood = InitFlood(UDP + 1, PORT + 10)
            try:
                for first, second in ((b"\x84\x00\x00\x04", b""), (b"\xbf\x00\x00\x04", b""),
                                      (b"\xff\x00\x00\x04", b""), (b"", b"\x84\x00\x00\x04")):
                    init = init_packet(5000, PORT + 10)[12:]
                    flood.sock.sendto(sctp_packet(5000, PORT + 10, 0, first + init + second), flood.target)
                flood.sock.sendto(init_packet(5001, PORT + 10), flood.target)  # and one that is answered
                flood.receive(1.0)
            finally:
                flood.close()
            self.assertEqual((flood.init_acks, flood.other), (1, 0))

    @skip_unless_root("loading a BPF socket filter needs root (CAP_BPF)")
    def test_default_limit_is_on_and_leaves_measurements_alone(self):
        with Passive(PORT + 20, "--sctp-stack=userland", f"--sctp-udp-port={UDP + 2}") as passive:
            self.skip_unless_built(passive.output())
            self.assertIn(f"SCTP/UDP port {UDP + 2}: INITs limited to 500/s, burst 1000", passive.output())
            # Six associations (and SCTP control) set up one after another, data through the filter.
            scalars = self.measure_through(PORT + 20, UDP + 2, associations=6)
            self.assert_received(scalars, range(7))
            # A second run at once: the bucket is far from empty.
            start = time.monotonic()
            scalars = self.measure_through(PORT + 20, UDP + 2, associations=6)
            self.assert_received(scalars, range(7))
            self.assertLess(time.monotonic() - start, 15)
            self.assertNotIn("not rate-limited", passive.output())

    @skip_unless_root("needs root to start the passive as another user")
    def test_without_bpf_privileges_the_passive_says_so_and_serves(self):
        if not shutil.which("setpriv"):
            self.skipTest("setpriv is missing")
        port, udp = PORT + 40, UDP + 4
        with tempfile.TemporaryDirectory() as d, tempfile.TemporaryFile() as log:
            os.chmod(d, 0o777)
            passive = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                        "--inh-caps=-all", NETPERFMETER, str(port), "-nodisplay",
                                        "--sctp-stack=userland", f"--sctp-udp-port={udp}"],
                                       cwd=d, stdout=subprocess.DEVNULL, stderr=log)
            try:
                # (its own reading of the log: seeking `log` would move the passive's write offset)
                wait_for_text(lambda: open(f"/proc/self/fd/{log.fileno()}", errors="replace").read(),
                              "waiting for incoming connections", proc=passive)
                scalars = self.measure_through(port, udp)
                self.assert_received(scalars, (0, 1, 2, 3))
                self.assertIsNone(passive.poll())
            finally:
                passive.send_signal(signal.SIGINT)
                passive.wait(timeout=10)
            log.seek(0)
            output = log.read().decode(errors="replace")
        self.skip_unless_built(output)
        self.assertIn(f"SCTP/UDP port {udp} is not rate-limited for INITs (cannot load the BPF socket filter: "
                      f"Operation not permitted)", output)
        self.assertIn(f"nft add rule inet filter input udp dport {udp} @th,160,8 1 limit rate over 500/second "
                      "burst 1000 packets drop", output)


class CommandLine(unittest.TestCase):
    def rejected(self, *args):
        result = subprocess.run([NETPERFMETER, *args], capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 1, result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        return lines[0]

    def test_values_and_side(self):
        for bad in ("abc", "0/5", "5/0", "-1", "1000001", "5/", "2.5"):
            self.assertIn("expected INITs per second [/burst]",
                          self.rejected(str(PORT + 30), f"--sctp-init-rate={bad}"))
        self.assertIn("--sctp-init-rate are options of the passive side",
                      self.rejected(f"127.0.0.1:{PORT + 30}", "--sctp-init-rate=5", "-tcp", "const0:const1400"))
        self.assertIn("--sctp-init-rate=N[/BURST]",
                      subprocess.run([NETPERFMETER, "--help"], capture_output=True, text=True, timeout=30).stdout)


if __name__ == "__main__":
    from harness import main
    main()
