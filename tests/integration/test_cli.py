"""Command line: validation happens before anything connects, with one clear line and exit 1."""

import ctypes
import ctypes.util
import os
import socket
import subprocess
import time
import unittest

from harness import free_base_port, NETPERFMETER, Passive

PORT, _ = free_base_port(span=22)  # this test's ports: PORT - 1 .. PORT + 23, its own


def clock_synchronised():
    """What adjtimex(2) says: STA_UNSYNC (0x40) clear and no TIME_ERROR (5)."""
    class Timex(ctypes.Structure):  # modes, offset, freq, maxerror, esterror, status, and the rest
        _fields_ = [("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
                    ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long), ("status", ctypes.c_int),
                    ("rest", ctypes.c_byte * 256)]
    tx = Timex()
    state = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).adjtimex(ctypes.byref(tx))
    return state not in (-1, 5) and not tx.status & 0x40


def run(*args, cwd=None):
    return subprocess.run([NETPERFMETER, *args], capture_output=True, text=True, timeout=30, cwd=cwd)


class CommandLine(unittest.TestCase):
    def setUp(self):
        # A listener on the control port that must never see a connection.
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", PORT + 1))
        self.listener.listen()
        self.listener.settimeout(0.05)

    def tearDown(self):
        self.listener.close()

    def assertRejected(self, args, fragment):
        result = run(f"127.0.0.1:{PORT}", *args)
        self.assertEqual(result.returncode, 1, result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, f"expected one line, got: {result.stderr!r}")
        self.assertIn(fragment, lines[0])
        with self.assertRaises(socket.timeout, msg="the active connected before validating"):
            self.listener.accept()

    def test_bad_flowspecs(self):
        self.assertRejected(["-tcp", "const0:const1400", "-udp", "const10:foo"], 'outbound frame size "foo"')
        self.assertRejected(["-tcp", "const0:const1400:nodelay=maybe"], 'option "nodelay=maybe"')
        self.assertRejected(["-tcp", "const0:const1400:onoff=1,+2,repeat"], "relative")
        self.assertRejected(["-tcp", "const0:const1400:id=1", "-tcp", "const0:const1400:id=1"], "used twice")
        self.assertRejected(["-udp", "const1:const1:maxmsgsize=65535"], "65507")

    def test_bad_options(self):
        self.assertRejected(["-tcp", "const0:const1400", "-runtime=abc"], "duration")
        self.assertRejected(["-tcp", "const0:const1400", "-frobnicate"], 'unknown option "-frobnicate"')
        self.assertRejected(["-tcp", "const0:const1400", "-N", "0"], "flow count")
        self.assertRejected(["-tcp", "const0:const1400", "-L", "not-an-address"], "not an IPv4 or IPv6 address")
        self.assertRejected(["-tcp", "const0:const1400", "-loglevel=9"], "log level")
        self.assertRejected(["-tcp", "const0:const1400", "--path-interval=abc"], "milliseconds from 0")
        self.assertRejected(["-tcp", "const0:const1400", "--path-interval=-5"], "milliseconds from 0")
        self.assertRejected(["-tcp", "const0:const1400", "--warmup=-1"], "seconds from 0")
        self.assertRejected(["-tcp", "const0:const1400", "--warmup=1s"], "seconds from 0")
        self.assertRejected(["-tcp", "const0:const1400", "-runtime=2", "--warmup=2"],
                            "--warmup (2 s) must be shorter than --runtime (2 s)")
        self.assertRejected([], "no flows specified")

    def test_a_single_letter_is_its_short_option(self):
        # As getopt_long_only: "-i" is --rcvbuf and "-w" --control-over-mptcp, although "i" and
        # "w" alone would also abbreviate --idle-timeout and --warmup.
        self.assertRejected(["-tcp", "const0:const1400", "-i", "lots"], "expected a buffer size in bytes")
        result = run(f"127.0.0.1:{PORT + 5}", "-w", "-tcp", "const0:const1400")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("(control over MPTCP)", result.stderr)
        self.assertRejected(["-tcp", "const0:const1400", "-warm", "-1"], "expected seconds from 0 (no warm-up)")

    def test_kernel_capabilities(self):
        self.assertRejected(["-tcp", "const0:const1400:cc=nosuchcc"], 'congestion control "nosuchcc" is not available')
        self.assertNotIn("cc-loader", run(f"127.0.0.1:{PORT}", "-tcp", "const0:const1400:cc=nosuchcc").stderr)
        try:
            socket.socket(socket.AF_INET, 6, 33).close()
            has_dccp = True
        except OSError:
            has_dccp = False
        if not has_dccp:
            self.assertRejected(["-dccp", "const10:const1000"], "DCCP is not supported by this kernel")

    def test_output_directory_checked_first(self):
        self.assertRejected(["-tcp", "const0:const1400", "-scalar=/nonexistent/dir/run.sca"], "does not exist")

    def test_unresolvable_host(self):
        result = run("no-such-host.invalid:9000", "-tcp", "const0:const1400")
        self.assertEqual(result.returncode, 1)
        self.assertIn("cannot resolve", result.stderr)

    def test_version_and_help_go_to_stdout(self):
        result = run("-v")
        self.assertEqual(result.returncode, 0)
        # The version, then the userland SCTP stack it links (bundled: with its patches).
        self.assertRegex(result.stdout, r"^NetPerfMeter \d+\.\d+\.\d+\nuserland SCTP: "
                                        r"(bundled libusrsctp \S+ \(Debian source\) with patches [0-9 ]+|"
                                        r"system libusrsctp \(\S+\))\n$")
        for flag in ("-h", "--help", "-help"):
            result = run(flag)
            self.assertEqual(result.returncode, 0)
            self.assertIn("FLOWSPEC", result.stdout)

    def test_seed_and_start_at(self):
        flow = ["-tcp", "const0:const1400"]
        self.assertRejected([*flow, "-seed=0"], "expected a seed from 1 to 9007199254740991")
        self.assertRejected([*flow, "-seed=abc"], "expected a seed from 1")
        self.assertRejected([*flow, f"-seed={2 ** 53}"], "expected a seed from 1")
        for bad in ("soon", "1764300000.", "1764300000.1234567", "-5", "1e9", ""):
            self.assertRejected([*flow, f"--start-at={bad}"], "seconds since the epoch")
        self.assertRejected([*flow, "--start-at=1000000000.5"], "--start-at: the time is ")
        self.assertRejected([*flow, "--start-at-unsynchronised"], "goes with --start-at")
        # A time ahead: refused on a clock the kernel calls unsynchronised, unless allowed.
        ahead = f"--start-at={int(time.time()) + 3600}"
        if clock_synchronised():
            print("the kernel says the clock is synchronised: the refusal is not seen here")
        else:
            self.assertRejected([*flow, ahead], "the local clock is not synchronised")
        for args in (["-seed=7"], [ahead], ["--start-at-unsynchronised"]):
            result = run(str(PORT), *args)
            self.assertEqual(result.returncode, 1)
            self.assertIn("active side", result.stderr)

    def test_passive_port_range(self):
        for port in ("1", "65535", "70000"):
            result = run(port)
            self.assertEqual(result.returncode, 1)
            self.assertIn("2 to 65534", result.stderr)

    def test_connection_refused_is_one_clear_error(self):
        result = run(f"127.0.0.1:{PORT + 10}", "-tcp", "const0:const1400", "-q")
        self.assertEqual(result.returncode, 1)
        self.assertIn("cannot connect to 127.0.0.1:", result.stderr)
        # It names the control port and asks whether a passive runs on the base port.
        self.assertIn(f"nothing listens on the passive's control port (PORT+1 = {PORT + 11}); "
                      f"is \"netperfmeter {PORT + 10}\" running there?", result.stderr)

    def test_habits_from_other_tools_are_warned_about(self):
        # A FLOWSPEC buffer of 512 bytes is unlikely to be meant, and (in a build without QUIC) the
        # reference's QUIC options do nothing: each said in a warning, none silently taken. (With
        # QUIC they take effect: test_quic.py.)
        quic = os.environ.get("NPM_QUIC_BUILT") == "ON"
        result = run(f"127.0.0.1:{PORT + 10}", "-control-over-tcp",
                     *([] if quic else ["-tls-key", "key.pem"]), "-tcp", "const0:const1400:sndbuf=512")
        self.assertEqual(result.returncode, 1, result.stderr)
        if not quic:
            self.assertRegex(result.stderr, r'option "-tls-key" is for QUIC flows .*ignored')
        self.assertIn("flow #0: sndbuf=512 is a buffer of 512 bytes", result.stderr)
        # Without such options: no warning.
        result = run(f"127.0.0.1:{PORT + 10}", "-control-over-tcp", "-tcp", "const0:const1400:sndbuf=65536")
        self.assertNotIn("buffer of", result.stderr)
        self.assertNotIn("sets the", result.stderr)

    def test_iperf3_habits_get_an_error_naming_both(self):
        """The reference's short options keep their meaning; an argument that cannot be what the
        reference means and matches iperf3's usage is refused with one line naming both."""
        for args, fragment in [
                (["-t", "10"], "-t is -tcp FLOWSPEC here (as in the reference NetPerfMeter); iperf3's -t SECONDS is "
                               "-runtime=SECONDS"),
                (["-J", "-tcp", "const0:const1400"], 'option "-J" needs a value, but the option "-tcp" follows (-J is '
                                                     "-tls-cert FILE here; iperf3's -J (JSON output) is --json"),
                (["-P", "2", "-tcp", "const0:const1400"], "iperf3's -P N (parallel flows) is -N N"),
                (["-i", "1", "-tcp", "const0:const1400"], "a buffer of 1 bytes is too small to be meant "
                                                          "(-i is -rcvbuf"),
                (["-o", "10", "-tcp", "const0:const1400"], "a buffer of 10 bytes is too small"),
                (["-b", "10M", "-tcp", "const0:const1400"], "iperf3's -b RATE is the frame rate of a FLOWSPEC here"),
                (["-c", "host"], "iperf3's -c HOST is HOST:PORT here"),
                (["-R", "-tcp", "const0:const1400"], "iperf3's -R (reverse) is the inbound half of a FLOWSPEC"),
                (["-u", "-tcp", "const0:const1400"], "-u is -udp FLOWSPEC here")]:
            with self.subTest(args=args):
                self.assertRejected(args, fragment)
        # What the reference means is still taken as it means it.
        self.assertEqual(run(f"127.0.0.1:{PORT}", "--validate", "-P", "node-b", "-i", "65536",
                             "-t", "const0:const1400").returncode, 0)

    def test_nonsense_is_refused_before_anything_connects(self):
        for args, fragment in [
                (["-runtime=1e10", "-tcp", "const0:const1400"], "from 0.001 to 4294967 (49.7 days"),
                (["-runtime=0.0001", "-tcp", "const0:const1400"], "from 0.001"),
                (["-tcp", "const10:const5G"], "a frame size is at most 4294967295 bytes"),
                (["-tcp", "const10:const100:const5"], "the inbound frame rate needs the inbound frame size"),
                (["-tcp", "const10:const0x10"], '"0x10" is not a number'),
                (["-tcp", "const10:const16.5"], "a frame size is a whole number of bytes"),
                (["-tcp", "const10:const100:onoff=5,3"], "on/off times must increase"),
                (["-udp", "const10:const100:unreliable=0.5"], "apply only to SCTP flows"),
                (["-udp", "const10:const100:nodelay=on"], "nodelay= applies to TCP, MPTCP and SCTP flows, not to UDP"),
                (["-sctp", "const10:const100:cc=bbr"], "SCTP's congestion control is sctpcc="),
                (["-tcp", "const10:const100:cmt=cmt"], "applies only to SCTP flows")]:
            with self.subTest(args=args):
                self.assertRejected(args, fragment)

    def test_cpus(self):
        """--cpus=LIST (as taskset -c): checked before anything connects; the process and all its
        threads then run on those CPUs, and --threads' default is one per CPU it may use."""
        for value, fragment in [("", "expected CPU numbers and ranges"), ("x", "expected CPU numbers"),
                                ("1,", "expected CPU numbers"), ("3-1", "the range 3-1 runs backwards"),
                                ("1024", "from 0 to 1023"),
                                ("1023", "--cpus=1023: Invalid argument (this host has CPUs 0 to")]:
            with self.subTest(value=value):
                self.assertRejected([f"--cpus={value}", "-tcp", "const10:const100"], fragment)
        last = os.cpu_count() - 1
        with Passive(PORT + 10, f"--cpus={last}") as passive:
            names = []
            for tid in os.listdir(f"/proc/{passive.proc.pid}/task"):
                with open(f"/proc/{passive.proc.pid}/task/{tid}/comm") as f:
                    names.append(f.read().strip())
                with open(f"/proc/{passive.proc.pid}/task/{tid}/status") as f:
                    allowed = [line.split()[1] for line in f if line.startswith("Cpus_allowed_list:")]
                self.assertEqual(allowed, [str(last)], f"thread {tid}")
            result = run(f"127.0.0.1:{PORT + 10}", "--cpus=0", "-runtime=0.5", "-tcp", "const10:const100")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("Running on CPUs 0 (--cpus)", result.stderr)
            self.assertIn(f"Running on CPUs {last} (--cpus)", passive.output())
        # --threads' default, one network thread per CPU it may use: none beside the main thread's
        # (npm-net1, npm-net2, ... are the others), not one per core of the host.
        self.assertEqual([n for n in names if n.startswith("npm-net")], [], names)

    def test_a_passive_refuses_what_only_an_active_takes(self):
        for option in ("-scalar=run.sca", "-vector=run.vec", "-config=run.config", "--max-download=10",
                       "-activenodename=a", "-passivenodename=b"):
            with self.subTest(option=option):
                result = run(str(PORT + 20), option)
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertIn(f'option "{option}" is an option of the active side (HOST:PORT)', result.stderr)

    def test_validate_checks_and_runs_nothing(self):
        ok = run(f"127.0.0.1:{PORT}", "--validate", "-runtime=5", "-tcp", "const10k:const1k",
                 "-sctp", "const1:const1M", "const5:const100")
        self.assertEqual((ok.returncode, ok.stdout), (0, f"valid: an active run of 3 flows to 127.0.0.1:{PORT}\n"),
                         ok.stderr)
        bad = run(f"127.0.0.1:{PORT}", "--validate", "-sctp", "const0:const1400:bufsplit=bothh")
        self.assertEqual(bad.returncode, 1)
        self.assertIn("expected none, sender, receiver or both", bad.stderr)
        self.assertEqual(run(str(PORT + 20), "--validate").stdout, f"valid: a passive on port {PORT + 20}\n")
        with self.assertRaises(socket.timeout, msg="--validate connected"):
            self.listener.accept()

    def test_the_bundled_congestion_controls_name_their_loader(self):
        available = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
        if "npm_no_such_cc" in available:
            self.skipTest("npm_no_such_cc exists")
        self.assertRejected(["-tcp", "const0:const1400:cc=npm_no_such_cc"], '"netperfmeter-cc-loader start"')


if __name__ == "__main__":
    from harness import main
    main()
