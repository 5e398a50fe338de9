"""Dual-homed (or n-homed) test beds from network namespaces, veth pairs, tbf and a delay line.

Disjoint paths between an active host A and a passive host P, each through a router R<i> of its own:

    A a1 10.250.1.1/24 --- R1 [tbf] --(delay line D1)-- p1 10.250.1.2/24 P
    A a2 10.250.2.1/24 --- R2 [tbf] --(delay line D2)-- p2 10.250.2.2/24 P
    ...

Every queue sits on a forwarding hop, as a real bottleneck does: the forward direction (A -> P)
is shaped on R<i>'s interface towards P, the reverse on its interface towards A. A queue on the
sending host's own interface would stay nearly empty: TCP Small Queues lets a socket hold only a
packet or two below it, and userland SCTP's UDP socket would be charged for every queued packet
(its send buffer then couples all paths). The router receives each packet into its own IP stack
(which releases the sender's socket) and forwards it; the hosts see each other on one /24 per
path (static neighbour entries point at the router), so addresses are those of a direct link.
One-way delay and random loss come from netem where the kernel has it (on the router, with the
tbf below it), else from netperfmeter-delayline in a namespace of its own between the router and
P (paths without delay or loss have none). A path with an AQM (Path.aqm "red", "codel", "pie")
is shaped in its delay line instead of tbf (rate, queue, AQM, then the delay): this kernel has
no sch_red, sch_codel or sch_pie; tbf's place on the router holds a counting FIFO. The delay
lines' random decisions are seeded per repetition, link and direction (reseed(),
delayline_seed()); each run's record of them is delayline_record(). Every interface sends one
packet per frame (gso_max_segs 1), so tbf, loss and the delay line see packets as a real link
would. Neighbours are static, so no ARP crosses a path during a run, and IPv6 is off, so no
router solicitation does. An unshaped direction gets a FIFO on its router as a counter
(qdisc_sent(), path_counters()).

All names start with npmlab<pid>- (or another prefix a program chooses, such as a test's):
a later run removes stale leftovers of its own prefix (namespaces whose creating process is
gone) and nothing else.

Programs other than the lab (the tests) build paths with path(rate="20mbit", delay_ms=10, ...)
and use a topology's address(), device(), ns()/popen() in its namespaces, mptcp_endpoint(),
qdisc_sent() and path_counters(), and take paths down and up again: set_link() (a host's
interface) and set_path() (a failure inside a disjoint path, which the hosts do not see).
"""

import hashlib
import json
import os
import re
import select
import signal
import subprocess
import threading
import time

from . import evidence, study, testbed
from .errors import LabError  # noqa: F401  (topology.LabError: its old home)

PREFIX = "npmlab"
PASSIVE_PORT = 9000


def _run(cmd, timeout=30, check=True):
    try:
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise LabError(f"{cmd[0]} is not installed")
    except subprocess.TimeoutExpired:
        raise LabError(f"{' '.join(map(str, cmd))}: no answer within {timeout} s")
    if check and r.returncode != 0:
        detail = (r.stderr or r.stdout).strip().splitlines()
        raise LabError(f"{' '.join(map(str, cmd))}: {detail[-1] if detail else 'exit ' + str(r.returncode)}")
    return r.stdout


def _namespaces():
    out = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_namespace(ns):
    pids = _run(["ip", "netns", "pids", ns], check=False).split()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            try:
                os.kill(int(pid), sig)
                alive.append(pid)
            except (ProcessLookupError, ValueError):
                pass
        if not alive:
            break
        deadline = time.monotonic() + 2
        while alive and time.monotonic() < deadline:
            alive = [p for p in alive if os.path.exists(f"/proc/{p}")]
            time.sleep(0.05)
        pids = alive
    _run(["ip", "netns", "del", ns], check=False)


def _qdisc_counters(ns, dev):
    """The statistics of the root qdisc of `dev` in `ns` (tc -s -j): bytes, packets, drops,
    overlimits, requeues, backlog (bytes) and qlen (packets)."""
    out = _run(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev])
    try:
        qdiscs = json.loads(out)
    except ValueError:
        raise LabError(f"tc gave no JSON for {dev} in {ns}: {out.strip()[:200]}")
    root = next((q for q in qdiscs if q.get("root")), None)
    if root is None:
        raise LabError(f"no root qdisc on {dev} in {ns}")
    return {k: int(root.get(k, 0)) for k in ("bytes", "packets", "drops", "overlimits", "requeues", "backlog", "qlen")}


def remove_stale(prefix=PREFIX):
    """Deletes namespaces of earlier runs (of this prefix) whose process is gone; returns their names."""
    removed = []
    for ns in _namespaces():
        m = re.match(rf"^{re.escape(prefix)}(\d+)-", ns)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            _kill_namespace(ns)
            removed.append(ns)
    return removed


def leftovers(pid=None, prefix=PREFIX):
    """The lab namespaces that exist (of one process, or of any)."""
    mark = f"{prefix}{pid}-" if pid is not None else prefix
    return [ns for ns in _namespaces() if ns.startswith(mark)]


_netem = None
_netem_lock = threading.Lock()


def kernel_has_netem():
    global _netem
    with _netem_lock:  # topologies may come up in several threads at once
        if _netem is None:
            probe = f"{PREFIX}{os.getpid()}-probe"
            _run(["ip", "netns", "add", probe])
            try:
                r = subprocess.run(["tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                                   capture_output=True, text=True)
                _netem = r.returncode == 0
            finally:
                _run(["ip", "netns", "del", probe], check=False)
    return _netem


def tbf_burst(rate_bits):
    """Bucket depth: two full frames, or 1 ms at the rate if that is more."""
    return max(2 * 1514, int(rate_bits / 8 / 1000))


def path(rate=None, delay_ms=0, loss=0, queue=100 * study.FRAME_BYTES, burst=None, reverse_rate=None,
         reverse_delay_ms=None, reverse_loss=0, reverse_queue=None, reverse_burst=None, name="path", ber=0.0,
         aqm="droptail", aqm_params=None):
    """A path from keywords: rates in bit/s or as text ("20mbit"; None = unshaped), queues and
    bursts in bytes (tbf's limit and bucket; burst None = tbf_burst()), loss in percent. The
    reverse direction (passive -> active) is unshaped unless given, has the forward delay unless
    given, and no loss. aqm: "droptail" (tbf), or "red", "codel", "pie" with aqm_params
    ({name: value} as the study file's red/codel/pie tables): the delay line shapes then."""
    def bits(rate):
        return study.parse_rate(rate) if isinstance(rate, str) else rate

    p = study.Path(name, bits(rate), bits(reverse_rate), queue, queue if reverse_queue is None else reverse_queue,
                   delay_ms, delay_ms if reverse_delay_ms is None else reverse_delay_ms, loss, reverse_loss, ber,
                   aqm=aqm, aqm_params=aqm_params)
    p.burst, p.reverse_burst = burst, reverse_burst
    return p


DIRECTIONS = ("forward", "reverse")
# the counts of a delay line's counters line (each direction), in order
COUNTS = ("in", "out", "lost", "dropped", "corrupted", "aqm_drops", "tail_drops", "marks", "late")
# the upper edges (microseconds) of its lateness histogram's buckets; the last bucket is above them
LATENESS_EDGES_US = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)


def parse_counters(line):
    """A delay line's "counters IF_A->IF_B k=v ...; IF_B->IF_A k=v ..." line -> {"forward"/"reverse":
    {counts, late_max_us, late_max_report_us, lateness_us (a list), seed}}; None if it is none. Lines of
    older delay lines (the first five counts only) give 0 for the rest."""
    if not line.startswith("counters ") or line.count(";") != 1:
        return None
    out = {}
    for d, part in zip(DIRECTIONS, line[len("counters "):].split(";")):
        fields = dict(f.split("=", 1) for f in part.split()[1:] if "=" in f)
        try:
            c = {k: int(fields.get(k, 0)) for k in (*COUNTS, "late_max_us", "late_max_report_us", "seed")}
            hist = fields.get("lateness_us")
            c["lateness_us"] = [int(v) for v in hist.split(",")] if hist else [0] * (len(LATENESS_EDGES_US) + 1)
        except ValueError:
            return None
        if not all(k in fields for k in COUNTS[:4]) or len(c["lateness_us"]) != len(LATENESS_EDGES_US) + 1:
            return None
        out[d] = c
    return out


def lateness_summary(hist, max_us):
    """{"frames", "p50_us", "p99_us", "max_us", "histogram"} of a lateness histogram (counts per
    bucket of LATENESS_EDGES_US): a quantile is the upper edge of its bucket (at most that late;
    None above the last edge), the maximum exact (the delay line's)."""
    n = sum(hist)

    def quantile(q):
        if n == 0:
            return None
        seen = 0
        for i, c in enumerate(hist):
            seen += c
            if seen >= q * n:
                return LATENESS_EDGES_US[i] if i < len(LATENESS_EDGES_US) else None
        return None

    edges = [f"<={e}" for e in LATENESS_EDGES_US] + [f">{LATENESS_EDGES_US[-1]}"]
    return {"frames": n, "p50_us": quantile(0.5), "p99_us": quantile(0.99), "max_us": max_us,
            "histogram": dict(zip(edges, hist))}


def aqm_options(path):
    """netperfmeter-delayline's -r, -q and -a for a path with an AQM (the delay line shapes it)."""
    rates = [int(r) if r is not None else 0 for r in (path.rate, path.reverse_rate)]
    limits = [max(1, round(q / study.FRAME_BYTES)) for q in (path.queue, path.reverse_queue)]
    params = ",".join(f"{k}={int(v) if isinstance(v, bool) or float(v).is_integer() else v}"
                      for k, v in getattr(path, "aqm_params", ()))
    return ["-r", f"{rates[0]},{rates[1]}", "-q", f"{limits[0]},{limits[1]}",
            "-a", path.aqm + (":" + params if params else "")]


@testbed.register("disjoint")
class Disjoint:
    """netem: None uses netem where the kernel has it, False always the delay line, True
    requires netem. announce: the passive announces its other addresses to MPTCP (signal
    endpoints); without it, mptcp_endpoint() chooses. ber_ports: the UDP ports of userland SCTP
    whose packets a path's bit errors (Path.ber) corrupt ("PORT" or "FIRST-LAST"; the runner's
    pairs use 9899 + i). seed: the study's; each delay line's random decisions come from it, the
    repetition (reseed()), the link and the direction (delayline_seed()). realtime: the delay
    lines run as real-time processes (-R), so that the end hosts' work does not make them late."""

    remote = False  # built here, in namespaces: the lab needs root, and captures every run

    @classmethod
    def for_study(cls, study, values, delayline, seed):
        """The test bed of a study's combination `values` (testbed.Testbed), not yet up."""
        return cls(study.paths_for(values), delayline=delayline, sysctls=study.sysctls, seed=seed)

    @staticmethod
    def runner_class():
        """The run loop that drives this bed."""
        from .runner import Runner
        return Runner

    def __init__(self, paths, delayline="netperfmeter-delayline", sysctls=None, tag="0", seed=1, prefix=PREFIX,
                 netem=None, announce=True, ber_ports="9899-9930", realtime=True):
        self.paths = paths
        self.ber_ports = ber_ports
        self.delayline = delayline
        self.sysctls = sysctls or {}
        self.seed = seed
        self.use_netem = netem
        self.announce = announce
        self.realtime = realtime
        base = f"{prefix}{os.getpid()}-{tag}"
        self.A, self.P = base + "a", base + "p"
        self.created = []
        self.delaylines = []
        self.netem = False
        self.counting = True  # unshaped router interfaces get a counting FIFO
        self.delayline_of = {}  # link index (path i: i + 1) -> its delay line process
        self.delayline_cmd = {}  # link index -> its command line
        self.repetition = 0  # of the seeds in force (reseed())
        self.reports = {}  # link index -> its last two counters lines, parsed (delay_counters())
        self.device_state = {}  # (namespace, device) -> the `ip` commands of its neighbours and routes

    def address(self, side, path):
        return f"10.250.{path + 1}.{1 if side == 'active' else 2}"

    def active_addresses(self):
        return [self.address("active", i) for i in range(len(self.paths))]

    def namespace(self, side):
        return self.A if side == "active" else self.P

    # -- testbed.Testbed, beyond up(), down(), address(), ns(), describe() ---------------------
    def program(self, side, netperfmeter):
        """The start of a netperfmeter command on a side of the test bed."""
        return ["ip", "netns", "exec", self.namespace(side), netperfmeter]

    def counters(self):
        return evidence.snapshot(self)

    def capture(self, path, seconds):
        return evidence.Capture(self, path, seconds=seconds)

    def begin(self, repetition):
        self.reseed(repetition)  # the delay lines' random decisions: this repetition's

    def record(self):
        return self.delayline_record()  # seeds, drops by cause, lateness of the run

    def device(self, side, path):
        """The interface of a host on its path `path` (0, 1, ...)."""
        return f"{'a' if side == 'active' else 'p'}{path + 1}"

    def ns(self, name, *cmd, check=True, timeout=30):
        """Runs a command in a namespace (a name, or "active"/"passive"); its output."""
        name = self.namespace(name) if name in ("active", "passive") else name
        return _run(["ip", "netns", "exec", name, *cmd], check=check, timeout=timeout)

    def popen(self, side, *cmd, **kw):
        """Starts a command in the namespace of a host ("active"/"passive" or a name)."""
        name = self.namespace(side) if side in ("active", "passive") else side
        return subprocess.Popen(["ip", "netns", "exec", name, *map(str, cmd)], **kw)

    def set_link(self, side, path, up):
        """Takes a host's interface on path `path` down or up, as an outage at the host (a cable
        pulled, a modem lost) does. The kernel flushes a device's neighbour entries and routes when
        it goes down, static ones included, so that the path would stay dead; bringing it up puts
        back what the topology configured on it, and the path carries traffic as before."""
        ns, dev = self.namespace(side), self.device(side, path)
        self.ns(ns, "ip", "link", "set", dev, "up" if up else "down")
        if up:
            self._restore(ns, dev)

    def set_path(self, path, up):
        """A failure inside path `path`, or its end: while down, the path's router discards what it
        would forward, in both directions, and tells no one (a blackhole route: no ICMP error), as
        a broken link further along the path does; the hosts' interfaces stay up. Up puts back
        the router's routes as the topology configured them."""
        r = self.router(path)
        for side, dev in (("passive", "rp"), ("active", "ra")):
            if up:
                self._restore(r, dev)
            else:
                self.ns(r, "ip", "route", "replace", "blackhole", self.address(side, path) + "/32")

    def _configure(self, ns, dev, *cmd):
        """Runs `ip CMD` (a neighbour entry or a route on `dev`, written as "replace") and keeps it
        for _restore()."""
        self.ns(ns, "ip", *cmd)
        self.device_state.setdefault((ns, dev), []).append(cmd)

    def _restore(self, ns, dev):
        """Runs again what _configure() set on `dev` (after the kernel flushed it, or a failure
        replaced it)."""
        for cmd in self.device_state.get((ns, dev), []):
            self.ns(ns, "ip", *cmd)

    def mptcp_endpoint(self, side, path, flags="subflow"):
        """An MPTCP endpoint on a host's address of `path` ("subflow", "signal", ...)."""
        self.ns(side, "ip", "mptcp", "endpoint", "add", self.address(side, path), "dev", self.device(side, path),
                *flags.split())

    def router(self, path):
        """The namespace of the router on path `path` (0, 1, ...)."""
        return self.A[:-1] + f"r{path + 1}"

    def _routers(self):
        """[(namespace, what its qdiscs are)] of the routers, for describe()."""
        return [(self.router(i), f"path {i + 1}: rp forward, ra reverse") for i in range(len(self.paths))]

    def _shaping_point(self, side, path):
        """(namespace, device) whose root qdisc carries what `side` sends on `path`: the router's
        interface towards the other host."""
        return (self.router(path), "rp") if side == "active" else (self.router(path), "ra")

    def qdisc_sent(self, side, path):
        """(bytes, packets) that `side` sent on `path`, as the path's queue counted them: per
        frame, headers included."""
        c = self.path_counters(side, path)
        return c["bytes"], c["packets"]

    def path_counters(self, side, path):
        """The counters of the queue that carries what `side` sends on `path` (tc -s): bytes,
        packets, drops, overlimits, requeues and the backlog (bytes, packets) at this moment."""
        ns, dev = self._shaping_point(side, path)
        return _qdisc_counters(ns, dev)

    def count(self, side, path, packets=1000):
        """Kept for programs written before every path direction had a counting queue: nothing to do."""

    def _add_ns(self, name):
        _run(["ip", "netns", "add", name])
        self.created.append(name)
        self.ns(name, "ip", "link", "set", "lo", "up")
        for k in ("all", "default"):
            self.ns(name, "sysctl", "-qw", f"net.ipv4.conf.{k}.rp_filter=0")
            # IPv4 only: no router solicitations or MLD reports cross a path (they would take a
            # delay line's random decisions away from the run's packets at times of their own)
            self.ns(name, "sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=1")

    def _veth(self, ns_a, dev_a, ns_b, dev_b):
        _run(["ip", "-n", ns_a, "link", "add", "name", dev_a, "type", "veth", "peer", "name", dev_b, "netns", ns_b])
        for ns, dev in ((ns_a, dev_a), (ns_b, dev_b)):
            _run(["ip", "-n", ns, "link", "set", dev, "gso_max_segs", "1", "up"])

    def _shape(self, ns, dev, rate, queue, delay_ms, loss, burst=None):
        if self.netem and (delay_ms > 0 or loss > 0):
            netem = ["netem", "limit", "100000"]
            if delay_ms > 0:
                netem += ["delay", f"{delay_ms}ms"]
            if loss > 0:
                netem += ["loss", f"{loss}%"]
            _run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", *netem])
            parent = ["parent", "1:", "handle", "2:"]
        else:
            parent = ["root", "handle", "2:"]
        if rate is not None:
            burst = burst or tbf_burst(rate)
            _run(["tc", "-n", ns, "qdisc", "add", "dev", dev, *parent, "tbf", "rate", f"{int(rate)}bit",
                  "burst", str(burst), "limit", str(max(queue, burst))])
        elif parent[0] == "root" and self.counting:
            # Unshaped: a FIFO that never fills (the veth behind it takes every packet at once),
            # only for its counters.
            _run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "2:", "pfifo", "limit", "10000"])

    def mac(self, ns, dev):
        out = _run(["ip", "-n", ns, "-o", "link", "show", dev])
        m = re.search(r"link/ether ([0-9a-f:]{17})", out)
        if not m:
            raise LabError(f"no MAC address on {dev}")
        return m.group(1)

    def up(self):
        self.netem = kernel_has_netem() if self.use_netem is not False else False
        if self.use_netem and not self.netem:
            raise LabError("netem was asked for, and this kernel has no sch_netem")
        try:
            self._build()
        except BaseException:
            self.down()
            raise

    def _link(self, index, path, ns_a, dev_a, ns_b, dev_b, forward=None, reverse=None):
        """A link from dev_a to dev_b carrying `path`: delay and loss by netem (at the shaping
        points) or by a delay line in a namespace of its own between the two; tbf for the
        forward direction (A -> P) at `forward` and for the reverse at `reverse`, (namespace,
        device) pairs that default to dev_a and dev_b. Every shaping point must be a router's
        interface (see the module's description)."""
        forward = forward or (ns_a, dev_a)
        reverse = reverse or (ns_b, dev_b)
        aqm = getattr(path, "aqm", "droptail") != "droptail"
        # Bit errors that SCTP (not UDP) sees only the delay line makes: netem's corruption hits
        # any byte of the packet, and UDP drops it for its checksum before SCTP sees it. An AQM
        # needs the queue in the delay line: it shapes (rate, queue, AQM) instead of tbf.
        delay_line = path.needs_delay_line() and (not self.netem or getattr(path, "ber", 0) > 0 or aqm)
        if delay_line:
            d = self.A[:-1] + f"d{index}"
            self._add_ns(d)
            self._veth(ns_a, dev_a, d, "x")
            self._veth(d, "y", ns_b, dev_b)
            for dev in ("x", "y"):
                _run(["ip", "-n", d, "link", "set", dev, "promisc", "on"])
            seeds = self.delayline_seed(index, "forward"), self.delayline_seed(index, "reverse")
            cmd = ["ip", "netns", "exec", d, self.delayline, "-c", "-s", f"{seeds[0]},{seeds[1]}"]
            if self.realtime:
                cmd.append("-R")
            if path.loss > 0 or path.reverse_loss > 0:
                cmd += ["-l", f"{path.loss},{path.reverse_loss}"]
            if getattr(path, "ber", 0) > 0:
                cmd += ["-b", repr(path.ber), "-p", self.ber_ports]
            if aqm:
                cmd += aqm_options(path)
            cmd += ["x", "y", str(path.delay_ms), str(path.reverse_delay_ms)]
            self.delayline_cmd[index] = cmd
            try:
                line = self._start_delayline(cmd)
            except FileNotFoundError:
                raise LabError(f"{self.delayline} is not installed")
            if line != "ready":
                raise LabError(f"the delay line of link {index} did not start: {line}")
            self.delayline_of[index] = self.delaylines[-1]
        else:
            self._veth(ns_a, dev_a, ns_b, dev_b)
        # delay and loss in the delay line or by netem, not both; a rate in the delay line (AQM) or by tbf
        netem = not delay_line
        self._shape(*forward, None if aqm else path.rate, path.queue, path.delay_ms * netem, path.loss * netem,
                    getattr(path, "burst", None))
        self._shape(*reverse, None if aqm else path.reverse_rate, path.reverse_queue, path.reverse_delay_ms * netem,
                    path.reverse_loss * netem, getattr(path, "reverse_burst", None))

    def _neighbour(self, ns, dev, address, mac):
        self._configure(ns, dev, "neigh", "replace", address, "lladdr", mac, "dev", dev, "nud", "permanent")

    def _neighbours(self, ns_a, dev_a, addr_a, ns_b, dev_b, addr_b):
        self._neighbour(ns_a, dev_a, addr_b, self.mac(ns_b, dev_b))
        self._neighbour(ns_b, dev_b, addr_a, self.mac(ns_a, dev_a))

    def _route(self, ns, dev, *spec):
        """A route through `dev` (`spec` as `ip route` takes it, without the device)."""
        self._configure(ns, dev, "route", "replace", *spec, "dev", dev)

    def _hosts(self):
        """Settings of both end hosts: MPTCP (a subflow per path, announced by the passive) and the
        study's sysctls."""
        mptcp = os.path.exists("/proc/sys/net/mptcp/enabled")
        for ns in (self.A, self.P):
            if mptcp:
                self.ns(ns, "sysctl", "-qw", "net.mptcp.enabled=1")
                n = str(min(8, len(self.paths)))
                self.ns(ns, "ip", "mptcp", "limits", "set", "subflow", n, "add_addr_accepted", n)
            for key, value in self.sysctls.items():
                try:
                    self.ns(ns, "sysctl", "-qw", f"{key}={value}")
                except LabError as e:
                    if key == "net.ipv4.tcp_congestion_control":
                        allowed = _run(["sysctl", "-n", "net.ipv4.tcp_allowed_congestion_control"], check=False)
                        raise LabError(f"a namespace can only default to an allowed congestion control "
                                       f"({allowed.strip()}): choose it per flow with the FLOWSPEC option "
                                       f"cc={value}") from e
                    raise
        if mptcp and self.announce:
            for i in range(1, len(self.paths)):
                self.mptcp_endpoint("passive", i, "signal")

    def _build(self):
        self._add_ns(self.A)
        self._add_ns(self.P)
        for i, path in enumerate(self.paths):
            a, p, r = f"a{i + 1}", f"p{i + 1}", self.router(i)
            self._add_ns(r)
            self.ns(r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            self._veth(self.A, a, r, "ra")
            self._link(i + 1, path, r, "rp", self.P, p, forward=(r, "rp"), reverse=(r, "ra"))
            active, passive = self.address("active", i), self.address("passive", i)
            self.ns(self.A, "ip", "addr", "add", active + "/24", "dev", a)
            self.ns(self.P, "ip", "addr", "add", passive + "/24", "dev", p)
            # The router forwards between the two hosts of its path (host routes; it needs no
            # address of its own), and each host reaches the other through the router's MAC.
            self._route(r, "rp", passive + "/32")
            self._route(r, "ra", active + "/32")
            self._neighbour(self.A, a, passive, self.mac(r, "ra"))
            self._neighbour(r, "ra", active, self.mac(self.A, a))
            self._neighbour(r, "rp", passive, self.mac(self.P, p))
            self._neighbour(self.P, p, active, self.mac(r, "rp"))
        self._hosts()

    def _start_delayline(self, cmd):
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        self.delaylines.append(proc)
        line = proc.stdout.readline().strip()
        if line != "ready":
            proc.wait(timeout=5)
            return (proc.stderr.read().strip() or f"exit {proc.returncode}").splitlines()[-1]
        return line

    def delayline_seed(self, index, direction, repetition=None):
        """The seed of the random decisions (loss, bit errors, the AQM) of link `index` in `direction`
        ("forward"/"reverse") in a repetition (default: the one in force): from the study's seed,
        the repetition, the link and the direction, the same for the same four; 1 .. 2^63-1."""
        rep = self.repetition if repetition is None else repetition
        digest = hashlib.sha256(f"npmlab-delayline-{self.seed}-{rep}-{index}-{direction}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % ((1 << 63) - 1) + 1

    def _ask(self, index, command, expect):
        """Sends a command to the delay line of link `index`; its answer (a line starting with `expect`)."""
        proc = self.delayline_of[index]
        if proc.poll() is not None:
            raise LabError(f"the delay line of link {index} has ended")
        try:
            proc.stdin.write(command + "\n")
            proc.stdin.flush()
        except OSError as e:
            raise LabError(f"the delay line of link {index} takes no commands: {e}")
        ready, _, _ = select.select([proc.stdout], [], [], 5)
        line = proc.stdout.readline().strip() if ready else ""
        if not line.startswith(expect):
            raise LabError(f"the delay line of link {index} answered {command!r} with {line!r}")
        return line

    def reseed(self, repetition):
        """Gives every delay line the seeds of `repetition` (delayline_seed()): from here on its loss,
        bit errors and AQM decide as they do in every run of that repetition."""
        self.repetition = repetition
        for index in self.delayline_of:
            seeds = self.delayline_seed(index, "forward"), self.delayline_seed(index, "reverse")
            line = self._ask(index, f"seed {seeds[0]} {seeds[1]}", "seeded")
            if line.split()[1:] != [str(s) for s in seeds]:
                raise LabError(f"the delay line of link {index} took other seeds: {line!r}")

    def delay_counters(self):
        """{link index: {"forward"/"reverse": {in, out, lost, dropped, corrupted, aqm_drops,
        tail_drops, marks, late}}} of the running delay lines (link i + 1 is path i, a shared topology's
        bottleneck is the last); the lines in full (lateness, seeds) go to self.reports."""
        out = {}
        for index in self.delayline_of:
            line = self._ask(index, "counters", "counters")
            report = parse_counters(line)
            if report is None:
                raise LabError(f"the delay line of link {index} gave no counters: {line!r}")
            self.reports[index] = (self.reports.get(index, (None, None))[1], report)
            out[str(index)] = {d: {k: report[d][k] for k in COUNTS} for d in DIRECTIONS}
        return out

    def delayline_record(self):
        """What the delay lines did between the last two delay_counters() (a run: before and after),
        per link and direction: the seed and repetition in force, the counts (drops by cause), and the
        lateness of the frames sent (delay_line_lateness()); {} without delay lines."""
        out = {}
        for index, (before, after) in sorted(self.reports.items()):
            if before is None:
                continue
            link = {"command": subprocess.list2cmdline(self.delayline_cmd.get(index, [])),
                    "repetition": self.repetition}
            for d in DIRECTIONS:
                a, b = after[d], before[d]
                link[d] = {"seed": a["seed"], **{k: a[k] - b[k] for k in COUNTS},
                           "lateness": lateness_summary([x - y for x, y in zip(a["lateness_us"], b["lateness_us"])],
                                                        a["late_max_report_us"])}
            out[str(index)] = link
        return out

    def delayline_counters(self):
        """The delay lines' exit lines (after down())."""
        return [getattr(p, "counters", "") for p in self.delaylines]

    def describe(self):
        """What decides a run's result on this topology: qdiscs and the settings in force."""
        lines = [f"netem: {'yes' if self.netem else 'no (netperfmeter-delayline)'}"]
        for index, cmd in sorted(self.delayline_cmd.items()):
            lines.append(f"== delay line of link {index}: {subprocess.list2cmdline(cmd)}")
        for ns, what in self._routers():
            lines.append(f"== {ns} qdiscs ({what})")
            lines.append(_run(["tc", "-n", ns, "qdisc", "show"], check=False).rstrip())
        for ns in (self.A, self.P):
            lines.append(f"== {ns} qdiscs")
            lines.append(_run(["tc", "-n", ns, "qdisc", "show"], check=False).rstrip())
            lines.append(f"== {ns} addresses")
            lines.append(_run(["ip", "-n", ns, "-br", "addr", "show"], check=False).rstrip())
            lines.append(f"== {ns} sysctls")
            for key in ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
                        "net.core.rmem_max", "net.core.wmem_max", "net.mptcp.enabled", "net.mptcp.scheduler",
                        "net.ipv4.tcp_no_metrics_save", *self.sysctls):
                value = self.ns(ns, "sysctl", "-n", key, check=False).strip()
                if value:
                    lines.append(f"{key} = {value}")
            if os.path.exists("/proc/sys/net/mptcp/enabled"):
                lines.append(self.ns(ns, "ip", "mptcp", "limits", "show", check=False).rstrip())
                lines.append(self.ns(ns, "ip", "mptcp", "endpoint", "show", check=False).rstrip())
        return "\n".join(lines) + "\n"

    def down(self):
        for proc in self.delaylines:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    _, err = proc.communicate(timeout=3)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    _, err = proc.communicate()
                proc.counters = (err or "").strip()
        for ns in reversed(self.created):
            _kill_namespace(ns)
        self.created = []


@testbed.register("shared")
class Shared(Disjoint):
    """A shared bottleneck: every path of the two multi-homed hosts crosses one link between
    two routers, where a multipath flow's paths meet a single-path reference flow.

        A a1 10.250.1.1 --[path 1]-- R1 --[bottleneck]-- R2 --- p1 10.251.1.2 P
        A a2 10.250.2.1 --[path 2]-- R1                  R2 --- p2 10.251.2.2 P

    The bottleneck (tbf forward on R1, reverse on R2, delay and loss as on a path) is the
    study's [bottleneck]: the queue sits on a router, as in the disjoint topology. The paths are
    A's access links; they are not shaped forward (that queue would sit on A, the sending host:
    refused), the reverse direction (on R1) may be. A reaches P's address i over its path i, and
    from its own address i (an MPTCP subflow endpoint's) all of P over path i.
    """

    @classmethod
    def for_study(cls, study, values, delayline, seed):
        return cls(study.paths_for(values), study.bottleneck_for(values), delayline=delayline, sysctls=study.sysctls,
                   seed=seed)

    def __init__(self, paths, bottleneck, **kw):
        super().__init__(paths, **kw)
        self.bottleneck = bottleneck
        self.R1, self.R2 = self.A[:-1] + "r", self.A[:-1] + "s"

    def address(self, side, path):
        return f"10.250.{path + 1}.1" if side == "active" else f"10.251.{path + 1}.2"

    def _routers(self):
        return [(self.R1, "bottleneck forward: dev bn; paths reverse: dev a<i>"),
                (self.R2, "bottleneck reverse: dev bn")]

    def _shaping_point(self, side, path):
        # A's access link i carries what A sends on path i (a counting FIFO on A: never full);
        # R1's interface of that link what P sends back over it.
        return (self.A, f"a{path + 1}") if side == "active" else (self.R1, f"a{path + 1}")

    def set_path(self, path, up):
        raise LabError("set_path(): the shared topology's paths have no router of their own (use set_link())")

    def bottleneck_counters(self, side):
        """The counters of the bottleneck's queue in the direction `side` sends (see path_counters())."""
        return _qdisc_counters(self.R1 if side == "active" else self.R2, "bn")

    def _build(self):
        for i, path in enumerate(self.paths):
            if path.rate is not None or (self.netem and (path.delay_ms > 0 or path.loss > 0)):
                raise LabError(f"shared topology: path {i + 1} ({path.name}) would be shaped forward on the sending "
                               "host, where TCP Small Queues keep a queue empty; shape the [bottleneck] (or give the "
                               "path only a reverse_rate)")
        for ns in (self.A, self.P, self.R1, self.R2):
            self._add_ns(ns)
        for ns in (self.R1, self.R2):
            self.ns(ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        n = len(self.paths)
        self._link(n + 1, self.bottleneck, self.R1, "bn", self.R2, "bn")
        self.ns(self.R1, "ip", "addr", "add", "10.249.0.1/30", "dev", "bn")
        self.ns(self.R2, "ip", "addr", "add", "10.249.0.2/30", "dev", "bn")
        self._neighbours(self.R1, "bn", "10.249.0.1", self.R2, "bn", "10.249.0.2")
        self._route(self.R1, "bn", "10.251.0.0/16", "via", "10.249.0.2")
        self._route(self.R2, "bn", "10.250.0.0/16", "via", "10.249.0.1")
        for i, path in enumerate(self.paths):
            a, p, gw_a, gw_p = f"a{i + 1}", f"p{i + 1}", f"10.250.{i + 1}.254", f"10.251.{i + 1}.254"
            self._link(i + 1, path, self.A, a, self.R1, a)
            self.ns(self.A, "ip", "addr", "add", self.address("active", i) + "/24", "dev", a)
            self.ns(self.R1, "ip", "addr", "add", gw_a + "/24", "dev", a)
            self._neighbours(self.A, a, self.address("active", i), self.R1, a, gw_a)
            self._veth(self.R2, p, self.P, p)
            self.ns(self.R2, "ip", "addr", "add", gw_p + "/24", "dev", p)
            self.ns(self.P, "ip", "addr", "add", self.address("passive", i) + "/24", "dev", p)
            self._neighbours(self.R2, p, gw_p, self.P, p, self.address("passive", i))
            # A: P's address i over path i, and all of P from A's address i (an MPTCP subflow
            # endpoint's) over path i; P: answers from address i over its link i
            table = str(100 + i)
            self._route(self.A, a, f"10.251.{i + 1}.0/24", "via", gw_a)
            self._route(self.A, a, "10.251.0.0/16", "via", gw_a, "table", table)
            self.ns(self.A, "ip", "rule", "add", "from", self.address("active", i), "table", table)
            self._route(self.P, p, "10.250.0.0/16", "via", gw_p, "table", table)
            self.ns(self.P, "ip", "rule", "add", "from", self.address("passive", i), "table", table)
            # without a source address (userland SCTP's UDP packets): A's address i over link i
            self._route(self.P, p, f"10.250.{i + 1}.0/24", "via", gw_p)
        self._hosts()
