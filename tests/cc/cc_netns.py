"""Network-namespace test bed for the BPF congestion-control tests: the lab's topologies
(npmlab.topology, src/lab), with the traffic of npm_cc_traffic.

mode "shared":   the lab's Shared topology: the client C (the active) reaches the router R1
                 over two unshaped paths; link A is the bottleneck R1 -> R2 (tbf, then the
                 delay line, DELAY ms each way) in front of the server S (the passive).
                 MPTCP's second subflow comes from C's second address (a client "subflow"
                 endpoint) to S's first address: both subflows and a competing TCP flow from
                 C's first address cross the one tbf of link A.
mode "disjoint": the lab's Disjoint topology: link A and link B, each a tbf forward and a
                 delay line; the server announces its address on link B: subflow 1 uses
                 link A, subflow 2 link B.

The delay line is netperfmeter-delayline (the lab's AF_PACKET forwarder; its path comes in
NPM_DELAYLINE) even where the kernel has netem, as these tests were calibrated with it.
"""
import fcntl
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "src", "lab"))
from npmlab import topology  # noqa: E402

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
    topology.remove_stale(PREFIX)


class Topo:
    def __init__(self, bindir, mode="shared", rate_a="20mbit", rate_b="20mbit",
                 delay_ms=10, limit_a=50000, limit_b=50000, tag="0"):
        self.bindir = bindir
        self.mode = mode
        # bottlenecks: tbf with about one BDP of queue
        link_a = topology.path(rate=rate_a, queue=limit_a, burst=15000, delay_ms=delay_ms)
        link_b = topology.path(rate=rate_b, queue=limit_b, burst=15000, delay_ms=delay_ms)
        common = dict(delayline=os.environ.get("NPM_DELAYLINE", self.tool("netperfmeter-delayline")), tag=tag,
                      prefix=PREFIX, netem=False)
        if mode == "shared":
            self.lab = topology.Shared([topology.path(), topology.path()], link_a, announce=False, **common)
        else:
            self.lab = topology.Disjoint([link_a, link_b], **common)
        self.C, self.S = self.lab.A, self.lab.P
        self.server = self.lab.address("passive", 0)   # over link A
        self.procs = []

    def popen(self, ns, *cmd):
        p = self.lab.popen(ns, *cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def tool(self, name):
        return os.path.join(self.bindir, name)

    # -- set-up / tear-down ------------------------------------------------
    def up(self):
        self.lab.up()
        if self.mode == "shared":
            self.lab.mptcp_endpoint("active", 1, "subflow")

    def rtt_ms(self, dst=None, src=None):
        cmd = [self.tool("npm_cc_traffic"), "rtt", "-a", dst or self.server, "-p", "9"] + (["-b", src] if src else [])
        out = self.lab.ns(self.C, *cmd, check=False)
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

    def _open_sockets(self):
        """The TCP sockets of both sides that are neither listening nor in TIME_WAIT (those
        hold their congestion control)."""
        return "".join(self.lab.ns(ns, "ss", "-tanH", "state", "connected", "exclude", "time-wait", check=False)
                       for ns in (self.C, self.S)).strip()

    def down(self):
        # traffic first, then let RST/FIN cross the still running delay lines,
        # so no socket (holding a CC) outlives the test
        self._stop(self.procs)
        if self.lab.created:
            deadline = time.monotonic() + 5
            while self._open_sockets() and time.monotonic() < deadline:
                time.sleep(0.02)
        self.procs = []
        self.lab.down()

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
            probe = {"client": self.lab.ns(self.C, "ss", "-tinH", "state", "established", check=False),
                     "server": self.lab.ns(self.S, "ss", "-tinH", "state", "established", check=False)}
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
        self.procs = [p for p in self.procs if p.poll() is None]
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
