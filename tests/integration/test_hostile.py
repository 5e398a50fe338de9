"""Attacks on a passive: what once crashed, locked or exhausted it.

* Handlers that outlived their owner: a measurement's per-second vector-block timer could
  fire in the same event-loop turn in which its control connection was reset; the queued
  handler then ran on a freed measurement (heap-use-after-free, SIGSEGV in release builds).
* Silent control connections holding every session; one host starving the others; many
  addresses of one network holding sessions without measuring and reconnecting at once.
* Memory a peer could make the passive allocate: a frame of 10^12 bytes queued whole, an
  acknowledgement queue that grows while the peer never reads.
* Access control (--allow): a refused active learns why, others keep being served."""

import functools
import os
import re
import select
import signal
import socket
import struct
import tempfile
import threading
import time
import unittest

from harness import (Active, Attackers, descriptors, free_base_port, Passive, descriptors_while_killed,
                     rss_mib, run_active, settled, settled_descriptors, wait_for_text)

import npmp  # noqa: E402  (tests/lib, on the path through harness)

PORT, _ = free_base_port(span=175)  # this test's ports: PORT - 1 .. PORT + 176, its own


# A sanitizer's allocator keeps freed memory in quarantine: memory figures mean nothing there.
memory_figures = unittest.skipIf(os.environ.get("NPM_SANITIZE"), "memory figures under a sanitizer's allocator")


def connect_from(source, port, timeout=2):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def add_flow(flow_id, measurement_id, frame_rate, frame_size, protocol=6):
    """ADD_FLOW asking the passive to send frames of `frame_size` bytes at `frame_rate` (const)."""
    return npmp.add_flow(flow_id, measurement_id, protocol=protocol, description=b"hostile",
                         rate=(frame_rate, 0.0, 0.0, 0.0), size=(frame_size, 0.0, 0.0, 0.0), rcvbuf=0, sndbuf=0,
                         cc=b"")


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise AssertionError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def ack_status(sock):
    reply = npmp.decode(recv_exact(sock, 24))
    assert reply["kind"] == npmp.ACKNOWLEDGE, reply
    return reply["status"]


def start_message(measurement_id, flags=0):
    return npmp.start(measurement_id, flags)


def drain(sock):
    """Reads `sock` to its end: EOF, or the reset of a flow that the active aborts at its end."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass


def reset(sock):
    # SO_LINGER 0: close() sends RST at once.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class HandlersOutliveTheirOwner(unittest.TestCase):
    def test_start_then_reset_at_the_vector_block(self):
        connections = 40
        rounds = 8
        with Passive(PORT, "-loglevel=4") as passive:
            for round_no in range(rounds):
                socks = []
                for i in range(connections):
                    s = socket.create_connection(("127.0.0.1", PORT + 1), timeout=2)
                    s.sendall(start_message(0x5EED0000 + round_no * 100 + i))
                    socks.append(s)
                started = []
                for s in socks:
                    s.recv(24)  # the START acknowledgement: the measurement runs from here
                    started.append(time.monotonic())
                # Reset each one close to the moment its first vector block is due (1 s after
                # START), 0.5 ms apart around it: some reset lands in the block's turn.
                for i, s in enumerate(socks):
                    delay = started[i] + 1.0 + 0.0005 * (i - connections / 2) - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    reset(s)
                time.sleep(0.2)
                self.assertTrue(passive.alive(), f"the passive died in round {round_no + 1} "
                                f"(exit {passive.proc.returncode}):\n{passive.output()[-3000:]}")
            # Still serving: a normal run succeeds.
            with tempfile.TemporaryDirectory() as d:
                run_active(f"127.0.0.1:{PORT}", "-y", "-runtime=1", "-scalar=run.sca", cwd=d,
                           *["-tcp", "const50:const500:const50:const500"])
                self.assertTrue(os.path.getsize(os.path.join(d, "run-passive.sca")) > 0)
            self.assertTrue(passive.alive())

    def test_stopped_passive_whose_active_is_killed(self):
        with Passive(PORT + 10, "-loglevel=4") as passive, tempfile.TemporaryDirectory() as d:
            for trial in range(3):
                active = Active(f"127.0.0.1:{PORT + 10}", "-y", "-runtime=30", "-vector=run.vec",
                                "-tcp", "const20:const500:const20:const500", cwd=d).started()
                passive.proc.send_signal(signal.SIGSTOP)
                time.sleep(1.2)  # its vector-block timer expires while it is stopped
                active.kill()
                time.sleep(0.2)  # the reset is queued at the passive
                passive.proc.send_signal(signal.SIGCONT)
                time.sleep(1.5)
                self.assertTrue(passive.alive(), f"the passive died in trial {trial + 1} "
                                f"(exit {passive.proc.returncode}):\n{passive.output()[-2000:]}")


class Lockout(unittest.TestCase):
    """A default passive under peers that hold sessions without measuring (START of a measurement
    without flows, then silence), from ten addresses of the legitimate user's own /24, 32 sessions
    each, reconnecting as soon as they are closed or refused: once nine such addresses shut
    everyone else out for as long as they kept going. Now they make room for any peer whose host
    holds fewer sessions; the legitimate runs are served throughout, and the passive's log and
    memory stay bounded."""

    ATTACKERS = [f"127.0.0.{i}" for i in range(2, 12)]
    SESSIONS = 32

    def attack(self, port, source, stop, counts):
        """Keeps SESSIONS sessions of `source` open, each sent START and then silent; a session
        the passive closes (or refuses: it answers START with an ACKNOWLEDGE of a busy status and
        closes) is opened again at once."""
        socks = []
        measurement = 1000
        while not stop.is_set():
            while len(socks) < self.SESSIONS and not stop.is_set():
                try:
                    s = connect_from(source, port + 1, timeout=2)
                    measurement += 1
                    s.sendall(start_message(measurement))
                    socks.append(s)
                    counts[source] = counts.get(source, 0) + 1
                except OSError:
                    time.sleep(0.01)
            readable, _, _ = select.select(socks, [], [], 0.05)
            for s in readable:
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:  # closed by the passive: reconnect
                    socks.remove(s)
                    s.close()
        for s in socks:
            s.close()

    @memory_figures
    def test_silent_reconnecting_peers_of_many_addresses_lock_nobody_out(self):
        port = PORT + 160
        with Passive(port, "-loglevel=3") as passive:
            attack = functools.partial(self.attack, port)
            with Attackers(passive, attack, self.ATTACKERS) as attackers:
                # The attack holds the passive: its network's sessions are full.
                wait_for_text(passive.output, "sessions of this network", timeout=30, proc=passive.proc)
                attackers.mark()
                served = []
                begin = time.monotonic()
                with tempfile.TemporaryDirectory() as d:
                    # 20 s: past the 5 s quiet grace four times over (40 s before: the same
                    # slowest run, twice as many of them)
                    while time.monotonic() - begin < 20:
                        t0 = time.monotonic()
                        r = run_active(f"127.0.0.1:{port}", "-y", "-runtime=1", "-scalar=run.sca", cwd=d, check=False,
                                       *["-tcp", "const50:const500:const50:const500"])
                        served.append((time.monotonic() - t0, r.returncode, r.stderr[-300:]))
                        self.assertEqual(r.returncode, 0, f"run {len(served)} was not served:\n{r.stderr[-1500:]}")
                        time.sleep(1)
            connects, grown_log, grown_rss = attackers.opened, attackers.log_growth, attackers.rss_growth
            slowest = max(s for s, _, _ in served)
            print(f"{len(served)} runs of 1 s served, the slowest in {slowest:.2f} s; the attackers opened "
                  f"{connects} sessions; log +{grown_log} bytes, memory {grown_rss:+.1f} MiB")
            self.assertGreaterEqual(len(served), 6)
            self.assertLess(slowest, 8.0, served)
            self.assertGreater(connects, 20 * len(self.ATTACKERS) * 2)  # they did keep reconnecting
            # Rate-limited: a few lines per kind and 10 s, whatever the attack's rate.
            self.assertLess(grown_log, 16384, passive.output()[-3000:])
            self.assertLess(grown_rss, 64)
            self.assertTrue(passive.alive())

    def test_a_refused_active_is_told_why(self):
        port = PORT + 170
        flows = ["-tcp", "const20:const200:const20:const200"]
        with Passive(port, "-loglevel=3", "--max-sessions=2") as passive, tempfile.TemporaryDirectory() as d:
            working = [Active(f"127.0.0.1:{port}", "-y", "-runtime=8", *flows, cwd=d).started() for _ in range(2)]
            r = run_active(f"127.0.0.1:{port}", "-y", "-runtime=1", *flows, cwd=d, check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("refused the session: it has as many sessions as it admits in all (its --max-sessions)",
                          r.stderr)
            self.assertEqual(len([line for line in r.stderr.splitlines() if "refused the session" in line]), 1,
                             r.stderr)
            for a in working:
                self.assertEqual(a.finish(), 0)  # working sessions are never closed to make room
            self.assertIn("2 sessions are open (--max-sessions)", passive.output())


class Exhaustion(unittest.TestCase):
    def test_silent_connections_of_one_host_do_not_lock_out_others(self):
        with Passive(PORT + 20, "-loglevel=4", "--max-sessions-per-host=4") as passive:
            silent = [connect_from("127.0.0.2", PORT + 21) for _ in range(20)]
            # Another host is served at once.
            with tempfile.TemporaryDirectory() as d:
                run_active(f"127.0.0.1:{PORT + 20}", "-y", "-runtime=1", "-scalar=run.sca", cwd=d,
                           *["-tcp", "const50:const500:const50:const500"])
            # The silent ones are closed within seconds (10 s without a first message).
            begin = time.monotonic()
            for s in silent:
                s.settimeout(15)
                try:
                    self.assertEqual(s.recv(10), b"")
                except ConnectionResetError:
                    pass
            self.assertLess(time.monotonic() - begin, 14)
            for s in silent:
                s.close()
            self.assertTrue(passive.alive())

    @memory_figures
    def test_huge_frames_cost_no_memory(self):
        with Passive(PORT + 30, "-loglevel=4") as passive:
            baseline = rss_mib(passive.proc.pid)
            control = socket.create_connection(("127.0.0.1", PORT + 31), timeout=5)
            control.sendall(add_flow(1, 77, 0.0, 1e12))  # saturated, frames of 10^12 bytes
            self.assertEqual(ack_status(control), 0)
            data = socket.create_connection(("127.0.0.1", PORT + 30), timeout=5)
            data.sendall(npmp.identify(1, 77))
            self.assertEqual(ack_status(control), 0)
            control.sendall(start_message(77))
            self.assertEqual(ack_status(control), 0)  # acknowledged at once
            received = 0
            end = time.monotonic() + 3
            while time.monotonic() < end:
                received += len(data.recv(1 << 20))
            grown = rss_mib(passive.proc.pid) - baseline
            self.assertGreater(received, 10_000_000)  # it sends the frame as it goes
            self.assertLess(grown, 64, f"the passive grew by {grown:.0f} MiB")
            reset(data)
            reset(control)
            time.sleep(0.3)
            self.assertTrue(passive.alive())

    @memory_figures
    def test_a_peer_that_never_reads_its_acknowledgements(self):
        with Passive(PORT + 40, "-loglevel=4") as passive:
            baseline = rss_mib(passive.proc.pid)
            control = socket.create_connection(("127.0.0.1", PORT + 41), timeout=5)
            control.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stops = npmp.stop(12345) * 4096  # STOP of an unknown measurement
            sent = 0
            try:
                for _ in range(400):  # 1.6 M STOPs, each answered with a 24-byte ACK nobody reads
                    control.sendall(stops)
                    sent += 1
            except (BrokenPipeError, ConnectionResetError, socket.timeout):
                pass  # closed by the passive: the peer does not read
            # whatever was sent is processed: its memory stops changing
            grown = settled(lambda: round(rss_mib(passive.proc.pid)), timeout=10, quiet=0.5) - baseline
            self.assertLess(grown, 48, f"the passive grew by {grown:.0f} MiB after {sent * 4096} STOPs")
            self.assertLess(sent, 400, "the passive never gave up on a peer that does not read")
            control.close()
            self.assertTrue(passive.alive())

    def test_result_spool_is_bounded(self):
        with Passive(PORT + 70, "-loglevel=3", "--max-spool=1") as passive, tempfile.TemporaryDirectory() as d:
            r = run_active(f"127.0.0.1:{PORT + 70}", "-y", "-runtime=2", "-vector=run.vec", "-scalar=run.sca",
                           "-tcp", "const0:const200", cwd=d, check=False, timeout=60)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("could not keep its per-flow vector", r.stderr)
            self.assertIn("spool is full (1 MiB per session (--max-spool))", passive.output())
            # Everything else arrived.
            for name in ("run-active.sca", "run-passive.sca", "run-active.vec", "run-passive.vec",
                         "run-active-00000000-0000.vec"):
                self.assertGreater(os.path.getsize(os.path.join(d, name)), 0, name)
            self.assertTrue(passive.alive())

    @memory_figures
    def test_runs_with_sctp_control_leave_nothing_behind(self):
        with Passive(PORT + 100, "-loglevel=4") as passive, tempfile.TemporaryDirectory() as d:
            run_active(f"127.0.0.1:{PORT + 100}", "-x", "-runtime=0.2", "-tcp", "const10:const100", cwd=d)
            baseline = rss_mib(passive.proc.pid)
            for _ in range(10):
                run_active(f"127.0.0.1:{PORT + 100}", "-x", "-runtime=0.2", "-tcp", "const10:const100", cwd=d,
                           timeout=30)
            grown = rss_mib(passive.proc.pid) - baseline
            # Each control association once allocated 65535 streams (about 4.2 MB that stayed).
            self.assertLess(grown, 8, f"10 runs with SCTP control: the passive grew by {grown:.1f} MiB")

    def test_measurements_per_session_are_bounded(self):
        with Passive(PORT + 50, "-loglevel=4") as passive:
            control = socket.create_connection(("127.0.0.1", PORT + 51), timeout=5)
            statuses = []
            for i in range(20):
                control.sendall(start_message(1000 + i))
                statuses.append(ack_status(control))
            self.assertEqual(statuses[:16], [0] * 16)
            self.assertEqual(statuses[16:], [1] * 4)
            control.close()
            self.assertTrue(passive.alive())


class KilledActive(unittest.TestCase):
    def test_a_killed_active_leaves_no_files(self):
        with Passive(PORT + 80, "-loglevel=4") as passive, tempfile.TemporaryDirectory() as d:
            for _ in range(3):
                active = Active(f"127.0.0.1:{PORT + 80}", "-y", "-runtime=30", "-vector=run.vec.bz2",
                                "-scalar=run.sca", "-tcp", "const0:const1400", cwd=d).started()
                time.sleep(0.5)  # spooling its vector rows
                active.kill()
            self.assertEqual(os.listdir(d), [])  # no half-written file, named or temporary
            self.assertTrue(passive.alive())


class PeerLeavesDuringUpload(unittest.TestCase):
    def test_nothing_of_the_upload_stays_open(self):
        # The passive holds its result files (anonymous spool files) while it uploads them; an
        # active that dies in the middle makes the upload fail. Before the files were owned,
        # that failure left the file (a deleted temporary, and its descriptor) open for the
        # daemon's lifetime.
        with Passive(PORT + 170) as passive, tempfile.TemporaryDirectory() as d:
            baseline = settled_descriptors(passive, PORT + 170, d)
            for _ in range(2):
                active = Active(f"127.0.0.1:{PORT + 170}", "-y", "-runtime=1", "-vector=run.vec",
                                "-tcp", "const0:const1400", cwd=d)
                # the passive's per-flow vector (tens of MB of rows) is on its way
                wait_for_text(active.output, "Downloading per-flow vector", timeout=60, proc=active.proc)
                active.kill()
            self.assertTrue(passive.alive())
            held = settled(lambda: descriptors(passive), timeout=15, quiet=0.5)
            spool = [os.readlink(f"/proc/{passive.proc.pid}/fd/{fd}")
                     for fd in os.listdir(f"/proc/{passive.proc.pid}/fd")]
            spool = [target for target in spool if target.endswith("(deleted)")]
            self.assertEqual(spool, [], "spool files left open")
            self.assertEqual(held, baseline, passive.output()[-2000:])


class HostilePassive(unittest.TestCase):
    """The active trusts a passive no more than a passive trusts its peers."""

    def serve(self, port, results_chunk):
        """A fake passive on `port`: acknowledges everything, then answers STOP with endless RESULTS."""
        control_listener = socket.create_server(("127.0.0.1", port + 1))
        data_listener = socket.create_server(("127.0.0.1", port))
        stop = threading.Event()

        def run():
            control, _ = control_listener.accept()
            data = None
            while not stop.is_set():
                m = npmp.read_message(control)
                if not m:
                    raise AssertionError("the active closed its control connection")
                message = npmp.decode(m)
                kind = message["kind"]
                if kind == npmp.ADD_FLOW:
                    flow, measurement, stream = message["flow"], message["meas"], message["stream"]
                    control.sendall(npmp.ack(flow, measurement, stream))
                    data, _ = data_listener.accept()
                    recv_exact(data, 26)  # the IDENTIFY message
                    control.sendall(npmp.ack(flow, measurement, stream))
                    threading.Thread(target=drain, args=(data,), daemon=True).start()
                elif kind in (npmp.START, npmp.STOP):
                    measurement = message["meas"]
                    control.sendall(npmp.ack(0, measurement))
                    if kind == npmp.STOP:
                        chunk = npmp.results(results_chunk)
                        try:
                            while not stop.is_set():
                                control.sendall(chunk * 64)
                        except OSError:
                            return

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return stop, [control_listener, data_listener]

    def test_results_beyond_the_download_limit(self):
        stop, listeners = self.serve(PORT + 90, b"x" * 1400)
        try:
            with tempfile.TemporaryDirectory() as d:
                begin = time.monotonic()
                r = run_active(f"127.0.0.1:{PORT + 90}", "-y", "-runtime=1", "-vector=run.vec",
                               "--max-download=2", "-tcp", "const10:const100", cwd=d, check=False, timeout=60)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("more than 2 MiB for run-passive.vec (--max-download)", r.stderr)
                self.assertLess(time.monotonic() - begin, 20)
                self.assertNotIn("run-passive.vec", os.listdir(d))  # nothing half-written
                self.assertIn("run-active.vec", os.listdir(d))      # its own results are kept
        finally:
            stop.set()
            for listener in listeners:
                listener.close()

    def test_the_active_disk_is_bounded_by_default(self):
        """Without --max-download a flooding passive may make the active write no more than the
        run could need (here: a 1-s run of one flow, so a measurement vector of about 1.5 MiB),
        never the 32 GiB of the old default (3.1 GB in 17 s); the bound holds on the disk while
        the flood goes on, not only at the end."""
        stop, listeners = self.serve(PORT + 95, b"x" * 1400)
        largest = [0]
        done = threading.Event()
        try:
            with tempfile.TemporaryDirectory() as d:
                def watch():
                    while not done.is_set():
                        try:
                            size = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
                        except OSError:
                            continue
                        largest[0] = max(largest[0], size)
                        time.sleep(0.005)
                watcher = threading.Thread(target=watch, daemon=True)
                watcher.start()
                begin = time.monotonic()
                r = run_active(f"127.0.0.1:{PORT + 95}", "-y", "-runtime=1", "-vector=run.vec",
                               "-tcp", "const10:const100", cwd=d, check=False, timeout=60)
                done.set()
                watcher.join()
                self.assertEqual(r.returncode, 1, r.stderr)
                lines = [line for line in r.stderr.splitlines() if "more than this run could make it write" in line]
                self.assertEqual(len(lines), 1, r.stderr)
                limit = int(re.search(r"more than (\d+) bytes for run-passive.vec", lines[0]).group(1))
                self.assertLess(limit, 4 << 20)
                self.assertLess(largest[0], limit + (1 << 20), f"{largest[0]} bytes on the disk")
                self.assertLess(time.monotonic() - begin, 20)
                self.assertNotIn("run-passive.vec", os.listdir(d))
        finally:
            stop.set()
            for listener in listeners:
                listener.close()


class KilledActiveWithSctpControl(unittest.TestCase):
    def test_its_session_ends_when_its_data_connections_are_gone(self):
        # A killed active cannot abort its SCTP control association; the passive would learn of
        # it only from missed heartbeats, minutes later, holding the measurement until then.
        with Passive(PORT + 110, "-loglevel=3") as passive, tempfile.TemporaryDirectory() as d:
            baseline = settled_descriptors(passive, PORT + 110, d)
            running = descriptors_while_killed(
                passive, [f"127.0.0.1:{PORT + 110}", "-x", "-nodisplay", "-runtime=30", "-vector=run.vec",
                          "-tcp", "const0:const1400:const50:const500", "-mptcp", "const10:const100"], d)
            self.assertGreater(running, baseline, passive.output())
            end = time.monotonic() + 10
            while len(os.listdir(f"/proc/{passive.proc.pid}/fd")) > baseline and time.monotonic() < end:
                time.sleep(0.2)
            self.assertEqual(len(os.listdir(f"/proc/{passive.proc.pid}/fd")), baseline)
            self.assertIn("every data connection of measurement", passive.output())


class DataConnectionsEndBeforeStop(unittest.TestCase):
    def test_the_measurement_can_still_be_stopped(self):
        # Data and control travel on different connections: an active that ends its data
        # connections as it stops may have them reach the passive before its STOP. The passive
        # waits (Session::kDataGoneGrace, 3 s) before it gives the session up.
        with Passive(PORT + 160, "-loglevel=3") as passive:
            control = socket.create_connection(("127.0.0.1", PORT + 161), timeout=5)
            control.sendall(add_flow(1, 79, 0.0, 0.0))
            self.assertEqual(ack_status(control), 0)
            data = socket.create_connection(("127.0.0.1", PORT + 160), timeout=5)
            data.sendall(npmp.identify(1, 79))
            self.assertEqual(ack_status(control), 0)
            control.sendall(start_message(79))
            self.assertEqual(ack_status(control), 0)
            reset(data)
            time.sleep(1)
            control.sendall(npmp.stop(79))
            self.assertEqual(ack_status(control), 0, passive.output())
            time.sleep(3.5)  # past the grace period: the stopped session stays
            # The session still answers: REMOVE_FLOW of a flow it does not have gets ERROR
            # (after the RESULTS messages of the result files it uploads).
            control.sendall(npmp.remove_flow(2, 79))
            while True:
                reply = npmp.decode(npmp.read_message(control))
                if reply["kind"] != npmp.RESULTS:
                    break
            self.assertEqual((reply["kind"], reply["status"]), (npmp.ACKNOWLEDGE, 1), passive.output())
            self.assertNotIn("every data connection of measurement", passive.output())
            control.close()
            self.assertTrue(passive.alive())


class AccessControl(unittest.TestCase):
    def test_allow_list(self):
        with Passive(PORT + 60, "-loglevel=3", "--allow=127.0.0.2/32,::1") as passive, \
                tempfile.TemporaryDirectory() as d:
            flows = ["-tcp", "const50:const500:const50:const500", "-udp", "const20:const200:const20:const200"]
            refused = run_active(f"127.0.0.1:{PORT + 60}", "-y", "-runtime=1", "-scalar=run.sca", *flows,
                                 cwd=d, check=False, timeout=30)
            self.assertEqual(refused.returncode, 1)
            self.assertIn("does not allow this host", refused.stderr)
            # A raw data connection from a host not in the list is closed at once.
            data = socket.create_connection(("127.0.0.1", PORT + 60), timeout=5)
            data.settimeout(5)
            try:
                self.assertEqual(data.recv(10), b"")
            except ConnectionResetError:
                pass
            data.close()
            allowed = run_active(f"127.0.0.1:{PORT + 60}", "-y", "-runtime=1", "-scalar=run.sca",
                                 "-l", "127.0.0.2", "-L", "127.0.0.2", *flows, cwd=d, timeout=30)
            self.assertEqual(allowed.returncode, 0)
            self.assertTrue(passive.alive())
            self.assertIn("not in the --allow list", passive.output())


class Authentication(unittest.TestCase):
    KEY = b"correct horse battery staple 42\n"

    def key_file(self, d, name, content, mode=0o600):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(content)
        os.chmod(path, mode)
        return path

    def test_shared_key(self):
        with tempfile.TemporaryDirectory() as d:
            key = self.key_file(d, "key", self.KEY)
            wrong = self.key_file(d, "wrong", b"another key of some length\n")
            loose = self.key_file(d, "loose", self.KEY, 0o644)
            flows = ["-tcp", "const20:const200:const20:const200", "-udp", "const10:const100"]
            r = run_active("127.0.0.1:9", "-y", f"--auth-key-file={loose}", *flows, check=False)
            self.assertEqual(r.returncode, 1)
            self.assertIn("permissions 0644 let others read", r.stderr)
            with Passive(PORT + 130, "-loglevel=3", f"--auth-key-file={key}") as passive:
                ok = run_active(f"127.0.0.1:{PORT + 130}", "-y", f"--auth-key-file={key}", "-runtime=1",
                                "-config=run.config", "-scalar=run.sca", "-vector=run.vec", *flows, cwd=d)
                self.assertIn("Authenticated", ok.stderr)
                self.assertGreater(os.path.getsize(os.path.join(d, "run-passive-00000001-0000.vec")), 0)
                with open(os.path.join(d, "run.config"), "rb") as f:
                    self.assertNotIn(self.KEY.strip(), f.read())  # no secret in the config file
                # Over SCTP control too.
                run_active(f"127.0.0.1:{PORT + 130}", "-x", f"--auth-key-file={key}", "-runtime=0.5", *flows, cwd=d)
                none = run_active(f"127.0.0.1:{PORT + 130}", "-y", "-runtime=1", *flows, cwd=d, check=False)
                self.assertEqual(none.returncode, 1)
                self.assertIn("requires authentication: give the shared key with --auth-key-file", none.stderr)
                bad = run_active(f"127.0.0.1:{PORT + 130}", "-y", f"--auth-key-file={wrong}", "-runtime=1", *flows,
                                 cwd=d, check=False)
                self.assertEqual(bad.returncode, 1)
                self.assertIn("could not prove the shared key", bad.stderr)
                self.assertTrue(passive.alive())
                self.assertIn("does not authenticate", passive.output())
                self.assertNotIn(self.KEY.strip().decode(), passive.output())  # no secret in the log
            with Passive(PORT + 140, "-loglevel=3") as passive:
                r = run_active(f"127.0.0.1:{PORT + 140}", "-y", f"--auth-key-file={key}", "-runtime=1", *flows,
                               cwd=d, check=False)
                self.assertEqual(r.returncode, 1)
                self.assertIn("does not use authentication", r.stderr)

    def test_a_recorded_handshake_cannot_be_replayed(self):
        import hmac
        import hashlib
        key = self.KEY.rstrip(b"\n")
        with tempfile.TemporaryDirectory() as d, \
                Passive(PORT + 150, "-loglevel=3", f"--auth-key-file={self.key_file(d, 'key', self.KEY)}"):
            nonce = os.urandom(32)

            def handshake(response=None):
                c = socket.create_connection(("127.0.0.1", PORT + 151), timeout=5)
                c.sendall(npmp.auth_hello(nonce))
                challenge = recv_exact(c, 68)
                self.assertEqual(challenge[0], 10)
                np_, mac = challenge[4:36], challenge[36:68]
                self.assertEqual(mac, hmac.new(key, b"NPMP passive" + nonce + np_, hashlib.sha256).digest())
                if response is None:
                    response = hmac.new(key, b"NPMP active" + np_ + nonce, hashlib.sha256).digest()
                c.sendall(npmp.auth_response(response))
                status = ack_status(c)
                c.close()
                return status, response

            status, recorded = handshake()
            self.assertEqual(status, 0)
            replayed, _ = handshake(recorded)  # same active nonce, old response: the passive's nonce differs
            self.assertEqual(replayed, 2)


if __name__ == "__main__":
    from harness import main

    main()
