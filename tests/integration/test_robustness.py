"""The passive survives whatever one peer sends and keeps serving others; the active keeps its
own results when the passive goes away; SIGINT on the active collects everything."""

import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from harness import Active, free_base_port, NETPERFMETER, Passive, read_scalars, run_active, wait_for_text

import npmp  # noqa: E402  (tests/lib, on the path through harness)

PORT, _ = free_base_port(span=42)  # this test's ports: PORT - 1 .. PORT + 43, its own
# An ADD_FLOW's fields all 0 where these tests give nothing.
NOTHING = dict(protocol=0, ordered=0, reliable=0, retrans=0, rcvbuf=0, sndbuf=0, maxmsgsize=0, cc=b"")


def header(kind, length, flags=0):
    return npmp.header(kind, flags, length)


def tcp_send(port, data, linger=0.2):
    """The passive's answer to `data` (b"" if it closes), waiting up to 1 s + linger for it."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(data)
        s.settimeout(1 + linger)
        try:
            return s.recv(100)
        except (socket.timeout, ConnectionResetError):
            return None


class HostilePeers(unittest.TestCase):
    def test_garbage_truncated_and_oversized_messages(self):
        with Passive(PORT, "-loglevel=2") as passive:
            control, data = PORT + 1, PORT
            # Control: random bytes, length below the header, unknown type, truncated ADD_FLOW,
            # a length larger than the data, an IDENTIFY on control, an ADD_FLOW lying about its events.
            tcp_send(control, os.urandom(4096))
            self.assertEqual(tcp_send(control, header(2, 3)), b"")
            self.assertEqual(tcp_send(control, header(99, 4)), b"")
            self.assertEqual(tcp_send(control, header(2, 194) + b"\0" * 20), None)  # waits for the rest, then we close
            self.assertEqual(tcp_send(control, header(2, 60000) + b"x" * 100), b"")  # no ADD_FLOW has that length
            self.assertEqual(tcp_send(control, header(2, 194 + 36 * 1000) + b"x" * 100), None)  # plausible: waits
            self.assertEqual(tcp_send(control, npmp.identify(0, 1)), b"")
            lying = npmp.add_flow(0, 0, n_events=3, **NOTHING)  # claims 3 on/off events that are not there
            self.assertEqual(tcp_send(control, lying), b"")
            # REMOVE_FLOW / STOP for unknown things: answered with status ERROR, connection stays.
            reply = npmp.decode(tcp_send(control, npmp.remove_flow(5, 77)))
            self.assertEqual((reply["kind"], reply["status"]), (npmp.ACKNOWLEDGE, 1))
            # Data: garbage, a DATA before IDENTIFY, an IDENTIFY for an unknown flow, a bad magic.
            self.assertEqual(tcp_send(data, os.urandom(2000)), b"")
            self.assertEqual(tcp_send(data, header(5, 48) + b"\0" * 44), b"")
            self.assertEqual(tcp_send(data, npmp.identify(1, 2)), b"")
            self.assertEqual(tcp_send(data, npmp.identify(1, 2, magic=npmp.MAGIC ^ 1)), b"")
            self.assertEqual(tcp_send(PORT - 1, os.urandom(500)), b"")  # MPTCP listener
            # UDP: garbage and IDENTIFY for unknown flows.
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                for _ in range(200):
                    u.sendto(os.urandom(64), ("127.0.0.1", data))
                u.sendto(npmp.identify(1, 2), ("127.0.0.1", data))
            # Connections that never speak, left open during the measurement below.
            silent = [socket.create_connection(("127.0.0.1", p)) for p in (control, data, data)]
            self.assertTrue(passive.alive())

            with tempfile.TemporaryDirectory() as d:
                run_active(f"127.0.0.1:{PORT}", "-y", "-runtime=1", "-scalar=run.sca", cwd=d,
                           *["-tcp", "const100:const1000:const100:const1000", "-udp", "const50:const200"])
                scalars = read_scalars(os.path.join(d, "run-passive.sca"))
                self.assertGreater(scalars[("netPerfMeter.passive.flow[1]", "Received Packets")], 40)
            for s in silent:
                s.close()
            self.assertTrue(passive.alive())
            log = passive.output()
            self.assertIn("IDENTIFY", log)
            self.assertIn("Ignored", log)  # UDP garbage, rate-limited
            self.assertLess(log.count("Ignored"), 40)

    def test_udp_identify_from_another_host_is_not_accepted(self):
        """No traffic reflection: UDP data only goes to the host of the control connection."""
        with Passive(PORT + 10) as passive:
            # A control connection from 127.0.0.1 adds a UDP flow ...
            c = socket.create_connection(("127.0.0.1", PORT + 11), source_address=("127.0.0.1", 0))
            c.sendall(npmp.add_flow(3, 99, **dict(NOTHING, protocol=17, maxmsgsize=1000, cc=b"default")))
            c.settimeout(2)
            self.assertEqual(npmp.decode(npmp.read_message(c))["status"], 0)
            # ... and an IDENTIFY for it arrives from another address (127.0.0.2).
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                u.bind(("127.0.0.2", 0))
                u.sendto(npmp.identify(3, 99), ("127.0.0.1", PORT + 10))
            c.settimeout(1)
            with self.assertRaises(socket.timeout):
                c.recv(24)
            c.close()
            wait_for_text(passive.output, "control connection came from 127.0.0.1")


class ActiveEndings(unittest.TestCase):
    def test_sigint_stops_and_collects_everything(self):
        with Passive(PORT + 20), tempfile.TemporaryDirectory() as d:
            active = Active(f"127.0.0.1:{PORT + 20}", "-y", "-scalar=run.sca", "-vector=run.vec",
                            "-tcp", "const100:const1000:const100:const1000", cwd=d).started()
            time.sleep(1)  # the run's length (what is measured is read from its scalars)
            active.proc.send_signal(signal.SIGINT)
            code = active.proc.wait(timeout=30)
            err = active.output()
            active.finish()
            self.assertEqual(code, 0, err)
            self.assertIn("*** Break ***", err)
            for name in ("run-active.sca", "run-passive.sca", "run-active.vec", "run-passive.vec",
                         "run-active-00000000-0000.vec", "run-passive-00000000-0000.vec"):
                self.assertTrue(os.path.getsize(os.path.join(d, name)) > 0, name)
            scalars = read_scalars(os.path.join(d, "run-active.sca"))
            # whatever the machine's load made of the wall clock: 100 frames/s over the interval
            # the measurement covered, the first frame at its start
            flow = "netPerfMeter.active.flow[0]"
            interval = (scalars[(flow, "Last Transmission")] - scalars[(flow, "First Transmission")]) / 1e6
            self.assertGreater(interval, 0.5)
            self.assertAlmostEqual(scalars[(flow, "Transmitted Frames")], 100 * interval + 1, delta=1.5)

    def test_losing_the_passive_keeps_the_actives_results(self):
        with tempfile.TemporaryDirectory() as d:
            passive = Passive(PORT + 30).__enter__()
            p = subprocess.Popen([NETPERFMETER, f"127.0.0.1:{PORT + 30}", "-nodisplay", "-y", "-runtime=10",
                                  "-scalar=run.sca", "-vector=run.vec", "-tcp", "const50:const500"],
                                 cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            wait_for_text(passive.output, "Starting measurement", proc=p)
            time.sleep(1.5)  # the run so far, which the active keeps (about 75 frames)
            passive.proc.kill()
            passive.__exit__(None, None, None)
            _, err = p.communicate(timeout=30)
            self.assertEqual(p.returncode, 1)
            self.assertIn("ERROR", err)
            self.assertIn("own results", err)
            scalars = read_scalars(os.path.join(d, "run-active.sca"))
            self.assertGreater(scalars[("netPerfMeter.active.flow[0]", "Transmitted Frames")], 50)
            self.assertTrue(os.path.exists(os.path.join(d, "run-active.vec")))
            self.assertFalse(os.path.exists(os.path.join(d, "run-passive.sca")))
            leftovers = [f for f in os.listdir(d) if ".tmp-" in f]
            self.assertEqual(leftovers, [])

    def test_full_disk_is_a_clear_error(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to mount a small tmpfs")
        with Passive(PORT + 40), tempfile.TemporaryDirectory() as d:
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", d], check=True)
            try:
                result = run_active(f"127.0.0.1:{PORT + 40}", "-y", "-runtime=2", "-config=run.config",
                                    "-scalar=run.sca", "-vector=run.vec", "-tcp", "const0:const1400",
                                    cwd=d, check=False)
                self.assertEqual(result.returncode, 1)
                self.assertRegex(result.stderr, r"cannot write .*No space left on device")
                self.assertTrue(os.path.getsize(os.path.join(d, "run.config")) > 0)  # written before: kept
                self.assertEqual([f for f in os.listdir(d) if ".tmp-" in f], [])
            finally:
                subprocess.run(["umount", d], check=False)


if __name__ == "__main__":
    from harness import main
    main()
