"""Hostile peers at the passive's QUIC port (UDP PORT-1), against the real binary.

* Garbage datagrams of many sizes (random bytes, Initial-looking headers, a real Initial
  truncated or with its protected payload flipped): dropped without a reply.
* Clients that send a real Initial (a ClientHello made by netperfmeter's own active, taken
  off the wire once) and then go silent, from many addresses and ports: more of them than the
  passive's --max-quic-connections. What the passive sends to each stays within three times
  what it received from there (QUIC's anti-amplification limit), counted on the sockets.
* With Retry (--quic-retry-above): only the first handshakes hold state, every later client
  gets a Retry packet and nothing more, and a legitimate -quic run DURING the flood succeeds
  (through the Retry). Without Retry (a passive whose limit is reached first): the clients
  beyond the limit get nothing, and once the handshake timeout has freed the slots a
  legitimate run succeeds again.
* Clients that answer the Retry (they can receive at their address) and then go silent, from
  eight /24s, one after the other for as long as legitimate runs go on: each holds a handshake
  until it has been quiet for a second, and the legitimate runs are served within 2 s of a run
  alone throughout.
* Afterwards: the passives alive, their descriptors as before, their memory near what it was,
  and the half-open handshakes gone (a new client gets a real handshake again, not a Retry).

How long legitimate clients are locked out without Retry: tests/bench/quic_lockout.py."""

import os
import random
import socket
import tempfile
import threading
import time
import unittest

from harness import Active, Passive, descriptors, free_base_port, main, rss_mib, run_active, settled

QUIC = os.environ.get("NPM_QUIC_BUILT") == "ON"
PORT, _ = free_base_port(span=20)  # this test's ports: PORT - 1 .. PORT + 21 (six passives), its own
RETRY_PORT, LIMIT_PORT, HARVEST_PORT, QUIET_PORT = PORT, PORT + 4, PORT + 8, PORT + 12
HANDSHAKE_TIMEOUT = 10.0  # the passive's (quic::Limits)

# A sanitizer's allocator keeps freed memory in quarantine: memory figures mean nothing there.
SANITIZED = bool(os.environ.get("NPM_SANITIZE"))


def make_certificates(directory):
    from test_quic import make_certificates as make
    return make(directory)


def harvest_initial(port, files, cwd):
    """The first datagram of netperfmeter's own QUIC client: a real Initial with its ClientHello.
    The passive's data listeners (QUIC among them) on 127.0.0.2, its control on 127.0.0.1: the
    active's QUIC packets to 127.0.0.1:PORT-1 come to this socket instead."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", port - 1))
        sock.settimeout(20)
        with Passive(port, "-X", "-L", "127.0.0.2", "-l", "127.0.0.1", "-tls-key", files["server.key"],
                     "-tls-cert", files["server.pem"]):
            active = Active(f"127.0.0.1:{port}", "-control-over-tcp", "-runtime=1", "-tls-ca", files["ca.pem"],
                            "-quic", "const10:const1000", cwd=cwd)
            try:
                data, _ = sock.recvfrom(65536)
            finally:
                active.kill()
    assert data[0] & 0xf0 == 0xc0 and data[1:5] == b"\0\0\0\1", f"not a QUIC v1 Initial: {data[:8].hex()}"
    return data


def packet_type(datagram):
    """The type of a datagram's first QUIC packet: Initial, 0-RTT, Handshake, Retry or short."""
    if not datagram or not datagram[0] & 0x80:
        return "short"
    return ("Initial", "0-RTT", "Handshake", "Retry")[(datagram[0] >> 4) & 3]


class Clients:
    """UDP sockets that each send one datagram to the passive's QUIC port and never answer; what
    comes back is read (and counted) at the end. Source addresses spread over 127.0.0.0/8: to
    the passive, addresses that never completed a handshake."""

    def __init__(self, port, count, first_address=10):
        self.target = ("127.0.0.1", port - 1)
        self.sockets = []
        for i in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            s.bind((f"127.0.{first_address + i // 200}.{1 + i % 200}", 0))
            s.setblocking(False)
            self.sockets.append(s)
        self.sent = [0] * count
        self.got = [[] for _ in range(count)]

    def send(self, i, datagram):
        self.sockets[i].sendto(datagram, self.target)
        self.sent[i] += len(datagram)

    def replies(self, i):
        """Everything client i has received so far."""
        while True:
            try:
                self.got[i].append(self.sockets[i].recv(65536))
            except BlockingIOError:
                return self.got[i]

    def answered(self, i, timeout=10.0):
        """Waits for client i's first reply (at most `timeout`: the passive is alive and answers at
        once; the wait only orders what the test sends after what the passive has read)."""
        deadline = time.monotonic() + timeout
        while not self.replies(i) and time.monotonic() < deadline:
            time.sleep(0.002)
        return bool(self.got[i])

    def close(self):
        for s in self.sockets:
            s.close()


def garbage(initial):
    """Datagrams that are no QUIC for the passive: (what, bytes)."""
    rng = random.Random(7)
    out = []
    for size in (1, 2, 7, 20, 64, 500, 1199, 1200, 1201, 1400, 1500, 4096, 9000, 65507):
        out.append((f"{size} random bytes", rng.randbytes(size)))
        # An Initial's long header (QUIC v1, 8-byte connection IDs, no token), then random bytes.
        header = bytes([0xc3]) + b"\0\0\0\1" + b"\x08" + rng.randbytes(8) + b"\x08" + rng.randbytes(8) + b"\x00"
        body = rng.randbytes(max(0, size - len(header) - 2))
        out.append((f"{size}-byte Initial-looking header", (header + bytes([0x40 | (len(body) >> 8) & 0x3f,
                                                                            len(body) & 0xff]) + body)[:size]))
    out.append(("an unknown version", bytes([0xc0]) + b"\x0a\x0a\x0a\x0a" + initial[5:]))
    out.append(("a short-header packet", bytes([0x40]) + rng.randbytes(1300)))
    out.append(("a real Initial cut to 1199 bytes", initial[:1199]))
    flipped = bytearray(initial)
    for i in range(60, len(flipped), 97):
        flipped[i] ^= 0x5a
    out.append(("a real Initial with its payload flipped", bytes(flipped)))
    return out


@unittest.skipUnless(QUIC, "the build has no QUIC (NPM_QUIC_BUILT is not ON)")
class QuicHostile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="npm-quic-hostile-")
        cls.files = make_certificates(cls.dir)
        cls.initial = harvest_initial(HARVEST_PORT, cls.files, cls.dir)

    def legitimate(self, port, check=True):
        return run_active(f"127.0.0.1:{port}", "-control-over-tcp", "-runtime=1", "-tls-ca", self.files["ca.pem"],
                          "-quic", "const10:const1000:const10:const1000", cwd=self.dir, timeout=60, check=check)

    def test_flood_garbage_and_half_open_handshakes(self):
        keys = ("-tls-key", self.files["server.key"], "-tls-cert", self.files["server.pem"])
        # With Retry from the second handshake under way on (a sixteenth of 32); without Retry:
        # 8 connections at most, Retry never (it would begin at 8 handshakes, the limit). The
        # silent clients share one /24: each network may hold every slot here (the share of one
        # network is test_one_network_holds_its_share_and_makes_room_first's).
        share = ("--max-quic-connections-per-prefix=32",)
        with Passive(RETRY_PORT, "-X", *keys, "--max-quic-connections=32", *share) as retrying, \
                Passive(LIMIT_PORT, "-X", *keys, "--max-quic-connections=8", "--quic-retry-above=8",
                        *share) as limited:
            passives = {"retrying": retrying, "limited": limited}
            # Baselines after one run each: what the first run sets up once is in them.
            for p in passives.values():
                self.legitimate(p.port)
            fds = {name: settled(lambda: descriptors(p)) for name, p in passives.items()}
            rss = {name: rss_mib(p.proc.pid) for name, p in passives.items()}

            junk = garbage(self.initial)
            junk_clients = Clients(RETRY_PORT, len(junk), first_address=5)
            silent = {name: Clients(p.port, 96, first_address=10 + 10 * k)
                      for k, (name, p) in enumerate(passives.items())}
            self.addCleanup(junk_clients.close)
            for c in silent.values():
                self.addCleanup(c.close)

            for i, (_, datagram) in enumerate(junk):
                junk_clients.send(i, datagram)
            began = time.monotonic()

            # The silent clients, one after the other. Each waits for the passive's answer where
            # one is due (every client of the retrying passive, the first 8 of the limited one):
            # what the test sends then never piles up in the passive's socket buffer (a datagram
            # the kernel drops there would be counted as one the passive ignored).
            def flood(clients, indices, due):
                for i in indices:
                    clients.send(i, self.initial)
                    if due(i):
                        self.assertTrue(clients.answered(i), f"no answer to silent client {i}")

            # Half of them at once, the other half during a legitimate run.
            flood(silent["retrying"], range(48), lambda i: True)
            flood(silent["limited"], range(48), lambda i: i < 8)
            done = threading.Event()
            failures = []

            def flood_on():
                try:
                    for i in range(48, 96):
                        flood(silent["retrying"], [i], lambda i: True)
                        flood(silent["limited"], [i], lambda i: False)
                        if done.wait(0.01):
                            break
                except AssertionError as e:
                    failures.append(e)

            feeder = threading.Thread(target=flood_on)
            feeder.start()
            try:
                during = self.legitimate(RETRY_PORT, check=False)
            finally:
                done.set()
                feeder.join()
            self.assertFalse(failures, failures)
            unsent = [i for i in range(96) if silent["retrying"].sent[i] == 0]  # whatever the run left
            flood(silent["retrying"], unsent, lambda i: True)
            flood(silent["limited"], unsent, lambda i: False)
            self.assertEqual(during.returncode, 0, f"a legitimate run during the flood failed:\n{during.stderr}")
            self.assertIn("QUIC connection to", during.stderr)

            # The half-open handshakes end at the handshake timeout.
            time.sleep(max(0.0, began + HANDSHAKE_TIMEOUT + 1.5 - time.monotonic()))
            for name, p in passives.items():
                self.assertTrue(p.alive(), f"{name}: {p.crash_report()}")

            # Garbage: no reply at all.
            for i, (what, _) in enumerate(junk):
                self.assertEqual(junk_clients.replies(i), [], f"the passive answered {what}")

            # Anti-amplification, per client: bytes back at most three times the bytes sent.
            summary = {}
            for name, c in silent.items():
                kinds = {"handshake": 0, "retry": 0, "nothing": 0}
                received_total = 0
                for i in range(96):
                    got = c.replies(i)
                    received = sum(len(d) for d in got)
                    received_total += received
                    self.assertLessEqual(received, 3 * c.sent[i], f"{name}: client {i} got {received} B for "
                                         f"{c.sent[i]} B ({[packet_type(d) for d in got]})")
                    if not got:
                        kinds["nothing"] += 1
                    elif all(packet_type(d) == "Retry" for d in got):
                        kinds["retry"] += 1
                    else:
                        self.assertEqual(packet_type(got[0]), "Initial", name)
                        kinds["handshake"] += 1
                summary[name] = kinds
                print(f"{name}: 96 silent clients sent {sum(c.sent)} B, got {received_total} B back "
                      f"({received_total / sum(c.sent):.2f} x): {kinds}")
            # With Retry: two handshakes began (the threshold), every other client got a Retry.
            self.assertEqual(summary["retrying"], {"handshake": 2, "retry": 94, "nothing": 0})
            # Without: eight handshakes (the limit) at first, the others dropped -- until the first
            # ones have been quiet for a second: then each new client closes the quietest (the
            # flood during the run) and begins a handshake of its own.
            self.assertGreaterEqual(summary["limited"]["handshake"], 8)
            self.assertEqual(summary["limited"]["retry"], 0)
            self.assertEqual(summary["limited"]["handshake"] + summary["limited"]["nothing"], 96)

            # The half-open handshakes are gone: a new client gets a real handshake, not a Retry
            # (the retrying passive), and a legitimate run is served (both).
            probe = Clients(RETRY_PORT, 1, first_address=60)
            self.addCleanup(probe.close)
            probe.send(0, self.initial)
            self.assertTrue(probe.answered(0), "no answer to a new client after the handshake timeout")
            got = probe.got[0]
            self.assertEqual(packet_type(got[0]), "Initial", "still more handshakes under way than the threshold")
            for name, p in passives.items():
                self.assertEqual(self.legitimate(p.port, check=False).returncode, 0, name)

            for name, p in passives.items():
                now_fds = settled(lambda: descriptors(p))
                now_rss = rss_mib(p.proc.pid)
                print(f"{name}: descriptors {fds[name]} -> {now_fds}, RSS {rss[name]:.1f} -> {now_rss:.1f} MiB")
                self.assertEqual(now_fds, fds[name], name)
                if not SANITIZED:
                    self.assertLess(now_rss - rss[name], 16, f"{name}: RSS grew by {now_rss - rss[name]:.1f} MiB")

    def test_quiet_handshakes_make_room_for_a_legitimate_client(self):
        """Every slot held by a half-open handshake that went quiet (Retry off) once cost a
        legitimate run the handshake timeout (about 8 s instead of 1): a new client now closes
        the handshake quiet the longest (quiet for a second) and is served at once."""
        keys = ("-tls-key", self.files["server.key"], "-tls-cert", self.files["server.pem"])
        with Passive(QUIET_PORT, "-X", *keys, "--max-quic-connections=8", "--quic-retry-above=8",
                     "--max-quic-connections-per-prefix=8") as p:  # the silent ones share one /24
            begin = time.monotonic()
            self.legitimate(p.port)
            alone = time.monotonic() - begin
            silent = Clients(p.port, 8, first_address=70)
            self.addCleanup(silent.close)
            for i in range(8):
                silent.send(i, self.initial)
                self.assertTrue(silent.answered(i), f"no answer to silent client {i}")
            time.sleep(1.2)  # they are quiet now, and hold every slot
            begin = time.monotonic()
            during = self.legitimate(p.port, check=False)
            took = time.monotonic() - begin
            print(f"a 1-s run alone took {alone:.2f} s, with every slot held by a quiet handshake {took:.2f} s")
            self.assertEqual(during.returncode, 0, during.stderr)
            self.assertLess(took, alone + 2.0)
            self.assertIn("QUIC: closing the handshake of", p.output())
            self.assertTrue(p.alive())

    def test_one_network_holds_its_share_and_makes_room_first(self):
        """Handshakes of one network (127.0.70.0/24) beyond its share
        (--max-quic-connections-per-prefix) get nothing; with every slot taken by handshakes that
        are not quiet yet, a client of another network is served at once: a handshake of the
        network holding the most makes room."""
        keys = ("-tls-key", self.files["server.key"], "-tls-cert", self.files["server.pem"])
        with Passive(QUIET_PORT + 2, "-X", *keys, "--max-quic-connections=8", "--quic-retry-above=64",
                     "--max-quic-connections-per-prefix=6", "-loglevel=1") as p:
            flood = Clients(p.port, 9, first_address=70)  # 127.0.70.1 .. 9
            other = Clients(p.port, 2, first_address=71)  # 127.0.71.1 .. 2
            self.addCleanup(flood.close)
            self.addCleanup(other.close)
            for i in range(6):
                flood.send(i, self.initial)
                self.assertTrue(flood.answered(i), f"no answer to client {i} of the flooding network")
            for i in range(6, 9):  # beyond the network's share: dropped, and its own are not quiet
                flood.send(i, self.initial)
            for i in range(2):
                other.send(i, self.initial)
                self.assertTrue(other.answered(i), f"no answer to client {i} of the other network")
            begin = time.monotonic()
            run = self.legitimate(p.port, check=False)  # every slot taken, none quiet for 1 s
            took = time.monotonic() - begin
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertLess(took, 3.0, run.stderr)
            self.assertEqual([bool(flood.replies(i)) for i in range(6, 9)], [False] * 3)
            self.assertIn("its network holding 6 connections) to make room for a new client", p.output())
            self.assertIn("6 connections of its network, all making progress", p.output())
            self.assertTrue(p.alive())

    def test_clients_that_answer_the_retry_and_go_silent(self):
        """Retry for every client (--quic-retry-above=0): the flood's clients prove their address
        -- they answer the Retry with its token, sealed anew for its connection ID
        (quic_initial.py) -- and then say nothing more, so each holds a handshake slot. They come
        from eight /24s (more than the slots' networks' shares), one after the other."""
        import quic_initial
        keys = ("-tls-key", self.files["server.key"], "-tls-cert", self.files["server.pem"])
        with Passive(PORT + 17, "-X", *keys, "--max-quic-connections=16", "--quic-retry-above=0") as p:
            begin = time.monotonic()
            self.legitimate(p.port)
            alone = time.monotonic() - begin
            fds, rss = settled(lambda: descriptors(p)), rss_mib(p.proc.pid)
            stop, counts, failures = threading.Event(), {"clients": 0, "handshakes": 0, "ignored": 0}, []

            def flood():
                try:
                    while not stop.is_set():
                        i = counts["clients"]
                        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                            s.bind((f"127.0.{90 + i % 8}.{1 + (i // 8) % 250}", 0))
                            s.settimeout(0.5)
                            s.sendto(self.initial, ("127.0.0.1", p.port - 1))
                            try:
                                retry = quic_initial.parse_retry(s.recv(65536))
                            except socket.timeout:  # every slot busy with handshakes not quiet yet
                                counts["ignored"] += 1
                                counts["clients"] += 1
                                continue
                            if retry is None:
                                raise AssertionError(f"client {i} got no Retry")
                            s.sendto(quic_initial.answer_retry(self.initial, retry), ("127.0.0.1", p.port - 1))
                            try:  # what a handshake begun for it sends: an Initial (then silence)
                                if packet_type(s.recv(65536)) == "Initial":
                                    counts["handshakes"] += 1
                            except socket.timeout:  # the same, found when it came back with the token
                                counts["ignored"] += 1
                        counts["clients"] += 1
                except (AssertionError, OSError) as e:
                    failures.append(e)

            feeder = threading.Thread(target=flood)
            feeder.start()
            took = []
            try:
                while counts["handshakes"] < 16 and feeder.is_alive():  # every slot is held
                    stop.wait(0.05)
                for _ in range(3):
                    begin = time.monotonic()
                    run = self.legitimate(p.port, check=False)
                    took.append(time.monotonic() - begin)
                    self.assertEqual(run.returncode, 0, f"a legitimate run during the flood failed:\n{run.stderr}")
            finally:
                stop.set()
                feeder.join()
            self.assertFalse(failures, failures)
            print(f"a 1-s run alone took {alone:.2f} s, during the flood {', '.join(f'{t:.2f}' for t in took)} s; "
                  f"{counts['clients']} clients answered their Retry, {counts['handshakes']} got a handshake, "
                  f"{counts['ignored']} were ignored")
            self.assertGreaterEqual(counts["handshakes"], 16)  # the Retry answers were valid: they held slots
            self.assertGreater(counts["ignored"], 0)  # and they did fill every slot
            self.assertLess(max(took), alone + 2.0)
            self.assertIn("QUIC: closing the handshake of", p.output())
            # Their handshakes end within the handshake timeout; what they held goes back.
            time.sleep(HANDSHAKE_TIMEOUT + 1.5)
            self.assertTrue(p.alive())
            self.assertEqual(settled(lambda: descriptors(p)), fds)
            if not SANITIZED:
                self.assertLess(rss_mib(p.proc.pid) - rss, 16)


if __name__ == "__main__":
    main()
