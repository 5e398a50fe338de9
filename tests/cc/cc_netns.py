"""Network-namespace test bed for the BPF congestion-control tests.

Topology (all addresses exist only inside the namespaces created here):

  C (client)      c1 10.1.1.1/24 --- r1 10.1.1.254  R (router)
                  c2 10.1.2.1/24 --- r2 10.1.2.254
  R  ra 10.9.1.1/24 --[D: delay line]-- sa 10.9.1.2/24  S (server)   link A
  R  rb 10.9.2.1/24 --[E: delay line]-- sb 10.9.2.2/24  S            link B

tbf on R's egress into link A / link B is the bottleneck. The delay line is
netperfmeter-delayline (the lab's AF_PACKET forwarder, DELAY ms each way;
its path comes in NPM_DELAYLINE), since there is no netem here.

mode "shared":   MPTCP's second subflow is c2 -> 10.9.1.2 (client "subflow"
                 endpoint): both subflows and a competing TCP flow from c1
                 cross the one tbf of link A.
mode "disjoint": the server announces 10.9.2.2 (link B): subflow 1 uses
                 link A, subflow 2 link B.
"""
import fcntl
import os
import re
import signal
import subprocess
import sys
import time

SKIP = 77
PREFIX = "npmcc"


def log(*a):
    print(*a, flush=True)


def skip(reason):
    log("SKIP: " + reason)
    sys.exit(SKIP)


def require_root_btf_mptcp():
    if os.geteuid() != 0:
        skip("needs root (network namespaces, BPF registration)")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        skip("no kernel BTF (/sys/kernel/btf/vmlinux)")
    try:
        with open("/proc/sys/net/mptcp/enabled") as f:
            if f.read().strip() != "1":
                skip("MPTCP disabled (net.mptcp.enabled=0)")
    except OSError:
        skip("no MPTCP in this kernel (CONFIG_MPTCP)")
    for tool in ("ip", "tc", "ss"):
        if subprocess.call(["sh", "-c", "command -v " + tool], stdout=subprocess.DEVNULL) != 0:
            skip(tool + " (iproute2) not found")


class Watchdog(Exception):
    pass


def arm_watchdog(seconds):
    """Raise Watchdog after 'seconds' so that cleanup still runs."""
    def fire(sig, frm):
        raise Watchdog("watchdog: test exceeded %d s" % seconds)
    signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)

    def term(sig, frm):
        raise Watchdog("terminated by signal %d" % sig)
    signal.signal(signal.SIGTERM, term)
    signal.signal(signal.SIGINT, term)


def read_sysctl(name):
    with open("/proc/sys/" + name.replace(".", "/")) as f:
        return f.read().split()


def remove_stale_namespaces():
    """Delete namespaces left by an earlier run of these tests that died."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"^(%s(\d+)_\w+)" % PREFIX, line)
        if m and not os.path.exists("/proc/%s" % m.group(2)):
            subprocess.call(["ip", "netns", "del", m.group(1)], stderr=subprocess.DEVNULL)


class Topo:
    def __init__(self, bindir, mode="shared", rate_a="20mbit", rate_b="20mbit",
                 delay_ms=10, limit_a=50000, limit_b=50000, tag="0"):
        self.bindir = bindir
        self.mode = mode
        self.rate_a, self.rate_b = rate_a, rate_b
        self.limit_a, self.limit_b = limit_a, limit_b
        self.delay_ms = delay_ms
        tag = "%s%d_%s" % (PREFIX, os.getpid(), tag)
        self.C, self.R, self.D, self.E, self.S = (tag + x for x in "crdes")
        self.nss = [self.C, self.R, self.D, self.E, self.S]
        self.created = []
        self.procs = []
        self.delaylines = []

    # -- helpers -----------------------------------------------------------
    def sh(self, ns, *cmd, check=True):
        full = (["ip", "netns", "exec", ns] if ns else []) + [str(c) for c in cmd]
        r = subprocess.run(full, capture_output=True, text=True, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError("command failed (%d): %s\n%s" % (r.returncode, " ".join(full), r.stderr))
        return r.stdout

    def popen(self, ns, *cmd):
        p = subprocess.Popen(["ip", "netns", "exec", ns] + [str(c) for c in cmd],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def tool(self, name):
        return os.path.join(self.bindir, name)

    # -- set-up / tear-down ------------------------------------------------
    def up(self):
        for ns in self.nss:
            self.sh(None, "ip", "netns", "add", ns)
            self.created.append(ns)
            self.sh(ns, "ip", "link", "set", "lo", "up")
            for k in ("all", "default"):
                self.sh(ns, "sysctl", "-qw", "net.ipv4.conf.%s.rp_filter=0" % k)
        C, R, D, E, S = self.C, self.R, self.D, self.E, self.S
        link = lambda a, ia, b, ib: self.sh(None, "ip", "-n", a, "link", "add", ia, "type", "veth",
                                            "peer", "name", ib, "netns", b)
        link(C, "c1", R, "r1")
        link(C, "c2", R, "r2")
        link(R, "ra", D, "da0")
        link(D, "da1", S, "sa")
        link(R, "rb", E, "db0")
        link(E, "db1", S, "sb")
        addr = {C: [("c1", "10.1.1.1/24"), ("c2", "10.1.2.1/24")],
                R: [("r1", "10.1.1.254/24"), ("r2", "10.1.2.254/24"),
                    ("ra", "10.9.1.1/24"), ("rb", "10.9.2.1/24")],
                S: [("sa", "10.9.1.2/24"), ("sb", "10.9.2.2/24")]}
        for ns, lst in addr.items():
            for dev, a in lst:
                self.sh(ns, "ip", "addr", "add", a, "dev", dev)
        for ns, devs in ((C, ["c1", "c2"]), (R, ["r1", "r2", "ra", "rb"]),
                         (D, ["da0", "da1"]), (E, ["db0", "db1"]), (S, ["sa", "sb"])):
            for dev in devs:
                self.sh(ns, "ip", "link", "set", dev, "up")
        for dev in ("da0", "da1"):
            self.sh(D, "ip", "link", "set", dev, "promisc", "on")
        for dev in ("db0", "db1"):
            self.sh(E, "ip", "link", "set", dev, "promisc", "on")
        self.sh(R, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        # client: default via c1, source-routed second address via c2
        self.sh(C, "ip", "route", "add", "default", "via", "10.1.1.254", "dev", "c1")
        self.sh(C, "ip", "route", "add", "default", "via", "10.1.2.254", "dev", "c2", "table", "102")
        self.sh(C, "ip", "rule", "add", "from", "10.1.2.1", "table", "102")
        # server: answers from 10.9.2.2 go back over link B
        self.sh(S, "ip", "route", "add", "10.1.0.0/16", "via", "10.9.1.1", "dev", "sa")
        self.sh(S, "ip", "route", "add", "10.1.0.0/16", "via", "10.9.2.1", "dev", "sb", "table", "102")
        self.sh(S, "ip", "rule", "add", "from", "10.9.2.2", "table", "102")
        # bottlenecks (tbf, about one BDP of queue)
        self.sh(R, "tc", "qdisc", "add", "dev", "ra", "root", "tbf", "rate", self.rate_a,
                "burst", "15000", "limit", self.limit_a)
        self.sh(R, "tc", "qdisc", "add", "dev", "rb", "root", "tbf", "rate", self.rate_b,
                "burst", "15000", "limit", self.limit_b)
        # propagation delay
        for ns, a, b in ((D, "da0", "da1"), (E, "db0", "db1")):
            p = self.popen(ns, os.environ.get("NPM_DELAYLINE", self.tool("netperfmeter-delayline")), a, b,
                           self.delay_ms)
            self.delaylines.append(p)
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("delay line failed: " + p.stderr.read())
        # MPTCP
        for ns in (C, S):
            self.sh(ns, "sysctl", "-qw", "net.mptcp.enabled=1")
            self.sh(ns, "ip", "mptcp", "limits", "set", "subflow", "2", "add_addr_accepted", "2")
        if self.mode == "shared":
            self.sh(C, "ip", "mptcp", "endpoint", "add", "10.1.2.1", "dev", "c2", "subflow")
        else:
            self.sh(S, "ip", "mptcp", "endpoint", "add", "10.9.2.2", "dev", "sb", "signal")
        # ARP warm-up through the delay lines (no ping here: TCP SYN -> RST)
        self.rtt_ms("10.9.1.2")
        self.rtt_ms("10.9.2.2")
        self.rtt_ms("10.9.1.2", src="10.1.2.1")

    def rtt_ms(self, dst="10.9.1.2", src=None):
        cmd = [self.tool("npm_cc_traffic"), "rtt", "-a", dst, "-p", "9"] + (["-b", src] if src else [])
        out = self.sh(self.C, *cmd, check=False)
        m = re.search(r"rtt_ms=([\d.]+)", out)
        return float(m.group(1)) if m else None

    def _stop(self, procs):
        for p in procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=3)
                except Exception:
                    p.kill()
                    p.wait()

    def down(self):
        # traffic first, then give RST/FIN a moment to cross the still
        # running delay lines, so no socket (holding a CC) outlives the test
        self._stop([p for p in self.procs if p not in self.delaylines])
        if self.created:
            time.sleep(0.3)
        self._stop(self.delaylines)
        self.procs = []
        self.delaylines = []
        for ns in reversed(self.created):
            subprocess.call(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        self.created = []

    # -- traffic -----------------------------------------------------------
    def flows(self, specs, warmup, end, probe_at=None):
        """Run flows concurrently. specs: list of dicts with keys
        port, mptcp, cc, dst. Returns list of dicts with bytes, mbps, cc,
        sender_cc and (if probe_at) the ss output of client and server."""
        recvs = []
        for s in specs:
            cmd = [self.tool("npm_cc_traffic"), "recv", "-p", s["port"], "-c", s["cc"],
                   "-w", warmup, "-e", end] + (["-m"] if s["mptcp"] else [])
            p = self.popen(self.S, *cmd)
            if p.stdout.readline().strip() != "listening":
                raise RuntimeError("receiver failed: " + p.stderr.read())
            recvs.append(p)
        sends = []
        for s in specs:
            cmd = [self.tool("npm_cc_traffic"), "send", "-a", s["dst"], "-p", s["port"],
                   "-c", s["cc"], "-e", end + 2] + (["-m"] if s["mptcp"] else [])
            sends.append(self.popen(self.C, *cmd))
        probe = None
        if probe_at is not None:
            time.sleep(probe_at)
            probe = {"client": self.sh(self.C, "ss", "-tinH", "state", "established", check=False),
                     "server": self.sh(self.S, "ss", "-tinH", "state", "established", check=False)}
        results = []
        for s, r, snd in zip(specs, recvs, sends):
            out, err = r.communicate(timeout=end + 30)
            m = re.search(r"bytes=(\d+) window=([\d.]+) total=(\d+) cc=(\S+)", out)
            if r.returncode != 0 or not m:
                raise RuntimeError("receiver on port %s failed (%s): %s %s"
                                   % (s["port"], r.returncode, out, err))
            try:
                sout, serr = snd.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                snd.kill()
                sout, serr = snd.communicate()
            sm = re.search(r"cc=(\S+)", sout or "")
            results.append({"bytes": int(m.group(1)),
                            "mbps": int(m.group(1)) * 8 / float(m.group(2)) / 1e6,
                            "cc": m.group(4), "sender_cc": sm.group(1) if sm else None,
                            "sender_err": serr})
        self.procs = [p for p in self.procs if p.poll() is None or p in self.delaylines]
        if probe is not None:
            results.append(probe)
        return results


def subflows(ss_out, port):
    """(cc, is_mptcp_subflow) per established socket with 'port' in ss -tinH output."""
    res = []
    lines = ss_out.splitlines()
    for i, line in enumerate(lines):
        if not line or line[0].isspace():
            continue
        f = line.split()
        if len(f) < 4 or not any(x.endswith(":%d" % port) for x in f[2:4]):
            continue
        info = ""
        j = i + 1
        while j < len(lines) and lines[j][:1].isspace():
            info += lines[j]
            j += 1
        words = info.split()
        res.append((words[0] if words else "?", "tcp-ulp-mptcp" in info))
    return res


class Loader:
    """netperfmeter-cc-loader, shared safely between concurrent test runs.

    Registration is global, and several build trees may run these tests at
    the same time. Every test holds a lock file for its whole run: shared
    for tests that only use the CCs, exclusive for the load test (which
    unregisters them). A marker file records that the CCs were registered by
    a test; the last user (who gets the lock exclusively) unregisters them.
    CCs registered by something else (e.g. the systemd unit) are left alone.
    """
    NAMES = ["npm_lia", "npm_olia", "npm_rpv1", "npm_rpv2"]
    LOCK_DIR = "/run/lock" if os.path.isdir("/run/lock") else "/tmp"
    LOCK = os.path.join(LOCK_DIR, "netperfmeter-cc-tests.lock")
    MARK = os.path.join(LOCK_DIR, "netperfmeter-cc-tests.registered")

    def __init__(self, path, exclusive=False, wait=300):
        self.path = path
        self.exclusive = exclusive
        self.lockf = open(self.LOCK, "a+")
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        deadline = time.time() + wait
        while True:
            try:
                fcntl.flock(self.lockf, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.time() > deadline:
                    raise RuntimeError("another run of the cc tests held %s for %d s" % (self.LOCK, wait))
                time.sleep(1)
        registered = all(n in read_sysctl("net.ipv4.tcp_available_congestion_control")
                         for n in self.NAMES)
        # registered by something other than these tests?
        self.were_registered = registered and not os.path.exists(self.MARK)

    def run(self, cmd):
        r = subprocess.run([self.path, cmd], capture_output=True, text=True, timeout=120)
        return r.returncode, r.stdout + r.stderr

    def start(self):
        rc, out = self.run("start")
        if rc != 0:
            raise RuntimeError("netperfmeter-cc-loader start failed (%d): %s" % (rc, out))
        if "registered npm_" in out.replace("already registered", ""):
            open(self.MARK, "w").close()
        return out

    def stats(self):
        rc, out = self.run("status")
        st = {}
        for m in re.finditer(r"stats (\S+): coupled=(\d+) reno-fallback=(\d+) walk-truncated=(\d+)", out):
            st[m.group(1)] = tuple(int(m.group(k)) for k in (2, 3, 4))
        return st

    def stop(self):
        rc, out = self.run("stop")
        if os.path.exists(self.MARK):
            os.unlink(self.MARK)
        return rc, out

    def restore(self):
        """Unregister what the tests registered, if nobody else uses it."""
        try:
            if not self.exclusive:
                try:
                    fcntl.flock(self.lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return   # another test still uses them; the last one cleans up
            if os.path.exists(self.MARK):
                self.stop()
        finally:
            self.lockf.close()
