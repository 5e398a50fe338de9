"""A wildcard-bound QUIC passive with two addresses answers from the one its client sent to
(IP_PKTINFO / IPV6_PKTINFO): two network namespaces joined by a veth pair, the passive's side
with two IPv4 and two IPv6 addresses on it, the active connecting to the second one of each.
Without that, the kernel picks the reply's source by its own rules, the active's connected
socket drops the replies, and its handshake times out: for IPv4 the interface's primary address
(the first one added); for IPv6 (RFC 6724) the longest matching prefix, counted by Linux up to
the address's prefix length, then the address added last -- so the other IPv6 address is a /128
that shares more leading bits with the active's address, added after the one the active is sent
to (measured: with the other address a /64 added first, Linux chose the right source by itself,
and the test passed without IPV6_PKTINFO)."""

import os
import shutil
import subprocess
import tempfile
import unittest

from harness import Passive, free_base_port, main, read_scalars, run_active

QUIC = os.environ.get("NPM_QUIC_BUILT") == "ON"
PORT, _ = free_base_port()  # this test's ports: PORT - 1 .. PORT + 1, in its own namespaces

ACTIVE_V4, PASSIVE_V4 = "10.199.0.10/24", ("10.199.0.1/24", "10.199.0.2/24")
ACTIVE_V6, PASSIVE_V6 = "fd99::10/64", ("fd99::11/128", "fd99::20/64")


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@unittest.skipUnless(QUIC, "the build has no QUIC (NPM_QUIC_BUILT is not ON)")
@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
@unittest.skipUnless(shutil.which("openssl"), "no openssl")
class QuicSecondAddress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from test_quic import make_certificates
        cls.dir = tempfile.mkdtemp(prefix="npm-quic-netns-")
        cls.files = make_certificates(cls.dir)
        cls.active_ns, cls.passive_ns = f"npmqa{os.getpid()}", f"npmqp{os.getpid()}"
        for ns in (cls.active_ns, cls.passive_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
        try:
            ip("link", "add", "qa0", "netns", cls.active_ns, "type", "veth", "peer", "name", "qp0", "netns",
               cls.passive_ns)
            # IPv4: the primary address first, then the one the active is sent to; IPv6 the other
            # way round (see above). No duplicate address detection: usable at once.
            ip("-n", cls.active_ns, "addr", "add", ACTIVE_V4, "dev", "qa0")
            ip("-n", cls.active_ns, "addr", "add", ACTIVE_V6, "dev", "qa0", "nodad")
            for v4 in PASSIVE_V4:
                ip("-n", cls.passive_ns, "addr", "add", v4, "dev", "qp0")
            for v6 in reversed(PASSIVE_V6):
                ip("-n", cls.passive_ns, "addr", "add", v6, "dev", "qp0", "nodad")
            for ns, dev in ((cls.active_ns, "qa0"), (cls.passive_ns, "qp0")):
                ip("-n", ns, "link", "set", dev, "up")
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for ns in (cls.active_ns, cls.passive_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_to(self, address, name):
        target = f"[{address}]:{PORT}" if ":" in address else f"{address}:{PORT}"
        with Passive(PORT, "-X", "-tls-key", self.files["server.key"], "-tls-cert", self.files["server.pem"],
                     netns=self.passive_ns) as passive:
            result = run_active(target, "-control-over-tcp", "-runtime=1", f"-scalar={name}.sca",
                                "-tls-ca", self.files["ca.pem"], "-tls-hostname", "localhost",
                                "-quic", "const20:const1000:const20:const1000", netns=self.active_ns,
                                cwd=self.dir, check=False, timeout=60)
            self.assertTrue(passive.alive())
        self.assertEqual(result.returncode, 0, result.stderr)
        for side in ("active", "passive"):
            scalars = read_scalars(os.path.join(self.dir, f"{name}-{side}.sca"))
            self.assertGreater(scalars[(f"netPerfMeter.{side}.flow[0]", "Received Bytes")], 0, side)

    def test_ipv4_second_address(self):
        self.run_to(PASSIVE_V4[1].split("/")[0], "v4")

    def test_ipv6_second_address(self):
        self.run_to(PASSIVE_V6[1].split("/")[0], "v6")


if __name__ == "__main__":
    main()
