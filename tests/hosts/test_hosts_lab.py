"""netperfmeter-lab's hosts topology against container hosts (hostlab: Debian 12 with systemd,
each in a network namespace of its own), reached only with ssh, as remote machines are.

The hosts get the build's netperfmeter (Host.put into their file systems; their cached root has
the Debian packages of the libraries it links, and ethtool); the lab reaches them with an ssh
config file the test writes (the lab's key, its known_hosts), named by the study's
[hosts] ssh_config.

  StudyFile    (no root, no hosts) malformed [hosts] tables: one line naming file, line and key,
               exit 1, nothing written; a hosts study's --dry-run names its pairs
  Parsing      (no root, no hosts) what the pre-flight reads: netperfmeter --version, chronyc
               tracking and pmc's TIME_STATUS_NP, ip -o addr
  Preflight    two hosts on the lab's switch: every refusal before the first run, one line per
               problem, exit 1, no results directory: a host without ssh (port 1), without
               netperfmeter, with another version (a wrapper that prints 1.9.4), without the
               features the study needs (MPTCP switched off in its namespace, a congestion
               control nobody has), without a path's address, with a clock off by more than the
               bound (a chronyc script earlier in PATH prints the offset; the real clock is never
               touched) or none to tell it, and a passive whose control port its path cannot
               reach; netperfmeter-lab preflight: the same checks without a run (nothing written,
               nothing left on the hosts), ports of the study in use on the passive host, a path
               whose route leaves by another interface and paths without a route; the shipped
               example packaging/examples/hosts-study.toml (its addresses put in) through
               preflight and a quick run; then a study whose hosts pass runs over the switch (one run of 1 s, results,
               hosts.json, results.sqlite), with cross traffic from a third host, with a running
               passive unit and its key; SIGINT during a run stops the processes on the hosts;
               netperfmeter --start-at: actives on two hosts launched a second apart send START
               together (their passive, on a third host, sees them within a bound), and the
               lab uses it for the flows and the cross traffic of a run (the evidence records
               when the passives handled the STARTs)
  EndToEnd     (label long) two dual-homed hosts, each path through a bridge on a router
               namespace with tbf (20 and 10 Mbit/s towards the passive), a quick study of two
               runs: both sides' scalar files back, goodput below path 1's rate, each host's
               environment (kernel, sysctls, qdiscs before and after, offloads and driver of
               the path interfaces, CCs, versions) in hosts.json and results.sqlite, --resume
               keeps both runs; then --parallel=2 over two such pairs

usage: test_hosts_lab.py [unittest arguments]; NPM_LAB (the build's netperfmeter-lab) and
NETPERFMETER in the environment (CMakeLists.txt sets them). Skips (77) without root,
debootstrap or systemd-nspawn, except StudyFile.
"""

import bz2
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import hostlab  # noqa: E402

sys.path.insert(0, os.path.join(SOURCE, "src", "lab"))
from npmlab import hosts  # noqa: E402

BUILD = os.environ.get("NPM_BUILD_DIR", os.path.join(SOURCE, "build"))
LAB = os.environ.get("NPM_LAB", os.path.join(BUILD, "src", "lab", "netperfmeter-lab"))
NETPERFMETER = os.environ.get("NETPERFMETER", os.path.join(BUILD, "src", "app", "netperfmeter"))
PREFIX = "npmhlab"
# --start-at across hosts (test_start_at_two_actives_on_two_hosts): 0.73, 1.89 and 0.08 ms
# between the two STARTs at the passive in three runs of 2026-11-28, while builds ran beside
# them; the bound leaves a wide margin for a loaded machine.
START_SKEW_BOUND = 0.1


def lab(*args, timeout=600):
    return subprocess.run([LAB, *args], capture_output=True, text=True, errors="replace", timeout=timeout)


def study_text(active, passive, paths, flows=(("tcp", "const0:const1400:const0:const0"),), runtime=1, repetitions=1,
               hosts_extra="", metric="goodput(0) / 1e6", extra=""):
    """A study on hosts: [hosts] with the ssh config beside it, [[paths]] of (active, passive)
    addresses, flows, one metric."""
    text = (f'name = "onhosts"\ntopology = "hosts"\nruntime = {runtime}\nrepetitions = {repetitions}\n{extra}'
            f'[hosts]\nactive = "{active}"\npassive = "{passive}"\nssh_config = "ssh.conf"\n{hosts_extra}')
    for i, (a, p) in enumerate(paths):
        text += f'[[paths]]\nname = "wan{i + 1}"\nactive = "{a}"\npassive = "{p}"\n'
    for protocol, spec in flows:
        text += f'[[flows]]\nprotocol = "{protocol}"\nspec = "{spec}"\n'
    text += f'[[metrics]]\nname = "goodput"\nvalue = "{metric}"\nunit = "Mbit/s"\n'
    return text


class StudyFile(unittest.TestCase):
    """Malformed [hosts] tables and paths: the lab's one line, before any ssh."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="npmhosts-study-")
        with open(os.path.join(self.dir, "ssh.conf"), "w") as f:
            f.write("# nothing\n")
        self.good = study_text("root@192.0.2.10", "root@192.0.2.20:2222", [("10.1.1.1", "10.1.1.2")])

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def check(self, text, line, key, message):
        path = os.path.join(self.dir, "bad.toml")
        with open(path, "w") as f:
            f.write(text)
        out = os.path.join(self.dir, "out")
        r = lab("run", path, "-o", out, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(f"{path}:{line}: {key}: {message}" if line else f"{path}: {key}: {message}", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_destinations(self):
        self.check(self.good.replace('"root@192.0.2.20:2222"', '"-oProxyCommand=x"'), 7, "hosts.passive",
                   '"-oProxyCommand=x" is not an ssh destination')
        self.check(self.good.replace('"root@192.0.2.20:2222"', '"root@192.0.2.20:70000"'), 7, "hosts.passive",
                   '"root@192.0.2.20:70000": port 70000 is not 1 to 65535')
        self.check(self.good.replace('active = "root@192.0.2.10"\n', ''), 5, "hosts.active",
                   "is missing: the active host's ssh destination")
        self.check(self.good.replace('"root@192.0.2.20:2222"', '"root@192.0.2.10"'), 7, "hosts.passive",
                   "is the active host")

    def test_tables_and_keys(self):
        self.check(self.good.replace('ssh_config = "ssh.conf"', 'ssh_config = "ssh.conf"\nshaping = 1'), 9,
                   "hosts.shaping", "unknown key")
        self.check(self.good.replace('name = "wan1"', 'name = "wan1"\nrate = "10mbit"'), 11, "paths[1].rate",
                   "unknown key (known: active, name, passive)")
        self.check(self.good.replace('passive = "10.1.1.2"', 'passive = "10.1.1.300"'), 12, "paths[1].passive",
                   '"10.1.1.300" is not an IP address')
        self.check(self.good.replace('passive = "10.1.1.2"', 'passive = "2001:db8::2"'), 9, "paths[1]",
                   "10.1.1.1 and 2001:db8::2 are not of one IP version")
        self.check(self.good.replace('topology = "hosts"', 'topology = "disjoint"'), 5, "hosts",
                   "only the hosts topology has a [hosts] table")
        self.check(self.good.replace('[hosts]', '[sysctl]\n"net.ipv4.tcp_ecn" = 1\n[hosts]'), None,
                   "sysctl.net.ipv4.tcp_ecn", "the hosts topology changes nothing on the hosts")

    def test_optional_tables(self):
        self.check(self.good.replace('ssh_config = "ssh.conf"', 'ssh_config = "ssh.conf"\nmax_clock_offset_ms = 0'),
                   9, "hosts.max_clock_offset_ms", "must be a number of milliseconds above 0")
        self.check(self.good.replace('ssh_config = "ssh.conf"', 'ssh_config = "ssh.conf"\nshared_clock = "yes"'),
                   9, "hosts.shared_clock", "must be true or false")
        self.check(self.good.replace('ssh_config = "ssh.conf"',
                                     'ssh_config = "ssh.conf"\nservice = { control_port = 9001, key_file = "k" }'),
                   9, "hosts.service", "key_file must be an absolute path")
        pair = ('[[hosts.pairs]]\nactive = "root@192.0.2.30"\npassive = "root@192.0.2.40"\n'
                'paths = [{ active = "10.2.1.1", passive = "10.2.1.2" }, '
                '{ active = "10.2.2.1", passive = "10.2.2.2" }]\n')
        self.check(self.good.replace("[[paths]]", pair + "[[paths]]", 1), 12, "hosts.pairs[1].paths",
                   "must list the addresses of all 1 path(s)")
        shared = pair.replace("192.0.2.30", "192.0.2.10").replace(', { active = "10.2.2.1", passive = "10.2.2.2" }', "")
        self.check(self.good.replace("[[paths]]", shared + "[[paths]]", 1), 9, "hosts.pairs[1]",
                   "root@192.0.2.10 is in pair 1")
        cross = '[[hosts.cross_traffic]]\nhost = "root@192.0.2.50"\npath = 2\nflows = ["-tcp", "const0:const1400"]\n'
        self.check(self.good.replace("[[paths]]", cross + "[[paths]]", 1), 11, "hosts.cross_traffic[1].path",
                   "must be a path's number, 1 to 1")
        self.check(self.good.replace("[[paths]]", cross.replace("path = 2", "path = 1").replace('"-tcp", ', "")
                                     + "[[paths]]", 1), 12, "hosts.cross_traffic[1].flows",
                   "must be netperfmeter's flow arguments")

    def test_a_missing_ssh_config_is_a_problem_before_ssh(self):
        # Checked before the first ssh, not when the study is read: plot and db read a study's
        # copy in its results directory and reach no host.
        path = os.path.join(self.dir, "good.toml")
        with open(path, "w") as f:
            f.write(self.good.replace('ssh_config = "ssh.conf"', 'ssh_config = "nonesuch.conf"'))
        out = os.path.join(self.dir, "out")
        r = lab("run", path, "-o", out, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.strip().splitlines(), [
            f"netperfmeter-lab: hosts.ssh_config: {os.path.join(self.dir, 'nonesuch.conf')}: no such file",
            "netperfmeter-lab: 1 problem(s) with the hosts (above): nothing was run"])
        self.assertFalse(os.path.exists(out))

    def test_parallel_needs_pairs(self):
        path = os.path.join(self.dir, "good.toml")
        with open(path, "w") as f:
            f.write(self.good)
        r = lab("run", path, "--parallel=2", "-o", os.path.join(self.dir, "out"), timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.strip(), "netperfmeter-lab: --parallel=2: the study has 1 pair(s) of hosts "
                                           "([hosts] and [[hosts.pairs]])")

    def test_dry_run_names_the_pairs(self):
        path = os.path.join(self.dir, "good.toml")
        with open(path, "w") as f:
            f.write(self.good)
        r = lab("run", path, "--dry-run", timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("hosts: pair 1: active root@192.0.2.10, passive root@192.0.2.20:2222, 1 path(s)", r.stdout)


CHRONY = """Reference ID    : C0000201 (ntp.example)
Stratum         : 3
Ref time (UTC)  : Fri Nov 27 23:59:01 2026
System time     : %s of NTP time
Last offset     : -0.000004567 seconds
RMS offset      : 0.000023456 seconds
Frequency       : 12.345 ppm slow
Root delay      : 0.012345678 seconds
Root dispersion : 0.000987654 seconds
Update interval : 64.2 seconds
Leap status     : %s
"""
PMC = """sending: GET TIME_STATUS_NP
\t90e2ba.fffe.2a5d2c-0 seq 0 RESPONSE MANAGEMENT TIME_STATUS_NP
\t\tmaster_offset              %d
\t\tingress_time               1795000000000000000
\t\tgmPresent                  %s
\t\tgmIdentity                 90e2ba.fffe.2a5d2c
"""


class Parsing(unittest.TestCase):
    """What the pre-flight reads from the hosts: versions, clock status, addresses (no hosts)."""

    hosts = hosts

    def test_versions(self):
        compatible = self.hosts.compatible
        ours = "NetPerfMeter 2.1.0\nuserland SCTP: bundled usrsctp 0.9.5.0 (patches 1-6)\n"
        self.assertTrue(compatible(ours, "NetPerfMeter 2.1.7\nuserland SCTP: libusrsctp 0.9.5.0\n"))
        self.assertFalse(compatible(ours, "NetPerfMeter 2.0.10\n"))
        self.assertFalse(compatible(ours, "NetPerfMeter 1.9.4\n"))
        self.assertFalse(compatible(ours, "netperfmeter: unknown option --version\n"))
        self.assertFalse(compatible("unknown", "NetPerfMeter 2.1.0"))

    def test_chrony_and_ptp(self):
        offset = self.hosts.clock_offset
        self.assertEqual(offset("chronyc\n" + CHRONY % ("0.004500000 seconds slow", "Normal")),
                         (4.5, "chronyc tracking"))
        self.assertEqual(offset("chronyc\n" + CHRONY % ("0.000012000 seconds fast", "Normal"))[0], 0.012)
        self.assertEqual(offset("chronyc\n" + CHRONY % ("0.000000000 seconds fast", "Not synchronised")),
                         (None, "chronyc tracking: not synchronised"))
        self.assertEqual(offset("chronyc\n506 Cannot talk to daemon\n"),
                         (None, "chronyc tracking gave no offset (506 Cannot talk to daemon)"))
        self.assertEqual(offset("pmc\n" + PMC % (-1500, "true")), (0.0015, "pmc (PTP)"))
        self.assertEqual(offset("pmc\n" + PMC % (0, "false")), (None, "pmc: no PTP grandmaster present"))
        self.assertEqual(offset("none\n")[0], None)

    def test_addresses_and_sections(self):
        out = ("1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
               "2: eth0    inet 198.18.7.10/24 scope global eth0\\       valid_lft forever\n"
               "3: p1    inet 10.81.1.1/24 scope global p1\\       valid_lft forever\n"
               "3: p1    inet6 fe80::1/64 scope link \\       valid_lft forever\n")
        self.assertEqual(self.hosts.addresses(out), {"127.0.0.1": "lo", "198.18.7.10": "eth0", "10.81.1.1": "p1",
                                                     "fe80::1": "p1"})
        self.assertEqual(self.hosts.sections("=== a ===\none\n=== b c ===\ntwo\nthree\n"),
                         {"a": "one", "b c": "two\nthree"})


# ---- container hosts ---------------------------------------------------------------------------

def unavailable():
    """Why the container hosts cannot run here (None if they can)."""
    why = hostlab.missing(systemd=True)
    if why is None and not os.access(NETPERFMETER, os.X_OK):
        why = f"no netperfmeter at {NETPERFMETER}"
    return why


def start_lab(names):
    """A lab with the named hosts, the build's netperfmeter on each; the ssh config of the lab's
    key in the lab's directory."""
    lab_ = hostlab.Lab(PREFIX, extra_packages=hostlab.library_packages(NETPERFMETER) + ["ethtool"])
    hosts = [lab_.add_host(n) for n in names]
    lab_.start()
    try:
        for h in hosts:
            h.put("/usr/bin/netperfmeter", NETPERFMETER)
        config = os.path.join(lab_.dir, "ssh.conf")
        with open(config, "w") as f:
            f.write(f"Host *\n  User root\n  IdentityFile {lab_.client_key}\n  IdentitiesOnly yes\n"
                    f"  UserKnownHostsFile {lab_.known_hosts}\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n")
    except BaseException:
        lab_.close()
        raise
    return lab_, hosts


def in_namespace(host, *cmd):
    hostlab.run(["ip", "netns", "exec", host.netns, *cmd])


class HostsCase(unittest.TestCase):
    names = ("a", "b")

    @classmethod
    def setUpClass(cls):
        cls.lab, hosts = start_lab(cls.names)
        cls.addClassCleanup(cls.lab.close)
        for name, host in zip(cls.names, hosts):
            setattr(cls, name, host)

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="study-", dir=self.lab.dir)
        shutil.copy(os.path.join(self.lab.dir, "ssh.conf"), self.dir)
        self.out = os.path.join(self.dir, "out")

    def write(self, text):
        path = os.path.join(self.dir, "study.toml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def refused(self, text, expected, count=None, *args):
        """Runs a study that the pre-flight must refuse: exit 1, each expected line among the
        problems (count of them if given), the closing line, no results directory."""
        r = lab("run", self.write(text), "-o", self.out, *args, timeout=300)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        problems = lines[:-1]
        self.assertRegex(lines[-1], r"^netperfmeter-lab: \d+ problem\(s\) with the hosts \(above\): nothing was run$")
        for line in expected:
            self.assertIn("netperfmeter-lab: " + line, problems, r.stderr)
        if count is not None:
            self.assertEqual(len(problems), count, r.stderr)
        self.assertFalse(os.path.exists(self.out))
        return problems


class Preflight(HostsCase):
    names = ("a", "b", "c")  # c: cross traffic

    def default(self, **kw):
        kw.setdefault("paths", [(self.a.address, self.b.address)])
        return study_text(f"root@{self.a.address}", f"root@{self.b.address}", **kw)

    def test_no_ssh(self):
        text = study_text(f"root@{self.a.address}", f"root@{self.b.address}:1", [(self.a.address, self.b.address)])
        self.refused(text, [f"root@{self.b.address}:1: not reachable: ssh: connect to host {self.b.address} port 1: "
                            "Connection refused"], 1)

    def test_no_netperfmeter(self):
        self.b.ssh("mv /usr/bin/netperfmeter /usr/bin/netperfmeter.away")
        try:
            self.refused(self.default(), [f"root@{self.b.address}: netperfmeter is not installed (netperfmeter is "
                                          "not in the PATH of a command over ssh)"], 1)
        finally:
            self.b.ssh("mv /usr/bin/netperfmeter.away /usr/bin/netperfmeter")

    def test_another_version(self):
        # A wrapper earlier in PATH that says it is the packaged Debian 12 version.
        self.b.write("/usr/local/bin/netperfmeter", "#!/bin/sh\nif [ \"$1\" = --version ]; then "
                     "echo 'NetPerfMeter 1.9.4'; exit 0; fi\nexec /usr/bin/netperfmeter \"$@\"\n")
        try:
            local = subprocess.run([NETPERFMETER, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
            self.refused(self.default(), [f"root@{self.b.address}: its netperfmeter --version says \"NetPerfMeter "
                                          f"1.9.4\", the lab's \"{local}\": the major and minor versions "
                                          "must match"], 1)
        finally:
            self.b.remove("/usr/local/bin/netperfmeter")

    def test_missing_features(self):
        # MPTCP switched off in b's namespace (a per-namespace sysctl: the machine's is untouched)
        # and a congestion control no kernel has.
        in_namespace(self.b, "sysctl", "-q", "-w", "net.mptcp.enabled=0")
        try:
            text = self.default(flows=[("mptcp", "const0:const1400:const0:const0"),
                                       ("tcp", "const0:const1400:const0:const0:cc=npm_nonesuch")])
            problems = self.refused(text, [
                f"root@{self.b.address}: the study needs MPTCP, and net.mptcp.enabled = 0 "
                "(sysctl -w net.mptcp.enabled=1)"], 3)
            for host in (self.a, self.b):
                self.assertTrue(any(p.startswith(f"netperfmeter-lab: root@{host.address}: congestion control "
                                                 "npm_nonesuch not available (its kernel has: ") and
                                    p.endswith("(load the bundled BPF ones: netperfmeter-cc-loader start)")
                                    for p in problems), problems)
        finally:
            in_namespace(self.b, "sysctl", "-q", "-w", "net.mptcp.enabled=1")

    def test_missing_address(self):
        text = self.default(paths=[(self.a.address, self.b.address), (self.a.address, "192.0.2.77")])
        problems = self.refused(text, [], 1)
        self.assertTrue(problems[0].startswith(f"netperfmeter-lab: root@{self.b.address}: path 2 (wan2): 192.0.2.77 is "
                                               f"not an address of this host (ip -o addr has "), problems)
        self.assertIn(self.b.address, problems[0].split("ip -o addr has ")[1])

    def test_clock_offset(self):
        tracking = ("#!/bin/sh\n[ \"$1\" = tracking ] || exit 1\ncat <<EOF\nReference ID    : C0000201 (ntp.example)\n"
                    "Stratum         : 3\nSystem time     : %s of NTP time\nLast offset     : +0.000001000 seconds\n"
                    "Leap status     : Normal\nEOF\n")
        self.a.write("/usr/local/bin/chronyc", tracking % "0.004500000 seconds slow")
        self.b.write("/usr/local/bin/chronyc", tracking % "0.000200000 seconds fast")
        try:
            # Only metrics with one-way delays need the bound; this one has one.
            text = self.default(hosts_extra="max_clock_offset_ms = 1\n",
                                metric="scalar(\\\"passive\\\", 0, \\\"Mean Delay\\\")")
            self.refused(text, [f"pair 1: the clocks of root@{self.a.address} (4.500 ms off, chronyc tracking) and "
                                f"root@{self.b.address} (0.200 ms off, chronyc tracking) may differ by 4.700 ms, above "
                                "max_clock_offset_ms = 1: one-way delays between them would be wrong"], 1)
            self.b.remove("/usr/local/bin/chronyc")
            self.refused(text, [f"root@{self.b.address}: cannot tell its clock offset (neither chronyc (chrony) nor "
                                "pmc (linuxptp) is installed), which max_clock_offset_ms needs"], 1)
            # Within the bound: no clock problem (the study is refused for its missing address only).
            self.a.write("/usr/local/bin/chronyc", tracking % "0.000300000 seconds slow")
            self.b.write("/usr/local/bin/chronyc", tracking % "0.000400000 seconds fast")
            self.refused(text.replace(f'passive = "{self.b.address}"\n[[flows]]', 'passive = "192.0.2.77"\n[[flows]]'),
                         [], 1)
        finally:
            self.a.remove("/usr/local/bin/chronyc")
            self.b.remove("/usr/local/bin/chronyc")

    def test_unreachable_control_port(self):
        # Path 2's addresses exist on both hosts, each on a veth whose peer is in the same
        # namespace, so that it connects nothing: the active cannot reach the passive's control
        # port over it.
        for host, address in ((self.a, "10.78.1.1/24"), (self.b, "10.78.1.2/24")):
            in_namespace(host, "ip", "link", "add", "blackhole0", "type", "veth", "peer", "name", "blackhole1")
            in_namespace(host, "ip", "addr", "add", address, "dev", "blackhole0")
            in_namespace(host, "ip", "link", "set", "blackhole0", "up")
            in_namespace(host, "ip", "link", "set", "blackhole1", "up")
        try:
            text = self.default(paths=[(self.a.address, self.b.address), ("10.78.1.1", "10.78.1.2")])
            problems = self.refused(text, [], 1)
            self.assertTrue(problems[0].startswith(
                f"netperfmeter-lab: root@{self.a.address}: cannot reach the passive's control port 10.78.1.2:9001 "
                "over path 2 (wan2): "), problems)
        finally:
            for host in (self.a, self.b):
                in_namespace(host, "ip", "link", "del", "blackhole0")

    def test_a_study_whose_hosts_pass_runs(self):
        r = lab("run", self.write(self.default()), "-o", self.out, "--no-plot", timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        runs = [e for e in os.listdir(os.path.join(self.out, "runs")) if not e.startswith(".")]
        self.assertEqual(runs, ["run-r1"])
        run = os.path.join(self.out, "runs", "run-r1")
        for name in ("run-active.sca.bz2", "run-passive.sca.bz2", "run.config", "active.log", "passive.log"):
            self.assertTrue(os.path.isfile(os.path.join(run, "f0", name)), name)
        self.assertFalse(os.path.exists(os.path.join(run, "f0", ".pid")))
        with open(os.path.join(run, "hosts.json")) as f:
            hosts = json.load(f)
        self.assertEqual(hosts["active"]["destination"], f"root@{self.a.address}")
        self.assertEqual(hosts["passive"]["kernel"], os.uname().release)
        db = sqlite3.connect(os.path.join(self.out, "results.sqlite"))
        (validity, kept), = db.execute("SELECT validity, json_extract(hosts, '$.passive.destination') FROM runs")
        self.assertEqual((validity, kept), ("valid", f"root@{self.b.address}"))
        # Nothing of the lab is left on the hosts.
        for host in (self.a, self.b, self.c):
            left = host.ssh("ls -d /tmp/npmlab.* 2>/dev/null; cat /proc/[0-9]*/comm 2>/dev/null | grep -x netperfmeter",
                            check=False).stdout
            self.assertEqual(left, "", f"left on {host.name}")

    def preflight(self, text):
        """netperfmeter-lab preflight in the study's directory: what it printed; nothing written
        there, nothing left on the hosts."""
        r = subprocess.run([LAB, "preflight", self.write(text)], capture_output=True, text=True, errors="replace",
                           timeout=300, cwd=self.dir)
        self.assertEqual(sorted(os.listdir(self.dir)), ["ssh.conf", "study.toml"])
        for host in (self.a, self.b):
            left = host.ssh("ls -d /tmp/npmlab.* 2>/dev/null; cat /proc/[0-9]*/comm 2>/dev/null | grep -x netperfmeter",
                            check=False).stdout
            self.assertEqual(left, "", f"left on {host.name}")
        return r

    def preflight_refuses(self, text, expected, count):
        r = self.preflight(text)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(lines[-1], f"netperfmeter-lab: onhosts: {count} problem(s) (above): run would not start")
        for line in expected:
            self.assertIn("netperfmeter-lab: " + line, lines[:-1], r.stderr)
        self.assertEqual(len(lines) - 1, count, r.stderr)
        return lines[:-1]

    def test_preflight_checks_without_running(self):
        r = self.preflight(self.default())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, rf"^onhosts: preflight passed: 2 host\(s\) reachable, their netperfmeters "
                                   rf"compatible with NetPerfMeter [0-9.]+, the study's stacks there; "
                                   rf"pair 1: root@{self.a.address} -> root@{self.b.address}, 1 path\(s\) on eth0 -> "
                                   r"eth0; routes by the paths' interfaces; 5 ports free on the passive host\(s\); "
                                   r"control ports reachable over every path\n$")
        # The same refusals as run's, with preflight's closing line (b lacks the path's address:
        # a's route to it is not asked).
        problems = self.preflight_refuses(self.default(paths=[(self.a.address, "192.0.2.77")]), [], 1)
        self.assertTrue(problems[0].startswith(f"netperfmeter-lab: root@{self.b.address}: path 1 (wan1): 192.0.2.77 is "
                                               "not an address of this host"), problems)

    def test_ports_in_use(self):
        # A listener in b's namespace on flow pair 2's TCP port and on flow pair 1's userland SCTP
        # port: preflight and run name both; nothing is started.
        code = ("import socket, sys, time\nt = socket.socket(); t.bind(('0.0.0.0', 9010)); t.listen()\n"
                "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('0.0.0.0', 9899))\n"
                "print('ready', flush=True); time.sleep(300)\n")
        holder = subprocess.Popen(["ip", "netns", "exec", self.b.netns, "python3", "-c", code], stdout=subprocess.PIPE,
                                  text=True)
        try:
            self.assertEqual(holder.stdout.readline().strip(), "ready")
            text = self.default(flows=[("sctp", "const0:const1400:const0:const0"),
                                       ("tcp", "const0:const1400:const0:const0")])
            expected = [f"root@{self.b.address}: UDP port 9899 is in use, and the study's passive needs it for flow "
                        "pair 1 (userland SCTP) (base_port = 9000: passives on base_port + 10 i, userland SCTP on UDP "
                        "9899 + i)",
                        f"root@{self.b.address}: TCP port 9010 is in use, and the study's passive needs it for flow "
                        "pair 2 (base_port = 9000: passives on base_port + 10 i, userland SCTP on UDP 9899 + i)"]
            self.preflight_refuses(text, expected, 2)
            self.refused(text, expected, 2)
        finally:
            holder.kill()
            holder.wait()

    def test_routes(self):
        # Path 2: a's address on an interface of its own (a veth whose peer stays in a), while its
        # route to b's address leaves by eth0: the path would share path 1's interface. Path 3:
        # addresses without any route between them (the hosts have no default route).
        in_namespace(self.a, "ip", "link", "add", "side0", "type", "veth", "peer", "name", "side1")
        try:
            in_namespace(self.a, "ip", "link", "set", "side0", "up")
            for host, own, peer in ((self.a, "10.79.1.1", "10.79.1.2"), (self.b, "10.79.1.2", "10.79.1.1")):
                in_namespace(host, "ip", "addr", "add", own + "/32", "dev", "side0" if host is self.a else "eth0")
                in_namespace(host, "ip", "route", "add", peer + "/32", "dev", "eth0")
            in_namespace(self.a, "ip", "addr", "add", "10.79.2.1/32", "dev", "side0")
            in_namespace(self.b, "ip", "addr", "add", "10.79.2.2/32", "dev", "eth0")
            text = self.default(paths=[(self.a.address, self.b.address), ("10.79.1.1", "10.79.1.2"),
                                       ("10.79.2.1", "10.79.2.2")])
            problems = self.preflight_refuses(text, [
                f"root@{self.a.address}: path 2 (wan2): the route to 10.79.1.2 from 10.79.1.1 leaves by eth0, not by "
                "side0, which holds 10.79.1.1 (the path would share another interface; source routing: ip rule add "
                "from ADDRESS table N)"], 3)
            for host, own, peer in ((self.a, "10.79.2.1", "10.79.2.2"), (self.b, "10.79.2.2", "10.79.2.1")):
                self.assertTrue(any(p.startswith(f"netperfmeter-lab: root@{host.address}: path 3 (wan3): no route to "
                                                 f"{peer} from {own} (ip route get: ") for p in problems), problems)
        finally:
            in_namespace(self.a, "ip", "link", "del", "side0")
            for host in (self.a, self.b):
                for address in ("10.79.1.1/32", "10.79.1.2/32", "10.79.2.1/32", "10.79.2.2/32"):
                    hostlab.run(["ip", "netns", "exec", host.netns, "ip", "addr", "del", address, "dev", "eth0"],
                                check=False)
                for peer in ("10.79.1.1/32", "10.79.1.2/32"):
                    hostlab.run(["ip", "netns", "exec", host.netns, "ip", "route", "del", peer], check=False)

    def test_the_shipped_hosts_example(self):
        # packaging/examples/hosts-study.toml (netperfmeter-examples) with the hosts' addresses
        # put in, and the test's ssh configuration (the lab's key and known hosts: the machine's
        # ~/.ssh is never touched): its two paths are a second address on each host's eth0.
        with open(os.path.join(SOURCE, "packaging", "examples", "hosts-study.toml")) as f:
            text = f.read()
        for old, new in (("192.0.2.10", self.a.address), ("192.0.2.20", self.b.address),
                         ("198.51.100.10", "10.80.1.1"), ("198.51.100.20", "10.80.1.2")):
            self.assertIn(old, text)
            text = text.replace(old, new)
        text = text.replace(f'passive = "root@{self.b.address}"',
                            f'passive = "root@{self.b.address}"\nssh_config = "ssh.conf"', 1)
        for host, address in ((self.a, "10.80.1.1/24"), (self.b, "10.80.1.2/24")):
            in_namespace(host, "ip", "addr", "add", address, "dev", "eth0")
        try:
            r = self.preflight(text)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("hosts-example: preflight passed: 2 host(s) reachable", r.stdout)
            self.assertIn("2 path(s) on eth0/eth0 -> eth0/eth0", r.stdout)
            r = lab("run", os.path.join(self.dir, "study.toml"), "--quick", "--no-plot", "-o", self.out, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            runs = [e for e in os.listdir(os.path.join(self.out, "runs")) if not e.startswith(".")]
            self.assertEqual(runs, ["cmt=cmtrpv2-r1"])
            db = sqlite3.connect(os.path.join(self.out, "results.sqlite"))
            (n,), = db.execute("SELECT COUNT(*) FROM metrics WHERE metric = 'cmt_goodput' AND value > 0")
            self.assertEqual(n, 1)
        finally:
            for host, address in ((self.a, "10.80.1.1/24"), (self.b, "10.80.1.2/24")):
                in_namespace(host, "ip", "addr", "del", address, "dev", "eth0")

    def test_sigint_stops_the_processes_on_the_hosts(self):
        # Ctrl-C during a run: exit 130, the run discarded, its passive and active on the hosts
        # stopped and the lab's directories there removed.
        proc = subprocess.Popen([LAB, "run", self.write(self.default(runtime=60)), "-o", self.out, "--no-plot"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
        partial = os.path.join(self.out, "runs", ".partial-run-r1")
        log = os.path.join(partial, "f0", "active.log")
        deadline = time.monotonic() + 120
        while True:
            self.assertIsNone(proc.poll(), "the lab ended before its run started")
            self.assertLess(time.monotonic(), deadline, "the run did not start")
            if os.path.exists(log):
                with open(log, errors="replace") as f:
                    if "Starting measurement" in f.read():
                        break
            time.sleep(0.1)
        self.assertIn("netperfmeter", self.a.ssh("cat /proc/[0-9]*/comm", check=False).stdout.split())
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 130, err)
        self.assertIn("interrupted (SIGINT): 0 complete run(s) kept", err)
        self.assertFalse(os.path.exists(partial))
        for host in (self.a, self.b):
            left = host.ssh("ls -d /tmp/npmlab.* 2>/dev/null; cat /proc/[0-9]*/comm 2>/dev/null | grep -x netperfmeter",
                            check=False).stdout
            self.assertEqual(left, "", f"left on {host.name}")

    def test_start_at_two_actives_on_two_hosts(self):
        # netperfmeter --start-at: actives on a and b, launched over ssh a second apart with one
        # start time, against a passive on c; c handled their STARTs (the "First Statistics
        # Event" of its two sessions, in each active's JSON document) within START_SKEW_BOUND.
        # The containers share this machine's kernel clock, which its kernel calls
        # unsynchronised (no NTP daemon here): hence --start-at-unsynchronised.
        port = 9100
        self.c.ssh(f"systemd-run --unit=npm-start-at netperfmeter {port} -nodisplay")
        try:
            deadline = time.monotonic() + 30
            while not self.c.ssh(f"ss -Hltn 'sport = :{port + 1}'", check=False).stdout.strip():
                self.assertLess(time.monotonic(), deadline, "the passive on c did not listen")
                time.sleep(0.1)
            start_us = time.time_ns() // 1000 + 4000000
            when = f"{start_us // 1000000}.{start_us % 1000000:06d}"
            command = (f"netperfmeter {self.c.address}:{port} -control-over-tcp -nodisplay -runtime=1 "
                       f"--start-at={when} --start-at-unsynchronised --json=/tmp/start-at.json "
                       "-tcp const20:const500:const20:const500")
            actives = [subprocess.Popen(self.a.ssh_command(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)]
            time.sleep(1.0)  # the stimulus the start time must hide, not a synchronisation
            actives.append(subprocess.Popen(self.b.ssh_command(command), stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True))
            for p in actives:
                output = p.communicate(timeout=60)[0]
                self.assertEqual(p.returncode, 0, output)
            docs = [json.loads(h.ssh("cat /tmp/start-at.json; rm -f /tmp/start-at.json").stdout)
                    for h in (self.a, self.b)]
        finally:
            self.c.ssh("systemctl stop npm-start-at", check=False)
        for doc in docs:
            self.assertEqual(doc["start_at_us"], start_us)
            late = (doc["totals"]["active"]["first_us"] - start_us) / 1e6
            self.assertTrue(0 <= late < START_SKEW_BOUND, f"START acknowledged {late:.4f} s after the time")
        skew = abs(docs[0]["totals"]["passive"]["first_us"] - docs[1]["totals"]["passive"]["first_us"]) / 1e6
        print(f"--start-at: the passive on c handled the STARTs from a and b {skew * 1e3:.3f} ms apart "
              f"(launched 1 s apart)", flush=True)
        self.assertLess(skew, START_SKEW_BOUND)

    def test_cross_traffic(self):
        # c sends a UDP flow to b's address of path 1 during the run, towards a passive of its own;
        # a's and c's actives send START at one time (--start-at; the containers share this
        # machine's clock, which no daemon reports synchronised: shared_clock).
        cross = (f'shared_clock = true\n[[hosts.cross_traffic]]\nhost = "root@{self.c.address}"\npath = 1\n'
                 'flows = ["-udp", "const100:const500"]\n')
        r = lab("run", self.write(self.default(hosts_extra=cross)), "-o", self.out, "--no-plot", timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        x = os.path.join(self.out, "runs", "run-r1", "x1")
        for name in ("cross-active.sca.bz2", "cross-passive.sca.bz2", "active.log", "passive.log"):
            self.assertTrue(os.path.isfile(os.path.join(x, name)), name)
        with bz2.open(os.path.join(x, "cross-passive.sca.bz2"), "rt") as f:
            received = re.search(r'"netPerfMeter\.passive\.flow\[0\]" "Received Bytes"\s+(\d+)', f.read())
        self.assertGreater(int(received.group(1)), 0)
        with open(os.path.join(self.out, "runs", "run-r1", "environment.txt")) as f:
            env = f.read()
        self.assertIn(f"cross traffic 1: root@{self.c.address}: netperfmeter {self.b.address}:9010 ", env)
        self.assertIn("cross traffic exit status: 0", env)
        self.assertRegex(env, r"synchronised start: every active with --start-at=\d+\.\d{6} "
                              r"--start-at-unsynchronised\n")
        with open(os.path.join(self.out, "runs", "run-r1", "evidence.json")) as f:
            judged = json.load(f)
        start = judged["synchronised_start"]
        self.assertEqual(len(start["handled_us"]), 2, start)
        self.assertTrue(all(h is not None and h >= start["start_at_us"] for h in start["handled_us"]), start)
        print(f"synchronised start: b handled the STARTs of a and c {start['skew_s'] * 1e3:.3f} ms apart", flush=True)
        self.assertLess(start["skew_s"], hosts.START_SKEW_LIMIT_S)
        self.assertTrue(judged["valid"], judged["problems"])

    def test_a_running_service_is_used(self):
        # A passive that runs as a unit on b with a key (as netperfmeter.service does): no passive
        # is started, every active authenticates with the key file on a.
        key = "3f9a1c0e5d7b2468ace13579bdf02468\n"
        for host in (self.a, self.b):
            host.ssh("umask 077 && cat > /root/netperfmeter.key", input=key)
        self.b.ssh("systemd-run --unit=npmlab-service --quiet /usr/bin/netperfmeter 9100 -nodisplay "
                   "--auth-key-file=/root/netperfmeter.key")
        try:
            deadline = time.monotonic() + 30
            while not self.b.ssh("ss -Htln 'sport = :9101'").stdout.strip():
                self.assertLess(time.monotonic(), deadline, "the service on b did not start listening")
                time.sleep(0.2)
            service = 'service = { control_port = 9101, key_file = "/root/netperfmeter.key" }\n'
            r = lab("run", self.write(self.default(hosts_extra=service)), "-o", self.out, "--no-plot", timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            run = os.path.join(self.out, "runs", "run-r1")
            with open(os.path.join(run, "environment.txt")) as f:
                env = f.read()
            self.assertIn(f"flow 0 passive: root@{self.b.address}: the running netperfmeter.service", env)
            self.assertIn("--auth-key-file=/root/netperfmeter.key", env)
            self.assertFalse(os.path.exists(os.path.join(run, "f0", "passive.log")))
            self.assertTrue(os.path.isfile(os.path.join(run, "f0", "run-passive.sca.bz2")))
            # The service is still there, and the lab started no other passive.
            self.assertEqual(self.b.ssh("systemctl is-active npmlab-service").stdout.strip(), "active")
            self.assertEqual(self.b.ssh("cat /proc/[0-9]*/comm | grep -cx netperfmeter", check=False).stdout.strip(),
                             "1")
        finally:
            self.b.ssh("systemctl stop npmlab-service", check=False)


# ---- end to end over shaped paths ----------------------------------------------------------------

RATES = ("20mbit", "10mbit")


def dual_home(lab_, active, passive, router, subnet):
    """Two paths between two hosts, each a bridge in the namespace `router` with tbf towards the
    passive (RATES): active 10.SUBNET.i.1/24, passive 10.SUBNET.i.2/24 on interfaces p1, p2."""
    hostlab.run(["ip", "netns", "add", router])
    for i, rate in enumerate(RATES, 1):
        hostlab.run(["ip", "-n", router, "link", "add", f"br{i}", "type", "bridge"])
        for host, end, side in ((active, f"ra{i}", 1), (passive, f"rp{i}", 2)):
            hostlab.run(["ip", "link", "add", f"p{i}", "netns", host.netns, "type", "veth", "peer", "name", end,
                         "netns", router])
            hostlab.run(["ip", "-n", router, "link", "set", end, "master", f"br{i}", "up"])
            hostlab.run(["ip", "-n", host.netns, "addr", "add", f"10.{subnet}.{i}.{side}/24", "dev", f"p{i}"])
            hostlab.run(["ip", "-n", host.netns, "link", "set", f"p{i}", "up"])
        hostlab.run(["ip", "-n", router, "link", "set", f"br{i}", "up"])
        # the forward direction's bottleneck: 2 full frames of bucket, 30 kB of queue
        hostlab.run(["tc", "-n", router, "qdisc", "add", "dev", f"rp{i}", "root", "tbf", "rate", rate, "burst", "3028",
                     "limit", "30000"])
    return [(f"10.{subnet}.{i}.1", f"10.{subnet}.{i}.2") for i in (1, 2)]


class EndToEnd(HostsCase):
    names = ("a", "b", "c", "d")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.routers = [f"{PREFIX}-{os.getpid()}-r1", f"{PREFIX}-{os.getpid()}-r2"]
        for router in cls.routers:
            cls.addClassCleanup(hostlab.run, ["ip", "netns", "del", router], check=False)
        cls.paths = [dual_home(cls.lab, cls.a, cls.b, cls.routers[0], 81),
                     dual_home(cls.lab, cls.c, cls.d, cls.routers[1], 82)]

    def study(self, pairs=1):
        extra = ""
        if pairs > 1:
            extra = (f'[[hosts.pairs]]\nactive = "root@{self.c.address}"\npassive = "root@{self.d.address}"\n'
                     "paths = ["
                     + ", ".join(f'{{ active = "{a}", passive = "{p}" }}' for a, p in self.paths[1]) + "]\n")
        # one combination (a variable, for the plot's axis) x 2 repetitions
        return study_text(f"root@{self.a.address}", f"root@{self.b.address}", self.paths[0], runtime=3,
                          repetitions=2, hosts_extra=extra, extra="[sweep]\nsize = [1400]\n",
                          flows=[("tcp", "const0:const{size}:const0:const0")])

    def test_1_a_quick_study_over_two_shaped_paths(self):
        # with the plot where R is installed: nothing of it differs from the namespace test beds
        plot = [] if shutil.which("Rscript") else ["--no-plot"]
        began = time.monotonic()
        r = lab("run", self.write(self.study()), "-o", self.out, *plot, timeout=600)
        took = time.monotonic() - began
        print(f"study of 2 runs on hosts: {took:.1f} s", flush=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        if not plot:
            self.assertTrue(os.path.getsize(os.path.join(self.out, "goodput.pdf")) > 0)
        db = sqlite3.connect(os.path.join(self.out, "results.sqlite"))
        rows = db.execute("SELECT run, validity, hosts FROM runs ORDER BY run").fetchall()
        self.assertEqual([(run, validity) for run, validity, _ in rows],
                         [("size=1400-r1", "valid"), ("size=1400-r2", "valid")])
        goodputs = [v for v, in db.execute("SELECT value FROM metrics WHERE metric = 'goodput'")]
        print(f"goodput over path 1 (tbf 20 Mbit/s): {', '.join(f'{g:.2f}' for g in goodputs)} Mbit/s", flush=True)
        self.assertEqual(len(goodputs), 2)
        for goodput in goodputs:  # path 1's tbf at 20 Mbit/s, not the veth's Gbit/s
            self.assertTrue(12 < goodput < 20.5, goodputs)
        (sides,), = db.execute("SELECT count(DISTINCT side) FROM scalars WHERE name = 'Received Bytes'").fetchall()
        self.assertEqual(sides, 2)
        (n, mean), = db.execute("SELECT n, mean FROM summary WHERE metric = 'goodput'").fetchall()
        self.assertEqual(n, 2)
        for run, _, text in rows:
            hosts = json.loads(text)
            with open(os.path.join(self.out, "runs", run, "hosts.json")) as f:
                self.assertEqual(json.load(f), hosts)
            for side, host, devices in (("active", self.a, ("p1", "p2")), ("passive", self.b, ("p1", "p2"))):
                env = hosts[side]
                self.assertEqual(env["destination"], f"root@{host.address}")
                self.assertEqual(env["kernel"], os.uname().release)
                self.assertIn("net.ipv4.tcp_congestion_control", env["sysctl"])
                self.assertIn("net.mptcp.enabled", env["sysctl"])
                self.assertIn("cubic", env["congestion_controls"])
                self.assertIn("qdisc", env["qdisc_before"])
                self.assertIn("qdisc", env["qdisc_after"])
                self.assertTrue(env["versions"]["netperfmeter"].startswith("NetPerfMeter "))
                self.assertTrue(env["versions"]["ethtool"].startswith("ethtool version"))
                self.assertEqual(sorted(env["interfaces"]), list(devices))
                for dev in devices:
                    self.assertIn("driver: veth", env["interfaces"][dev]["driver"])
                    self.assertIn("tcp-segmentation-offload:", env["interfaces"][dev]["offloads"])
        # --resume keeps both runs.
        r = lab("run", self.write(self.study()), "-o", self.out, "--no-plot", "--resume", timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stderr.count("complete, kept"), 2, r.stderr)
        # db reads the study's copy in the results directory (its ssh_config is not there) and
        # reaches no host.
        os.unlink(os.path.join(self.out, "results.sqlite"))
        r = lab("db", self.out, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(sqlite3.connect(os.path.join(self.out, "results.sqlite")).execute(
            "SELECT count(*) FROM runs WHERE hosts IS NOT NULL").fetchone(), (2,))

    def test_2_parallel_pairs(self):
        began = time.monotonic()
        r = lab("run", self.write(self.study(pairs=2)), "-o", self.out, "--no-plot", "--parallel=2", timeout=600)
        took = time.monotonic() - began
        print(f"study of 2 runs on 2 pairs at once: {took:.1f} s", flush=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("netperfmeter-lab: warning: --parallel=2: 2 pairs of hosts measure at the same time", r.stderr)
        db = sqlite3.connect(os.path.join(self.out, "results.sqlite"))
        used = sorted(a for a, in db.execute("SELECT json_extract(hosts, '$.active.destination') FROM runs"))
        self.assertEqual(used, sorted([f"root@{self.a.address}", f"root@{self.c.address}"]))
        starts = [s for s, in db.execute("SELECT started FROM runs")]
        self.assertLess(abs(starts[0] - starts[1]), 3.0, "the two pairs did not measure at the same time")


def main():
    if len(sys.argv) > 1 and all(a.startswith(("StudyFile", "Parsing")) for a in sys.argv[1:]):
        sys.exit(0 if unittest.main(module="__main__", exit=False, verbosity=2).result.wasSuccessful() else 1)
    why = unavailable()
    if why:
        print("SKIP: " + why, flush=True)
        sys.exit(hostlab.SKIP)
    hostlab.run_in_private_mount_namespace()
    result = unittest.main(module="__main__", exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
