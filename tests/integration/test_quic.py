"""QUIC flows (-quic) on loopback against the real binary: a CA and the passive's certificate
made here with openssl; one QUIC connection with three streams (saturated one way, rate-driven
both ways, rate-driven the other way), its scalars and JSON document; a certificate for another
name (the active fails with one line, the passive serves the next run); a passive without key
and certificate (it refuses the flow); nothing on UDP PORT-1 (one line within the handshake
timeout); the command line's QUIC rules. Skipped where the build has no QUIC."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

from harness import NETPERFMETER, Passive, free_base_port, main, read_scalars, run_active

QUIC = os.environ.get("NPM_QUIC_BUILT") == "ON"
PORT, _ = free_base_port(span=16)  # this test's ports: PORT - 1 .. PORT + 17, its own
SKIP = unittest.skipUnless(QUIC and shutil.which("openssl"),
                           "the build has no QUIC (NPM_QUIC_BUILT is not ON)" if not QUIC else "no openssl")


def make_certificates(directory):
    """ca.pem and the passive's server.key/server.pem (names localhost and 127.0.0.1), signed by it."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=npm test CA")
    openssl("req", *curve, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    with open(os.path.join(directory, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "server.ext")
    return {name: os.path.join(directory, name) for name in ("ca.pem", "server.key", "server.pem")}


def error_lines(stderr):
    return [line for line in stderr.splitlines() if "ERROR" in line or "error" in line.split(":")[0].lower()]


@SKIP
class QuicRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="npm-quic-")
        cls.files = make_certificates(cls.dir)
        cls.passive = Passive(PORT, "-X", "-tls-key", cls.files["server.key"], "-tls-cert", cls.files["server.pem"])
        cls.passive.__enter__()
        # The certificate name defaults to the passive's host as given: 127.0.0.1.
        cls.result = run_active(
            f"127.0.0.1:{PORT}", "-control-over-tcp", "-runtime=3", "-scalar=run.sca", "--json=run.json",
            "-config=run.config", "-tls-ca", cls.files["ca.pem"],
            "-quic", "const0:const16000:description=Bulk",
            "const20:const1000:const20:const1000:description=Voice",
            "const0:const0:const25:const1200:cc=default:description=Back",
            "const100:const500:onoff=1,+1:description=OnOff",
            cwd=cls.dir, check=False, timeout=90)

    @classmethod
    def tearDownClass(cls):
        cls.passive.__exit__(None, None, None)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def test_1_three_streams_carry_their_traffic(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        active = read_scalars(self.path("run-active.sca"))
        passive = read_scalars(self.path("run-passive.sca"))

        def flow(side, n):
            return f"netPerfMeter.{side}.flow[{n}]"

        # flow 0: saturated, active -> passive only
        self.assertGreater(active[(flow("active", 0), "Transmitted Bytes")], 1e6)
        self.assertGreater(passive[(flow("passive", 0), "Received Bytes")], 1e6)
        self.assertEqual(passive[(flow("passive", 0), "Transmitted Bytes")], 0)
        # flow 1: 20 frames/s of 1000 bytes both ways (about 60 frames in 3 s)
        for side, other in (("active", "passive"), ("passive", "active")):
            sent = {"active": active, "passive": passive}[side][(flow(side, 1), "Transmitted Bytes")]
            got = {"active": active, "passive": passive}[other][(flow(other, 1), "Received Bytes")]
            self.assertGreater(sent, 40 * 1000, side)
            self.assertGreater(got, 0.8 * sent, side)
        # flow 2: passive -> active only
        self.assertEqual(active[(flow("active", 2), "Transmitted Bytes")], 0)
        self.assertGreater(passive[(flow("passive", 2), "Transmitted Bytes")], 50 * 1200)
        self.assertGreater(active[(flow("active", 2), "Received Bytes")], 50 * 1200)
        # flow 3: 100 frames/s of 500 bytes, off at START, on at 1 s, off at 2 s of the 3 s: about
        # 100 frames, never the 300 of a flow on all the time; all of them arrive
        sent = active[(flow("active", 3), "Transmitted Bytes")]
        self.assertGreater(sent, 0, "the on/off flow never went on")
        self.assertLessEqual(sent, 150 * 500, "the on/off flow sent while off")
        self.assertEqual(passive[(flow("passive", 3), "Received Bytes")], sent)
        # the flows' path: the connection's, sampled on both sides
        for side, scalars in (("active", active), ("passive", passive)):
            self.assertGreater(scalars[(f"netPerfMeter.{side}.flow[0].path[0]", "Samples")], 5, side)

    def test_2_json_and_config_say_quic(self):
        with open(self.path("run.json")) as f:
            document = json.load(f)
        self.assertIsNone(document["error"])
        self.assertEqual([f["protocol"] for f in document["flows"]], ["QUIC"] * 4)
        self.assertEqual([f["stream_id"] for f in document["flows"]], [0, 1, 2, 3])
        self.assertEqual([f["congestion_control"] for f in document["flows"]], ["reno"] * 4)
        with open(self.path("run.config")) as f:
            self.assertIn('FLOW0_PROTOCOL="QUIC"', f.read())

    def test_3_wrong_name_fails_with_one_line_and_the_passive_serves_on(self):
        began = time.monotonic()
        bad = run_active(f"127.0.0.1:{PORT}", "-control-over-tcp", "-runtime=1", "-tls-ca", self.files["ca.pem"],
                         "-tls-hostname", "wrong.example", "-quic", "const10:const1000", cwd=self.dir, check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertLess(time.monotonic() - began, 15)
        errors = error_lines(bad.stderr)
        self.assertEqual(len(errors), 1, bad.stderr)
        self.assertIn("certificate of wrong.example", errors[0])
        self.assertIn("does not match", errors[0])
        # Untrusted: the system's CAs do not know the test CA.
        untrusted = run_active(f"localhost:{PORT}", "-control-over-tcp", "-runtime=1",
                               "-quic", "const10:const1000", cwd=self.dir, check=False)
        self.assertNotEqual(untrusted.returncode, 0)
        self.assertIn("NOT trusted", untrusted.stderr)
        self.assertTrue(self.passive.alive())
        good = run_active(f"localhost:{PORT}", "-control-over-tcp", "-runtime=1", "-scalar=good.sca",
                          "-tls-ca", self.files["ca.pem"], "-quic", "const10:const1000:const10:const1000",
                          cwd=self.dir, check=False)
        self.assertEqual(good.returncode, 0, good.stderr)
        scalars = read_scalars(self.path("good-passive.sca"))
        self.assertGreater(scalars[("netPerfMeter.passive.flow[0]", "Received Bytes")], 0)


class WithCertificates(unittest.TestCase):
    """A temporary directory with the test CA and the passive's key and certificate."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="npm-quic-")
        cls.files = make_certificates(cls.dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)


@SKIP
class QuicRefused(WithCertificates):
    def test_a_passive_without_key_and_certificate_refuses_quic(self):
        with Passive(PORT + 5, "-X") as passive:
            result = run_active(f"127.0.0.1:{PORT + 5}", "-control-over-tcp", "-runtime=1", "-tls-ca",
                                self.files["ca.pem"], "-quic", "const10:const1000", cwd=self.dir, check=False,
                                timeout=30)
            self.assertTrue(passive.alive())
            self.assertIn("QUIC only when started with -tls-key and -tls-cert", passive.output())
        self.assertNotEqual(result.returncode, 0)
        errors = error_lines(result.stderr)
        self.assertEqual(len(errors), 1, result.stderr)
        self.assertIn("-tls-key and -tls-cert", errors[0])

    def test_nothing_on_the_quic_port_is_one_line_within_the_handshake_timeout(self):
        # The passive's data listeners (QUIC among them) on 127.0.0.2, its control on 127.0.0.1:
        # ADD_FLOW is accepted, and nothing answers on 127.0.0.1:PORT-1.
        with Passive(PORT + 10, "-X", "-L", "127.0.0.2", "-l", "127.0.0.1", "-tls-key", self.files["server.key"],
                     "-tls-cert", self.files["server.pem"]):
            began = time.monotonic()
            result = run_active(f"127.0.0.1:{PORT + 10}", "-control-over-tcp", "-runtime=1", "-tls-ca",
                                self.files["ca.pem"], "-quic", "const10:const1000", cwd=self.dir, check=False,
                                timeout=60)
            took = time.monotonic() - began
        self.assertNotEqual(result.returncode, 0)
        self.assertLess(took, 14)
        errors = error_lines(result.stderr)
        self.assertEqual(len(errors), 1, result.stderr)
        self.assertIn("QUIC", errors[0])
        self.assertIn(f"127.0.0.1:{PORT + 9}", errors[0])


@SKIP
class QuicIpv6(WithCertificates):
    """-6 applies to the QUIC socket as to the other listeners, and an active reaches a passive
    over IPv6 (::1)."""

    def test_v6only_passive_serves_quic_over_ipv6_only(self):
        with Passive(PORT + 14, "-X", "-6", "-tls-key", self.files["server.key"], "-tls-cert",
                     self.files["server.pem"]) as passive:
            result = run_active(f"[::1]:{PORT + 14}", "-control-over-tcp", "-runtime=1", "-scalar=v6.sca",
                                "-tls-ca", self.files["ca.pem"], "-tls-hostname", "localhost",
                                "-quic", "const20:const1000:const20:const1000", cwd=self.dir, check=False, timeout=60)
            self.assertEqual(result.returncode, 0, result.stderr)
            # IPv6 only: nothing listens on IPv4 UDP PORT-1 (the kernel's port unreachable comes
            # back at once as ECONNREFUSED); a dual-stack socket would take the datagram in silence.
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.settimeout(10)
                s.connect(("127.0.0.1", PORT + 13))
                s.send(b"\xc0" + bytes(1199))
                with self.assertRaises(ConnectionRefusedError):
                    s.recv(100)
            self.assertTrue(passive.alive())
        for side in ("active", "passive"):
            scalars = read_scalars(os.path.join(self.dir, f"v6-{side}.sca"))
            self.assertGreater(scalars[(f"netPerfMeter.{side}.flow[0]", "Received Bytes")], 0, side)


@SKIP
class QuicCommandLine(unittest.TestCase):
    def run_netperfmeter(self, *args):
        return subprocess.run([NETPERFMETER, *args], capture_output=True, text=True, timeout=30)

    def refused(self, *args):
        result = self.run_netperfmeter(*args)
        self.assertEqual(result.returncode, 1, result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        return lines[0]

    def test_options_that_make_no_sense_for_quic_are_refused(self):
        target = f"127.0.0.1:{PORT}"
        self.assertIn("reno, cubic or default", self.refused(target, "-quic", "const1:const100:cc=bbr"))
        self.assertIn("ordered and reliable", self.refused(target, "-quic", "const1:const100:unreliable=0.5"))
        self.assertIn("rcvbuf= and sndbuf=", self.refused(target, "-quic", "const1:const100:sndbuf=100000"))
        self.assertIn("ccid=", self.refused(target, "-quic", "const1:const100:ccid=2"))
        self.assertIn("share its congestion control",
                      self.refused(target, "-quic", "const1:const100:cc=cubic", "const1:const100"))
        self.assertIn("options of the passive side",
                      self.refused(target, "-tls-key", "/dev/null", "-quic", "const1:const100"))
        self.assertIn("cannot read", self.refused(target, "-tls-ca", "/nonexistent/ca.pem", "-quic", "const1:const100"))

    def test_passive_rules(self):
        self.assertIn("go together", self.refused(str(PORT), "-tls-key", "/dev/null"))
        self.assertIn("option of the active side", self.refused(str(PORT), "-tls-hostname", "x"))

    def test_help_names_the_options(self):
        out = self.run_netperfmeter("--help").stdout
        for option in ("-quic FLOWSPEC", "--tls-key", "--tls-cert", "--tls-ca", "--tls-hostname"):
            self.assertIn(option, out)


if __name__ == "__main__":
    main()
