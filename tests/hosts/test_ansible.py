"""The Ansible role packaging/ansible/roles/netperfmeter_passive for real, on two container hosts
(hostlab: Debian 12 with systemd, each in a network namespace of its own, reached over ssh).

ansible-playbook applies packaging/ansible/site.yml to both hosts, installing the project's
.deb files (BUILD_DIR/packages, built with packaging/setup.sh packages if there are none), with
a shared key made on the controller, --allow for the lab's network and the nftables input
policy drop on a (b keeps the default, accept). Host b pretends to be about to boot Linux 6.1
(netperfmeter_kernel_release), so the role must skip the BPF congestion controls there and say
why; on host a (this machine's kernel, 6.2 or later) it must enable and start their loader.
Then:

* a second run of the playbook changes nothing (changed=0 on both hosts);
* on a: netperfmeter.service and netperfmeter-cc-loader.service are enabled and active, the
  loader reports all four congestion controls registered, the key file is root's with mode 600,
  /etc/netperfmeter.conf has the --allow and --auth-key-file options;
* a's running ruleset is the table inet netperfmeter alone, its input chain has policy drop and
  accepts exactly TCP 8999, 9000, 9001 and 22 (ssh), UDP 9000 and 9899, SCTP 9000 and 9001, DCCP
  9000 (besides loopback, established/related and ICMP); b's chain has policy accept and the
  same port rules without ssh's;
* the service's passive loaded the BPF filter that limits SCTP INITs on UDP 9899 (its log);
* from b (the packaged netperfmeter) a measurement with control over SCTP (userland SCTP over
  UDP 9899) and TCP, UDP (both directions), MPTCP and SCTP flows, with the key, completes and
  both sides' scalar files show every flow's bytes received; from the machine's root namespace
  (the build's netperfmeter) "netperfmeter A:9000 -runtime=2 -tcp const10:const1000" with the key
  does too, and without the key it is refused ("requires authentication");
* a port the role did not open stays closed: a TCP listener on a's port 9005 (started over
  ssh) accepts on a itself (loopback and a's own address), but connections from the root
  namespace and from b time out (dropped), while 9001 (control) connects at once; the
  table's TCP and UDP rules counted the measurements' packets.

The congestion controls are registered with the kernel that all hosts share, and a's loader
unregisters them when a powers off: the test holds the cc tests' lock exclusively
(tests/cc/cc_netns.py) and afterwards restores what was registered before.

Label long: debootstrap (once, cached) and two Ansible runs take minutes. Skips (77) without
root, debootstrap, systemd-nspawn (systemd-container) or ansible-playbook (ansible).
"""

import fcntl
import glob
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import hostlab  # noqa: E402

BUILD = os.environ.get("NPM_BUILD_DIR", os.path.join(SOURCE, "build"))
NETPERFMETER = os.environ.get("NETPERFMETER", os.path.join(BUILD, "src", "app", "netperfmeter"))
CC_LOADER = os.environ.get("NPM_CC_LOADER", os.path.join(BUILD, "src", "cc", "netperfmeter-cc-loader"))
PACKAGES = ["netperfmeter", "netperfmeter-service", "netperfmeter-cc"]
PORT = 9000
CLOSED = PORT + 5
OLD_KERNEL = "6.1.0-25-amd64"
CC_NAMES = ["npm_lia", "npm_olia", "npm_rpv1", "npm_rpv2"]
CC_LOCK = os.path.join("/run/lock" if os.path.isdir("/run/lock") else "/tmp", "netperfmeter-cc-tests.lock")
TIMINGS = {}


def log(*parts):
    print(*parts, flush=True)


def skip_unless_available():
    why = hostlab.missing(systemd=True)
    if why is None and subprocess.run(["sh", "-c", "command -v ansible-playbook"],
                                      capture_output=True).returncode != 0:
        why = "ansible-playbook is not installed (Debian package ansible)"
    if why:
        print("SKIP: " + why, flush=True)
        sys.exit(hostlab.SKIP)


# ---- the packages -----------------------------------------------------------------------------

def debs():
    """{package: .deb} of BUILD/packages, built with packaging/setup.sh packages if any is missing."""
    directory = os.path.join(BUILD, "packages")

    def found():
        return {p: sorted(glob.glob(os.path.join(directory, p + "_*.deb"))) for p in PACKAGES}

    files = found()
    if any(len(f) != 1 for f in files.values()):
        log("building the .deb files (packaging/setup.sh packages, BUILD_DIR=%s)" % BUILD)
        start = time.monotonic()
        r = subprocess.run([os.path.join(SOURCE, "packaging", "setup.sh"), "packages"],
                           env=dict(os.environ, BUILD_DIR=BUILD), capture_output=True, text=True, errors="replace")
        TIMINGS["debs"] = ("built", time.monotonic() - start)
        if r.returncode != 0:
            raise RuntimeError("packaging/setup.sh packages failed:\n" + (r.stdout + r.stderr)[-4000:])
        files = found()
        if any(len(f) != 1 for f in files.values()):
            raise RuntimeError("no single .deb of each of %s in %s" % (PACKAGES, directory))
    else:
        TIMINGS["debs"] = ("present", 0.0)
    for p, f in files.items():
        log("package %s: %s (%s)" % (p, os.path.basename(f[0]),
                                     time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(f[0])))))
    return {p: f[0] for p, f in files.items()}


def runtime_dependencies(files):
    """What the packages depend on from the archive (the hosts have no Internet: these go into
    the cached root)."""
    names = set()
    for f in files:
        for field in ("Pre-Depends", "Depends"):
            value = subprocess.run(["dpkg-deb", "--field", f, field], capture_output=True, text=True).stdout
            for item in value.split(","):
                first = item.split("|")[0].strip()
                name = re.split(r"[\s(:]", first, maxsplit=1)[0] if first else ""
                if name and not name.startswith("netperfmeter"):
                    names.add(name)
    return sorted(names)


# ---- the congestion controls, which all hosts share ------------------------------------------

def registered():
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        available = f.read().split()
    return all(n in available for n in CC_NAMES)


class CcRegistrations:
    def __init__(self, wait=300):
        self.lock = open(CC_LOCK, "a+")
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the cc tests held %s for %d s" % (CC_LOCK, wait))
                time.sleep(1)
        self.before = registered()

    def restore(self):
        try:
            now = registered()
            if self.before and not now:
                if CC_LOADER and os.access(CC_LOADER, os.X_OK):
                    r = subprocess.run([CC_LOADER, "start"], capture_output=True, text=True)
                    log("re-registered the congestion controls (registered before the test): exit %d" % r.returncode)
                else:
                    log("WARNING: the congestion controls were registered before the test and are not now; "
                        "no NPM_CC_LOADER to register them again")
            elif not self.before and now:
                if CC_LOADER and os.access(CC_LOADER, os.X_OK):
                    subprocess.run([CC_LOADER, "stop"], capture_output=True)
                    log("unregistered the congestion controls host a left registered")
        finally:
            self.lock.close()


# ---- helpers ----------------------------------------------------------------------------------

def scalars(text):
    """{(side, flow): received bytes} of a scalar file's text."""
    out = {}
    for m in re.finditer(r'scalar "netPerfMeter\.(active|passive)\.flow\[(\d+)\]" "Received Bytes"\s+(\d+)', text):
        out[(m.group(1), int(m.group(2)))] = int(m.group(3))
    return out


def connects(address, port, timeout=3.0):
    """'connected', 'refused' or 'timeout' for a TCP connection from this namespace."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((address, port))
        return "connected"
    except ConnectionRefusedError:
        return "refused"
    except (socket.timeout, TimeoutError):
        return "timeout"
    finally:
        s.close()


CONNECT_SCRIPT = """
import socket, sys
s = socket.socket()
s.settimeout(3)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("connected")
except ConnectionRefusedError:
    print("refused")
except (socket.timeout, TimeoutError):
    print("timeout")
"""

LISTENER_SCRIPT = ("import socket; s = socket.socket(); "
                   "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', %d)); s.listen(16)\n"
                   "while True: s.accept()[0].close()" % CLOSED)


def recap(output):
    """{host: {ok: n, changed: n, ...}} of ansible-playbook's PLAY RECAP."""
    out = {}
    for m in re.finditer(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", output, re.M):
        out[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return out


def port_rules(ruleset):
    """(policy of the input chain, {(protocol, port)} its rules accept) of `nft -j list table`."""
    import json
    policy, accepted = None, set()
    for item in json.loads(ruleset)["nftables"]:
        if "chain" in item and item["chain"].get("hook") == "input":
            policy = item["chain"].get("policy")
        rule = item.get("rule")
        if not rule or not any("accept" in e for e in rule["expr"]):
            continue
        for e in rule["expr"]:
            match = e.get("match")
            if not match:
                continue
            payload = match["left"].get("payload") if isinstance(match["left"], dict) else None
            if payload and payload.get("field") == "dport":
                right = match["right"]
                ports = right["set"] if isinstance(right, dict) and "set" in right else [right]
                accepted |= {(payload["protocol"], int(p)) for p in ports}
    return policy, accepted


def counters(ruleset):
    """{protocol: packets} of the port rules' counters."""
    import json
    out = {}
    for item in json.loads(ruleset)["nftables"]:
        rule = item.get("rule")
        if not rule:
            continue
        protocol, packets = None, None
        for e in rule["expr"]:
            left = e.get("match", {}).get("left")
            if isinstance(left, dict) and left.get("payload", {}).get("field") == "dport":
                protocol = left["payload"]["protocol"]
            if "counter" in e and isinstance(e["counter"], dict):
                packets = e["counter"].get("packets")
        if protocol and packets is not None:
            out[protocol] = out.get(protocol, 0) + packets
    return out


# ---- the test ---------------------------------------------------------------------------------

class AnsiblePassive(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.started = time.monotonic()
        files = debs()
        cls.cc = CcRegistrations()
        cls.addClassCleanup(cls.cc.restore)
        cls.lab = hostlab.Lab("npmhosts", extra_packages=runtime_dependencies(files.values()))
        cls.a = cls.lab.add_host("a")
        cls.b = cls.lab.add_host("b")
        cls.lab.start()
        cls.addClassCleanup(cls.lab.close)
        TIMINGS["hostroot"] = cls.lab.timings["hostroot"]
        TIMINGS["boot"] = cls.lab.timings["boot"]
        cls.work = tempfile.mkdtemp(prefix="npm-ansible-", dir=cls.lab.dir)
        cls.key = os.path.join(cls.work, "credentials", "netperfmeter.key")
        cls.inventory = cls.lab.write_inventory(
            os.path.join(cls.work, "inventory.yml"), "netperfmeter_passives",
            hostvars={"b": {"netperfmeter_kernel_release": OLD_KERNEL, "netperfmeter_nftables_input_policy": "accept"}},
            groupvars={"netperfmeter_deb_dir": os.path.dirname(files["netperfmeter"]),
                       "netperfmeter_allow": [str(cls.lab.network)],
                       "netperfmeter_nftables_input_policy": "drop",
                       "netperfmeter_auth_key_store": cls.key})
        cls.first = cls.playbook("first")
        cls.second = cls.playbook("second")

    @classmethod
    def playbook(cls, name):
        env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0",
                   ANSIBLE_HOME=os.path.join(cls.work, "ansible-home"),
                   ANSIBLE_LOCAL_TEMP=os.path.join(cls.work, "ansible-tmp"),
                   ANSIBLE_SSH_CONTROL_PATH_DIR=os.path.join(cls.work, "cp"),
                   ANSIBLE_SSH_ARGS="-o ControlMaster=auto -o ControlPersist=30s", ANSIBLE_PIPELINING="1")
        start = time.monotonic()
        r = subprocess.run(["ansible-playbook", "-i", cls.inventory, "site.yml"],
                           cwd=os.path.join(SOURCE, "packaging", "ansible"), env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, errors="replace", timeout=1800)
        took = time.monotonic() - start
        TIMINGS["playbook " + name] = took
        with open(os.path.join(cls.work, "playbook-%s.log" % name), "w") as f:
            f.write(r.stdout + r.stderr)
        totals = recap(r.stdout)
        log("ansible-playbook (%s run): exit %d after %.1f s: %s" % (name, r.returncode, took, totals))
        for message in re.findall(r'^ok: \[(\S+)\] => \{\s*"msg": "([^"]*)"', r.stdout, re.M):
            log("  %s: %s" % message)
        if r.returncode != 0:
            raise RuntimeError("ansible-playbook (%s run) failed (%d):\n%s" % (name, r.returncode,
                                                                               (r.stdout + r.stderr)[-6000:]))
        return r.stdout, totals

    # -- the runs -----------------------------------------------------------------------------
    def test_1_first_run_deploys_both_hosts(self):
        out, totals = self.first
        for host in ("a", "b"):
            self.assertEqual(totals[host]["failed"], 0)
            self.assertEqual(totals[host]["unreachable"], 0)
            self.assertGreater(totals[host]["changed"], 0)
        # b (Linux 6.1): the congestion controls are skipped, and the role says why.
        self.assertIn("netperfmeter-cc-loader skipped on b: its kernel %s is older than 6.2" % OLD_KERNEL, out)
        self.assertNotIn("netperfmeter-cc-loader skipped on a:", out)
        self.assertEqual(os.stat(self.key).st_mode & 0o777, 0o600)

    def test_2_second_run_changes_nothing(self):
        _, totals = self.second
        for host in ("a", "b"):
            self.assertEqual(totals[host]["changed"], 0, "second run changed something on %s" % host)
            self.assertEqual(totals[host]["failed"], 0)

    # -- what is on the hosts ----------------------------------------------------------------
    def test_3_services_and_files(self):
        a, b = self.a, self.b
        for unit in ("netperfmeter.service", "netperfmeter-cc-loader.service"):
            self.assertEqual(a.ssh("systemctl is-enabled " + unit).stdout.strip(), "enabled")
            self.assertEqual(a.ssh("systemctl is-active " + unit).stdout.strip(), "active")
        status = a.ssh("netperfmeter-cc-loader status", check=False)
        self.assertEqual(status.returncode, 0, status.stdout + status.stderr)
        self.assertEqual(a.ssh("stat -c '%a %U' /etc/netperfmeter.key").stdout.strip(), "600 root")
        conf = a.ssh("cat /etc/netperfmeter.conf").stdout
        self.assertIn("--allow=%s" % self.lab.network, conf)
        self.assertIn("--auth-key-file=/run/credentials/netperfmeter.service/netperfmeter.key", conf)
        self.assertEqual(b.ssh("systemctl is-active netperfmeter.service").stdout.strip(), "active")
        cc = b.ssh("dpkg-query -W -f='${Status}' netperfmeter-cc", check=False)
        self.assertNotIn("install ok installed", cc.stdout)

    def test_4_ruleset_opens_exactly_the_ports(self):
        tables = self.a.ssh("nft list tables").stdout.split("\n")
        self.assertEqual([t for t in tables if t.strip()], ["table inet netperfmeter"])
        policy, accepted = port_rules(self.a.ssh("nft -j list table inet netperfmeter").stdout)
        self.assertEqual(policy, "drop")
        passive = {("tcp", PORT - 1), ("tcp", PORT), ("tcp", PORT + 1), ("udp", PORT), ("udp", 9899),
                   ("sctp", PORT), ("sctp", PORT + 1), ("dccp", PORT)}
        self.assertEqual(accepted, passive | {("tcp", 22)})
        # b keeps the default policy accept: the same ports, counted, nothing dropped, no ssh rule.
        policy, accepted = port_rules(self.b.ssh("nft -j list table inet netperfmeter").stdout)
        self.assertEqual(policy, "accept")
        self.assertEqual(accepted, passive)

    def test_4b_service_limits_sctp_inits(self):
        # The unit grants the capabilities the passive needs for the BPF socket filter that limits
        # SCTP INITs on its userland SCTP port (--sctp-init-rate), and the passive loaded it.
        invocation = self.a.ssh("systemctl show --property=InvocationID --value netperfmeter.service").stdout.strip()
        journal = self.a.ssh("journalctl --no-pager --output=cat _SYSTEMD_INVOCATION_ID=%s" % invocation).stdout
        self.assertIn("Passive mode: waiting for incoming connections", journal)
        self.assertIn("SCTP/UDP port 9899: INITs limited to 500/s", journal,
                      "the service's passive did not load its INIT filter:\n" + journal[-3000:])

    # -- measurements ---------------------------------------------------------------------------
    def test_5_measurements(self):
        a, b = self.a, self.b
        with open(self.key) as f:
            b.ssh("umask 077 && cat > /root/netperfmeter.key", input=f.read())
        # From b, the packaged netperfmeter: control over SCTP (userland, UDP 9899) and one flow
        # per transport of the passive's ports.
        r = b.ssh("cd /tmp && netperfmeter %s:%d -runtime=2 -x --auth-key-file=/root/netperfmeter.key -nodisplay "
                  "-scalar=b.sca -tcp const10:const1000 -udp const10:const500:const10:const500 "
                  "-mptcp const10:const1000 -sctp const10:const1000" % (a.address, PORT), check=False, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
        passive = scalars(b.ssh("cat /tmp/b-passive.sca").stdout)
        active = scalars(b.ssh("cat /tmp/b-active.sca").stdout)
        for flow in range(4):
            self.assertGreater(passive.get(("passive", flow), 0), 0, "flow %d: nothing arrived at a" % flow)
        self.assertGreater(active.get(("active", 1), 0), 0, "UDP flow: nothing came back from a")
        # From the root namespace, the build's netperfmeter: the command of the issue, with the key.
        with tempfile.TemporaryDirectory(dir=self.work) as d:
            r = subprocess.run([NETPERFMETER, "%s:%d" % (a.address, PORT), "-runtime=2", "-tcp", "const10:const1000",
                                "--auth-key-file=" + self.key, "-nodisplay", "-scalar=root.sca"],
                               cwd=d, capture_output=True, text=True, errors="replace", timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
            with open(os.path.join(d, "root-passive.sca")) as f:
                self.assertGreater(scalars(f.read()).get(("passive", 0), 0), 0)
            # Without the key the passive refuses.
            r = subprocess.run([NETPERFMETER, "%s:%d" % (a.address, PORT), "-runtime=1", "-y", "-tcp",
                                "const10:const1000", "-nodisplay"], cwd=d, capture_output=True, text=True,
                               errors="replace", timeout=120)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("requires authentication", r.stdout + r.stderr)
        seen = counters(a.ssh("nft -j list table inet netperfmeter").stdout)
        self.assertGreater(seen.get("tcp", 0), 0)
        self.assertGreater(seen.get("udp", 0), 0)

    def test_6_unopened_port_stays_closed(self):
        a, b = self.a, self.b
        a.ssh("systemd-run --unit=hostlab-listener --quiet python3 -c \"%s\"" % LISTENER_SCRIPT)
        deadline = time.monotonic() + 30
        while not a.ssh("ss -Htln 'sport = :%d'" % CLOSED).stdout.strip():
            self.assertLess(time.monotonic(), deadline, "the listener on a did not start")
            time.sleep(0.2)
        try:
            on_a = "python3 -c '%s' %%s %d" % (CONNECT_SCRIPT, CLOSED)
            self.assertEqual(a.ssh(on_a % "127.0.0.1").stdout.strip(), "connected")
            self.assertEqual(a.ssh(on_a % a.address).stdout.strip(), "connected")
            self.assertEqual(connects(a.address, CLOSED), "timeout")
            self.assertEqual(connects(a.address, PORT + 1), "connected")
            from_b = "python3 -c '%s' %s %%d" % (CONNECT_SCRIPT, a.address)
            self.assertEqual(b.ssh(from_b % CLOSED).stdout.strip(), "timeout")
            self.assertEqual(b.ssh(from_b % (PORT + 1)).stdout.strip(), "connected")
        finally:
            a.ssh("systemctl stop hostlab-listener", check=False)


def main():
    skip_unless_available()
    hostlab.run_in_private_mount_namespace()
    start = time.monotonic()
    result = unittest.main(module="__main__", exit=False, verbosity=2).result
    TIMINGS["total"] = time.monotonic() - start
    log("timings: " + ", ".join("%s %s" % (k, ("%s %.0f s" % v) if isinstance(v, tuple) else "%.0f s" % v)
                                for k, v in TIMINGS.items()))
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
