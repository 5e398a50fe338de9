"""Studies on real hosts (topology = "hosts"): the same run loop, reaching the hosts only with ssh.

The lab runs nothing of its own on the hosts but netperfmeter and the shell commands of OpenSSH:
per pair of hosts it keeps one ssh connection open (a control master in a private directory,
`ssh -M -N -f`) that every command goes through, and closes it at the end.

Before the first run (HostsRunner.preflight), one line per problem, and nothing runs if there is
one: every host reachable with ssh; netperfmeter installed there and compatible with the local
one (the same major.minor version: the wire protocol and the result files the local createsummary
reads change only with the minor version); the kernel features the study's flows need (MPTCP:
net.mptcp.enabled = 1; SCTP: netperfmeter's userland stack, or with --sctp-stack=kernel the
kernel's module; DCCP: the kernel's; every cc= in tcp_available_congestion_control, the bundled
BPF ones loaded); each path's addresses on the right host (ip -o addr); with max_clock_offset_ms,
the clock offsets from chronyc tracking (or linuxptp's pmc) of both hosts of a pair, whose sum
may not exceed the bound (a one-way delay between them is off by up to that sum): the study is
refused, not run with invalid delays; and the passive reachable on its control port from the
active host over every path (a passive started for the check, or the running service).

Per run, per flow, as the namespace lab: a passive on the passive host (or the running
netperfmeter.service with its key), the active on the active host, both over ssh with their
output streamed into the run's f<i>/passive.log and active.log; the active downloads the
passive's results into its directory on the active host, which comes back with `tar` over ssh.
Each host's environment before and after the run goes into the run's hosts.json (metadata()).
"""

import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

from . import evidence, stats, testbed, tls
from .errors import Interrupted
from .runner import Runner, pair_groups, pair_name
from .errors import LabError

VERSION = re.compile(r"NetPerfMeter (\d+)\.(\d+)(?:\.(\d+))?")
CHRONY_OFFSET = re.compile(r"^System time\s*:\s*([0-9.eE+-]+) seconds (fast|slow)", re.M)
CHRONY_LEAP = re.compile(r"^Leap status\s*:\s*(.+)$", re.M)
PMC_OFFSET = re.compile(r"master_offset\s+(-?[0-9]+)")
PMC_GM = re.compile(r"gmPresent\s+(\w+)")
SECTION = re.compile(r"^=== (.+) ===$", re.M)
SSH_TIMEOUT = 30
PASSIVE_START = 15  # s for a passive to say it listens


# The synchronised start of studies with flows from several hosts: the start time lies this far
# ahead of launching the actives over ssh (a margin and a share per active), and STARTs that the
# passives handle further apart than the limit make the run invalid.
START_MARGIN_S = 2.0
START_PER_ACTIVE_S = 0.5
START_SKEW_LIMIT_S = 0.1


def _with(command, options):
    """A netperfmeter command with options inserted after the program and the passive's address."""
    return command[:2] + options + command[2:]


def version_of(text):
    """(major, minor) of a `netperfmeter --version` output, None if it names none."""
    m = VERSION.search(text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def compatible(local, remote):
    """Whether two `netperfmeter --version` outputs are of compatible versions: the same major
    and minor version (patch releases keep the protocol and the file formats)."""
    a, b = version_of(local), version_of(remote)
    return a is not None and a == b


def uses_one_way_delay(study):
    """Whether a metric of the study uses one-way delays (netperfmeter's Delay and Jitter
    scalars: receive time on one host minus send time on the other)."""
    return any(re.search(r"Delay|Jitter", m.formula) for m in study.metrics)


def clock_offset(text):
    """(offset in ms, source) of `chronyc tracking` or `pmc ... GET TIME_STATUS_NP` output (the
    probe's clock section: its first line names the tool); (None, why) when it tells none."""
    tool, _, out = (text or "").partition("\n")
    tool = tool.strip()
    if tool == "chronyc":
        leap = CHRONY_LEAP.search(out)
        if leap and "not synchronised" in leap.group(1).lower():
            return None, "chronyc tracking: not synchronised"
        m = CHRONY_OFFSET.search(out)
        if not m:
            last = [line for line in out.splitlines() if line.strip()]
            return None, f"chronyc tracking gave no offset ({last[-1].strip() if last else 'no output'})"
        return abs(float(m.group(1))) * 1000, "chronyc tracking"
    if tool == "pmc":
        gm = PMC_GM.search(out)
        if gm and gm.group(1).lower() != "true":
            return None, "pmc: no PTP grandmaster present"
        m = PMC_OFFSET.search(out)
        if not m:
            return None, "pmc GET TIME_STATUS_NP gave no master_offset"
        return abs(int(m.group(1))) / 1e6, "pmc (PTP)"
    return None, "neither chronyc (chrony) nor pmc (linuxptp) is installed"


def sections(text):
    """{name: body} of a probe's output (=== name === headers)."""
    out, parts = {}, SECTION.split(text or "")
    for i in range(1, len(parts) - 1, 2):
        out[parts[i]] = parts[i + 1].strip("\n")
    return out


def addresses(ip_o_addr):
    """{address: device} of `ip -o addr show` output."""
    out = {}
    for line in ip_o_addr.splitlines():
        m = re.match(r"^\d+:\s+(\S+)\s+inet6?\s+([0-9A-Fa-f.:]+)/", line)
        if m:
            out[m.group(2)] = m.group(1).split("@")[0]
    return out


def _last_line(text, default="no output"):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else default


# --------------------------------------------------------------------------------------- ssh
class Remote:
    """One host reached with ssh: commands as shell text, through a control master once open()."""

    def __init__(self, destination, spec, control_dir, number):
        self.destination = destination
        self.base = ["ssh"]
        if spec.ssh_config:
            self.base += ["-F", spec.ssh_config]
        if spec.identity:
            self.base += ["-i", spec.identity, "-o", "IdentitiesOnly=yes"]
        if destination.port:
            self.base += ["-p", str(destination.port)]
        self.base += ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5",
                      "-o", "ServerAliveCountMax=6"]
        self.control = os.path.join(control_dir, f"h{number}")
        self.master = False

    def __str__(self):
        return str(self.destination)

    def argv(self, script):
        mux = ["-o", f"ControlPath={self.control}", "-o", "ControlMaster=no"] if self.master else []
        return self.base + mux + [self.destination.login, script]

    def open(self):
        """Connects (a control master in the background); None, or the one line of why not."""
        with tempfile.TemporaryFile() as err:
            try:
                r = subprocess.run(self.base + ["-M", "-N", "-f", "-o", f"ControlPath={self.control}",
                                                self.destination.login],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                   timeout=SSH_TIMEOUT)
            except FileNotFoundError:
                return "ssh is not installed here (Debian package openssh-client)"
            except subprocess.TimeoutExpired:
                return f"ssh: no connection within {SSH_TIMEOUT} s"
            err.seek(0)
            text = err.read().decode(errors="replace")
        if r.returncode != 0:
            why = _last_line(text, f"exit {r.returncode}")
            return why if why.startswith("ssh:") else f"ssh: {why}"
        self.master = True
        return None

    def close(self):
        if self.master:
            subprocess.run(self.base + ["-o", f"ControlPath={self.control}", "-O", "exit", self.destination.login],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=SSH_TIMEOUT)
            self.master = False

    def run(self, script, timeout=SSH_TIMEOUT, binary=False):
        """Runs shell text on the host; the CompletedProcess (exit 255: ssh failed)."""
        try:
            return subprocess.run(self.argv(script), stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout, **({} if binary else {"text": True, "errors": "replace"}))
        except subprocess.TimeoutExpired:
            raise LabError(f"{self}: no answer within {timeout} s to: {script[:120]}")

    def put(self, data, path, timeout=SSH_TIMEOUT):
        """Writes bytes into a file on the host (readable by its owner only)."""
        try:
            r = subprocess.run(self.argv(f"umask 077 && cat > {shlex.quote(path)}"), input=data, capture_output=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LabError(f"{self}: no answer within {timeout} s while writing {path}")
        if r.returncode != 0:
            raise LabError(f"{self}: writing {path}: {_last_line(r.stderr.decode(errors='replace'))}")

    def check(self, script, timeout=SSH_TIMEOUT):
        r = self.run(script, timeout)
        if r.returncode != 0:
            raise LabError(f"{self}: {script[:80]}: {_last_line(r.stderr or r.stdout, 'exit ' + str(r.returncode))}")
        return r.stdout

    def popen(self, script, stdout, stderr):
        return subprocess.Popen(self.argv(script), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                start_new_session=True)


class RemoteProcess:
    """A program on a host, started over ssh in a directory of its own, its output streamed into a
    local file. poll/wait/returncode are the ssh client's (it ends with the program and passes
    its exit status); send_signal and kill reach the program itself (its pid file)."""

    def __init__(self, remote, directory, argv, log):
        self.remote, self.directory = remote, directory
        self.pidfile = f"{directory}/.pid"
        script = f"cd {shlex.quote(directory)} && echo $$ > .pid && exec {shlex.join(argv)}"
        self.proc = remote.popen(script, stdout=log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid

    @property
    def returncode(self):
        return self.proc.returncode

    def poll(self):
        return self.proc.poll()

    def wait(self, timeout=None):
        return self.proc.wait(timeout=timeout)

    def _signal(self, name):
        try:
            self.remote.run(f"kill -{name} \"$(cat {shlex.quote(self.pidfile)} 2>/dev/null)\" 2>/dev/null", timeout=15)
        except LabError:
            pass

    def send_signal(self, sig):
        self._signal(signal.Signals(sig).name[3:])

    def kill(self):
        self._signal("KILL")
        if self.proc.poll() is None:
            self.proc.kill()


# ---------------------------------------------------------------------------------- test bed
@testbed.register("hosts")
class PairBed:
    """A pair of hosts as the run loop sees a test bed (testbed.Testbed): the paths' addresses,
    ns(side, ...) runs a command on a host (evidence.py's ss and nstat), a work directory on each
    host (up(): setup(), down(): the hosts stay as they are, their work directories go in
    HostsRunner.close()). It captures nothing and shapes nothing: its counters are both hosts' MIBs."""

    remote = True  # reached over ssh: no root, no namespaces, no capture; its pre-flight checks the hosts

    @staticmethod
    def runner_class():
        """The run loop that drives pairs of hosts."""
        return HostsRunner

    def __init__(self, pair, remotes, netperfmeter="netperfmeter"):
        self.pair = pair
        self.netperfmeter = netperfmeter  # the program on the hosts ([hosts] netperfmeter)
        self.paths = pair.paths
        self.hosts = {"active": remotes[pair.active], "passive": remotes[pair.passive]}
        self.workdir = {}
        self.devices = {"active": [], "passive": []}  # the interfaces of the paths' addresses
        self.tls = False  # the QUIC pairs' TLS files are in the work directories

    def address(self, side, path):
        return self.paths[path].active if side == "active" else self.paths[path].passive

    def active_addresses(self):
        return [p.active for p in self.paths]

    def ns(self, side, *cmd, check=True, timeout=SSH_TIMEOUT):
        remote = self.hosts[side]
        return remote.check(shlex.join(cmd), timeout) if check else remote.run(shlex.join(cmd), timeout).stdout

    def up(self):
        self.setup()

    def down(self):
        """The hosts stay as they are; their work directories go in cleanup()."""

    def program(self, side, netperfmeter):
        return [self.netperfmeter]

    def counters(self):
        return snapshot(self)

    def capture(self, path, seconds):
        return None  # nothing is captured on the hosts

    def begin(self, repetition):
        """Nothing on the hosts decides at random."""

    def record(self):
        return None

    def setup(self):
        for side, remote in self.hosts.items():
            if side not in self.workdir:
                self.workdir[side] = remote.check("mktemp -d /tmp/npmlab.XXXXXXXX").strip()

    def cleanup(self):
        for side, directory in list(self.workdir.items()):
            try:
                self.hosts[side].run(f"rm -rf {shlex.quote(directory)}")
            except LabError:
                pass
            del self.workdir[side]
        self.tls = False

    def describe(self):
        lines = [f"hosts: pair {self.pair.number}: active {self.pair.active}, passive {self.pair.passive}"]
        for i, p in enumerate(self.paths):
            lines.append(f"path {i + 1} ({p.name}): active {p.active} ({', '.join(self.devices['active'][i:i + 1])}), "
                         f"passive {p.passive} ({', '.join(self.devices['passive'][i:i + 1])})")
        return "\n".join(lines) + "\n"


def snapshot(bed):
    """The counters of a run on hosts: both hosts' MIBs (the lab shapes no path, so it has no
    queue counters)."""
    return {"paths": {}, "delay_lines": {}, "nstat": {s: evidence.nstat(bed, s) for s in ("active", "passive")}}


# ------------------------------------------------------------------------------- metadata
_SYSCTL_GLOBS = ("/proc/sys/net/ipv4/tcp_*", "/proc/sys/net/core/default_qdisc", "/proc/sys/net/core/rmem_max",
                 "/proc/sys/net/core/wmem_max", "/proc/sys/net/mptcp/*", "/proc/sys/net/sctp/*")


def metadata_script(program, devices):
    """One shell script that prints a host's environment in sections (=== name ===)."""
    npm = shlex.quote(program)
    lines = [
        "echo '=== uname ==='; uname -srvmo",
        "echo '=== sysctl ==='",
        f"for f in {' '.join(_SYSCTL_GLOBS)}; do [ -f \"$f\" ] && [ -r \"$f\" ] && "
        "printf '%s = %s\\n' \"$f\" \"$(tr '\\t\\n' '  ' < \"$f\" 2>/dev/null)\"; done",
        "echo '=== qdisc ==='; tc -s qdisc show 2>&1",
        f"echo '=== netperfmeter ==='; {npm} --version 2>&1 | head -n 3",
        "echo '=== iproute2 ==='; ip -V 2>&1",
        "echo '=== ethtool ==='; if command -v ethtool >/dev/null 2>&1; then ethtool --version; else echo missing; fi",
        "echo '=== clock ==='; if command -v chronyc >/dev/null 2>&1; then chronyc tracking 2>&1; "
        "else echo 'no chronyc'; fi",
    ]
    for dev in devices:
        d = shlex.quote(dev)
        lines.append(f"if command -v ethtool >/dev/null 2>&1; then echo '=== ethtool -k {dev} ==='; "
                     f"ethtool -k {d} 2>&1; echo '=== ethtool -i {dev} ==='; ethtool -i {d} 2>&1; fi")
    return "\n".join(lines)


def parse_metadata(destination, devices, text):
    s = sections(text)
    sysctls = {}
    for line in s.get("sysctl", "").splitlines():
        name, sep, value = line.partition(" = ")
        if sep:
            sysctls[name.replace("/proc/sys/", "").replace("/", ".")] = value.strip()
    uname = s.get("uname", "").split()
    ethtool = s.get("ethtool", "missing").strip()
    out = {"destination": str(destination), "uname": s.get("uname", ""),
           "kernel": uname[1] if len(uname) > 1 else "", "sysctl": sysctls,
           "congestion_controls": sysctls.get("net.ipv4.tcp_available_congestion_control", "").split(),
           "qdisc_before": s.get("qdisc", ""), "clock": s.get("clock", ""),
           "versions": {"netperfmeter": s.get("netperfmeter", "").splitlines()[0] if s.get("netperfmeter") else "",
                        "iproute2": s.get("iproute2", ""), "ethtool": None if ethtool == "missing" else ethtool},
           "interfaces": {}}
    for dev in devices:
        out["interfaces"][dev] = {"offloads": s.get(f"ethtool -k {dev}"), "driver": s.get(f"ethtool -i {dev}")}
    if ethtool == "missing":
        out["note"] = f"ethtool is not installed on {destination}: offloads and drivers not recorded"
    return out


def metadata(bed):
    """{side: a host's environment} (metadata_script), before a run."""
    out = {}
    for side, remote in bed.hosts.items():
        devices = sorted(set(bed.devices[side]))
        r = remote.run(metadata_script(bed.netperfmeter, devices), timeout=60)
        if r.returncode == 255:
            raise LabError(f"{remote}: ssh failed while recording its environment: {_last_line(r.stderr)}")
        out[side] = parse_metadata(remote.destination, devices, r.stdout)
    return out


# ------------------------------------------------------------------------------------ runner
def _flow_needs(protocols, args):
    """What a host needs for flows of these protocols and these netperfmeter arguments."""
    needs = set(protocols)
    if any(a in ("-w", "--control-over-mptcp", "-control-over-mptcp") for a in args):
        needs.add("mptcp")
    if any(a in ("--sctp-stack=kernel",) for a in args):
        needs.add("sctp-kernel")
    return needs


def _probe_script(program, clock, start_at=False):
    npm = shlex.quote(program)
    lines = [
        f"echo '=== version ==='; if command -v {npm} >/dev/null 2>&1; then {npm} --version 2>&1 | head -n 3; "
        "else echo NOT-INSTALLED; fi",
        "echo '=== mptcp ==='; cat /proc/sys/net/mptcp/enabled 2>/dev/null || echo none",
        "echo '=== sctp ==='; if [ -d /proc/sys/net/sctp ]; then echo loaded; "
        "elif ls /lib/modules/\"$(uname -r)\"/kernel/net/sctp/sctp.ko* >/dev/null 2>&1; then echo module; "
        "else echo none; fi",
        "echo '=== dccp ==='; if [ -d /proc/sys/net/dccp ]; then echo loaded; "
        "elif ls /lib/modules/\"$(uname -r)\"/kernel/net/dccp/dccp.ko* >/dev/null 2>&1; then echo module; "
        "else echo none; fi",
        "echo '=== cc ==='; cat /proc/sys/net/ipv4/tcp_available_congestion_control",
        f"echo '=== quic ==='; {npm} --help 2>&1 | grep -c -e '--tls-key=FILE'",
        "echo '=== addr ==='; ip -o addr show",
        "echo '=== listening ==='; ss -Htuln 2>&1 || echo 'ss failed'",
    ]
    if start_at:  # netperfmeter's own check of --start-at: a clock the kernel calls synchronised
        lines.append(f"echo '=== start-at ==='; {npm} 127.0.0.1:9 --validate --start-at=$(( $(date +%s) + 60 )) "
                     "-tcp const1:const100 2>&1 | tail -n 1")
    if clock:
        lines.append("echo '=== clock ==='; if command -v chronyc >/dev/null 2>&1; then echo chronyc; "
                     "chronyc tracking 2>&1; elif command -v pmc >/dev/null 2>&1; then echo pmc; "
                     "pmc -u -b 0 'GET TIME_STATUS_NP' 2>&1; else echo none; fi")
    return "\n".join(lines)


class HostsRunner(Runner):
    """The run loop of runner.Runner on pairs of real hosts (hostspec.HostPair): one PairBed per
    pair, up to `parallel` runs at once, each on a pair of its own."""

    NO_CAPTURE = "no capture (the hosts topology captures nothing on the hosts)"

    def __init__(self, study, outdir, tools, parallel=1, **kw):
        super().__init__(study, outdir, tools, **kw)
        spec = study.hosts
        self.spec = spec
        self.parallel = parallel
        self.control_dir = tempfile.mkdtemp(prefix="npmlab-ssh-")
        self.remotes = {host: Remote(host, spec, self.control_dir, n) for n, (host, _) in enumerate(spec.hosts())}
        self.beds = [PairBed(pair, self.remotes, spec.netperfmeter) for pair in spec.pairs]
        self.local = threading.local()
        self.lock = threading.Lock()
        self.stopping = False
        self.cross_dirs = []  # (remote, directory) of the cross traffic's runs, removed in close()

    # -- ports: flow i's pair, or every flow at the running service -----------------------------
    def port_of(self, i):
        service = self.spec.service
        return service.port if service else self.spec.base_port + 10 * i

    def udp_port_of(self, i):
        service = self.spec.service
        return service.sctp_udp_port if service else 9899 + i

    # -- before the first run ---------------------------------------------------------------
    def preflight(self):
        """Every problem that would make the study fail or measure something else, one line
        each ([] when there is none)."""
        study, spec = self.study, self.spec
        problems = [f"hosts.{key}: {path}: no such file"
                    for key, path in (("identity", spec.identity), ("ssh_config", spec.ssh_config))
                    if path is not None and not os.path.isfile(path)]
        if problems:
            return problems
        usable = {}
        for host, remote in self.remotes.items():
            why = remote.open()
            if why:
                problems.append(f"{host}: not reachable: {why}")
            else:
                usable[host] = remote
        protocols, ccs = set(), set()
        for values in study.combinations():
            for flow in study.flows_for(values):
                protocols.add(flow.protocol)
                ccs |= {o[3:] for o in flow.spec.split(":") if o.startswith("cc=")}
        args = [a for values in study.combinations() for which in ("active", "passive")
                for a in study.args_for(which, values)]
        study_needs = _flow_needs(protocols, args)
        local = self.tools.version("netperfmeter")
        clock = spec.max_clock_offset_ms is not None
        probed, offsets = {}, {}
        for host, roles in spec.hosts():
            if host not in usable:
                continue
            start_at = bool(spec.cross_traffic) and not spec.shared_clock and roles != {"passive"}
            r = usable[host].run(_probe_script(spec.netperfmeter, clock and roles & {"active", "passive"}, start_at),
                                 timeout=60)
            if r.returncode == 255:
                problems.append(f"{host}: ssh failed: {_last_line(r.stderr)}")
                continue
            s = sections(r.stdout)
            probed[host] = s
            version = s.get("version", "")
            if version.strip() == "NOT-INSTALLED":
                problems.append(f"{host}: netperfmeter is not installed ({spec.netperfmeter} is not in the PATH of "
                                "a command over ssh)")
                continue
            if not compatible(local, version):
                first = version.strip().splitlines()[0] if version.strip() else "no output"
                problems.append(f"{host}: its netperfmeter --version says \"{first}\", the lab's \"{local}\": "
                                "the major and minor versions must match")
            needs = set(study_needs) if roles & {"active", "passive"} else set()
            for x in spec.cross_traffic:
                if x.host == host:
                    needs |= _flow_needs({a[1:] for a in x.flows if a in ("-tcp", "-mptcp", "-udp", "-sctp", "-dccp")},
                                         x.flows)
            problems += self._feature_problems(host, needs, ccs if roles & {"active", "passive"} else set(), s)
            if clock and roles & {"active", "passive"}:
                offsets[host] = clock_offset(s.get("clock", ""))
            if start_at and not s.get("start-at", "").startswith("valid"):
                problems.append(f"{host}: its netperfmeter refuses --start-at, which the study's cross traffic needs "
                                f"to start every active together: {_last_line(s.get('start-at'))}")
        for bed in self.beds:
            problems += self._address_problems(bed, probed)
            problems += self._route_problems(bed, probed)
            problems += self._port_problems(bed, probed)
            if clock:
                problems += self._clock_problems(bed, offsets)
        if not problems:
            for bed in self.beds:
                problems += self._control_port_problems(bed)
        return problems

    def _feature_problems(self, host, needs, ccs, s):
        out = []
        if "mptcp" in needs:
            enabled = s.get("mptcp", "none").strip()
            if enabled == "none":
                out.append(f"{host}: the study needs MPTCP, and its kernel has none (no net.mptcp.enabled)")
            elif enabled != "1":
                out.append(f"{host}: the study needs MPTCP, and net.mptcp.enabled = {enabled} "
                           "(sysctl -w net.mptcp.enabled=1)")
        if "sctp-kernel" in needs and s.get("sctp", "none").strip() == "none":
            out.append(f"{host}: the study asks for kernel SCTP (--sctp-stack=kernel), and its kernel has no SCTP "
                       "module")
        elif "sctp" in needs and "userland SCTP:" not in s.get("version", ""):
            out.append(f"{host}: the study needs SCTP, and its netperfmeter names no userland SCTP stack "
                       "(netperfmeter --version)")
        if "quic" in needs and s.get("quic", "0").strip() in ("0", ""):
            out.append(f"{host}: the study has QUIC flows, and its netperfmeter was built without QUIC (its --help "
                       "offers no --tls-key)")
        if "dccp" in needs and s.get("dccp", "none").strip() == "none":
            out.append(f"{host}: the study needs DCCP, and its kernel has no DCCP module")
        available = set(s.get("cc", "").split())
        missing = sorted(ccs - available)
        if missing:
            hint = " (load the bundled BPF ones: netperfmeter-cc-loader start)" \
                if any(m.startswith("npm_") for m in missing) else ""
            out.append(f"{host}: congestion control {', '.join(missing)} not available (its kernel has: "
                       f"{' '.join(sorted(available)) or 'none'}){hint}")
        return out

    def _address_problems(self, bed, probed):
        out = []
        for side in ("active", "passive"):
            host = bed.pair.active if side == "active" else bed.pair.passive
            if host not in probed:
                continue
            present = addresses(probed[host].get("addr", ""))
            bed.devices[side] = []
            for i, path in enumerate(bed.paths):
                address = bed.address(side, i)
                if address not in present:
                    out.append(f"{host}: path {i + 1} ({path.name}): {address} is not an address of this host "
                               f"(ip -o addr has {', '.join(sorted(present)) or 'none'})")
                else:
                    bed.devices[side].append(present[address])
        return out

    def _route_problems(self, bed, probed):
        """Each path from each side: `ip route get PEER from OWN` must find a route, and it must
        leave by the interface that holds the path's own address (else the path's traffic takes
        another path's interface: multipath over one link)."""
        out = []
        for side, peer_side in (("active", "passive"), ("passive", "active")):
            host = bed.pair.active if side == "active" else bed.pair.passive
            if host not in probed or len(bed.devices[side]) != len(bed.paths):
                continue  # unreachable, or an address missing (said above)
            script = "\n".join(f"echo '=== route {i} ==='; ip -o route get {shlex.quote(bed.address(peer_side, i))} "
                               f"from {shlex.quote(bed.address(side, i))} 2>&1" for i in range(len(bed.paths)))
            r = bed.hosts[side].run(script)
            if r.returncode == 255:
                out.append(f"{host}: ssh failed: {_last_line(r.stderr)}")
                continue
            routes = sections(r.stdout)
            peer_host = bed.pair.passive if side == "active" else bed.pair.active
            peer_has = addresses(probed[peer_host].get("addr", "")) if peer_host in probed else None
            for i, path in enumerate(bed.paths):
                route, own, peer = routes.get(f"route {i}", ""), bed.devices[side][i], bed.address(peer_side, i)
                if peer_has is not None and peer not in peer_has:
                    continue  # the peer lacks the address (said above)
                m = re.search(r"\bdev (\S+)", route)
                if not m:
                    out.append(f"{host}: path {i + 1} ({path.name}): no route to {peer} from {bed.address(side, i)} "
                               f"(ip route get: {_last_line(route)})")
                elif m.group(1) != own and own != "lo":
                    out.append(f"{host}: path {i + 1} ({path.name}): the route to {peer} from {bed.address(side, i)} "
                               f"leaves by {m.group(1)}, not by {own}, which holds {bed.address(side, i)} (the path "
                               "would share another interface; source routing: ip rule add from ADDRESS table N)")
        return out

    def study_ports(self, bed):
        """[(protocol, port, what)] the lab's passives listen on at the passive host of `bed`
        (none with the running service, whose ports are its own)."""
        if self.spec.service is not None:
            return []
        pairs = max((len(pair_groups(self.study.flows_for(v))) for v in self.study.combinations()), default=0)
        quic = self.needs_tls()
        out = []
        for i in range(pairs + len(self.spec.cross_traffic)):
            what = f"flow pair {i + 1}" if i < pairs else f"cross traffic {i - pairs + 1}"
            port = self.spec.base_port + 10 * i
            out += [("tcp", port, what), ("tcp", port + 1, what + " (control)"), ("tcp", port - 1, what + " (MPTCP)"),
                    ("udp", port, what), ("udp", 9899 + i, what + " (userland SCTP)")]
            if quic and i < pairs:  # (the pair of the first QUIC flow)
                out.append(("udp", port - 1, what + " (QUIC)"))
        return out

    def _port_problems(self, bed, probed):
        """The passive host's sockets (ss -Htuln) on a port that a passive of the study needs."""
        host = bed.pair.passive
        if host not in probed:
            return []
        listening = probed[host].get("listening", "")
        if listening.strip().endswith("ss failed"):
            return [f"{host}: cannot list its sockets (ss -tuln: {_last_line(listening)}), so not tell whether the "
                    "study's ports are free (iproute2's ss)"]
        busy = set()
        for line in listening.splitlines():
            fields = line.split()
            if len(fields) >= 5 and fields[0] in ("tcp", "udp") and ":" in fields[4]:
                port = fields[4].rsplit(":", 1)[1]
                if port.isdigit():
                    busy.add((fields[0], int(port)))
        return [f"{host}: {protocol.upper()} port {port} is in use, and the study's passive needs it for {what} "
                f"(base_port = {self.spec.base_port}: passives on base_port + 10 i, userland SCTP on UDP 9899 + i)"
                for protocol, port, what in self.study_ports(bed) if (protocol, port) in busy]

    def summary(self):
        """One line of what preflight() found when it found no problem."""
        pairs = "; ".join(f"pair {b.pair.number}: {b.pair.active} -> {b.pair.passive}, {len(b.paths)} path(s) on "
                          f"{'/'.join(b.devices['active'])} -> {'/'.join(b.devices['passive'])}" for b in self.beds)
        ports = len(self.study_ports(self.beds[0])) if self.beds else 0
        return (f"{len(self.remotes)} host(s) reachable, their netperfmeters compatible with "
                f"{self.tools.version('netperfmeter')}, "
                f"the study's stacks there; {pairs}; routes by the paths' interfaces; "
                + (f"{ports} ports free on the passive host(s); " if ports else "the running service's ports; ")
                + (f"clock offsets within {self.spec.max_clock_offset_ms:g} ms; " if self.spec.max_clock_offset_ms
                   is not None else "")
                + "control ports reachable over every path")

    def _clock_problems(self, bed, offsets):
        bound = self.spec.max_clock_offset_ms
        found = {}
        out = []
        for host in (bed.pair.active, bed.pair.passive):
            if host not in offsets:
                continue
            offset, source = offsets[host]
            if offset is None:
                out.append(f"{host}: cannot tell its clock offset ({source}), which max_clock_offset_ms needs")
            else:
                found[host] = (offset, source)
        if len(found) == 2:
            (a, (oa, sa)), (p, (op, sp)) = found.items()
            if oa + op > bound:
                out.append(f"pair {bed.pair.number}: the clocks of {a} ({oa:.3f} ms off, {sa}) and {p} ({op:.3f} ms "
                           f"off, {sp}) may differ by {oa + op:.3f} ms, above max_clock_offset_ms = {bound:g}: "
                           "one-way delays between them would be wrong")
        return out

    def _control_port_problems(self, bed):
        """The passive's control port from the active host over every path: the running service,
        or a passive started for this check."""
        out = []
        bed.setup()
        service = self.spec.service
        port = self.port_of(0)
        passive = None
        log_path = os.path.join(self.control_dir, f"preflight-{bed.pair.number}.log")
        try:
            if service is None:
                with open(log_path, "w") as log:
                    passive = RemoteProcess(bed.hosts["passive"], bed.workdir["passive"],
                                            [self.spec.netperfmeter, str(port), "-nodisplay",
                                             f"--sctp-udp-port={self.udp_port_of(0)}"], log)
                try:
                    self._wait_for_passive(passive, log_path)
                except LabError as e:
                    return [f"{bed.pair.passive}: {e}"]
            for i, path in enumerate(bed.paths):
                target = f"/dev/tcp/{path.passive}/{port + 1}"
                r = bed.hosts["active"].run(f"timeout 5 bash -c {shlex.quote('exec 3<>' + target)}", timeout=20)
                if r.returncode != 0:
                    what = "the running netperfmeter.service's" if service else "the passive's"
                    out.append(f"{bed.pair.active}: cannot reach {what} control port {path.passive}:{port + 1} "
                               f"over path {i + 1} ({path.name}): {_last_line(r.stderr, 'no answer within 5 s')}")
        finally:
            if passive is not None:
                self._stop(passive)
        return out

    def close(self):
        """Removes the work directories on the hosts and closes the ssh connections."""
        for bed in self.beds:
            bed.cleanup()
        for remote, directory in self.cross_dirs:
            try:
                remote.run(f"rm -rf {shlex.quote(directory)}")
            except LabError:
                pass
        for remote in self.remotes.values():
            try:
                remote.close()
            except (OSError, subprocess.TimeoutExpired):
                pass
        subprocess.run(["rm", "-rf", "--one-file-system", self.control_dir], check=False)

    # -- the runs ----------------------------------------------------------------------------
    def check_congestion_controls(self):
        """Done per host by preflight()."""

    def _topology_for(self, values):
        bed = self.local.bed
        bed.up()
        if self.needs_tls() and not bed.tls:
            # the results directory's certificate and key to the passive host, its CA to the active one
            local = tls.paths(self.outdir)
            for name, path in self._tls_files(bed).items():
                side = "active" if name == "ca.pem" else "passive"
                bed.hosts[side].check(f"mkdir -p {shlex.quote(os.path.dirname(path))}")
                with open(local[name], "rb") as f:
                    bed.hosts[side].put(f.read(), path)
            bed.tls = True
        return bed

    def _tls_files(self, bed):
        """The QUIC pairs' TLS files on the hosts: key and certificate in the passive's work
        directory, the CA in the active's (copied there from the results directory's tls/)."""
        return {name: f"{bed.workdir['active' if name == 'ca.pem' else 'passive']}/{tls.FOLDER}/{name}"
                for name in tls.FILES}

    def _teardown(self):
        """The hosts stay as they are; their work directories go in close()."""

    def _active_options(self):
        service = self.spec.service
        return [f"--auth-key-file={service.key_file}"] if service and service.key_file else []

    def _commands(self, bed, values, rep=None):
        """[(flows, passive command or None (the running service), active command)]: a netperfmeter
        pair per flow (the QUIC flows in one), as on the namespace test beds."""
        pairs = super()._commands(bed, values, rep)
        return [(f, None, active) for f, _, active in pairs] if self.spec.service else pairs

    def _cross_commands(self, bed, flows):
        """[(cross traffic, passive command, active command)] of the study's cross-traffic hosts:
        each loads its path towards a passive of its own on the pair's passive host."""
        spec, out = self.spec, []
        for k, x in enumerate(spec.cross_traffic):
            port = spec.base_port + 10 * (flows + k) if spec.service is None else spec.service.port
            udp = 9899 + flows + k if spec.service is None else spec.service.sctp_udp_port
            passive = None if spec.service else [spec.netperfmeter, str(port), "-nodisplay", f"--sctp-udp-port={udp}"]
            active = [spec.netperfmeter, f"{bed.address('passive', x.path - 1)}:{port}", "-control-over-tcp",
                      f"--sctp-remote-udp-port={udp}", f"-runtime={self.study.runtime:g}", "-nodisplay",
                      "-scalar=cross.sca.bz2", "--json=cross.json", *self._active_options(), *x.flows]
            out.append((x, passive, active))
        return out

    def _start(self, mine, remote, directory, argv, log_path):
        with open(log_path, "w") as log:
            p = RemoteProcess(remote, directory, argv, log)
        mine.append(p)
        with self.lock:
            self.current.append(p)
        return p

    def _fetch(self, remote, directory, local):
        """The files of a directory on a host (not the pid file) into a local one, with tar over ssh."""
        r = remote.run(f"tar -C {shlex.quote(directory)} --exclude=./.pid -cf - .", timeout=300, binary=True)
        if r.returncode != 0:
            raise LabError(f"{remote}: fetching {directory}: {_last_line(r.stderr.decode(errors='replace'))}")
        os.makedirs(local, exist_ok=True)
        t = subprocess.run(["tar", "-C", local, "--no-same-owner", "--no-same-permissions", "-xf", "-"],
                           input=r.stdout, capture_output=True)
        if t.returncode != 0:
            raise LabError(f"unpacking the files of {remote}:{directory}: "
                           f"{_last_line(t.stderr.decode(errors='replace'))}")

    def _attempt(self, bed, values, partial, rep):
        if self.stopping:
            raise Interrupted("stopping")
        pairs = self._commands(bed, values, rep)
        groups = [g for g, _, _ in pairs]
        cross = self._cross_commands(bed, len(pairs))
        name = os.path.basename(partial)
        work = {side: f"{bed.workdir[side]}/{name}" for side in ("active", "passive")}
        crosswork = {}  # cross traffic number -> its directory on its host
        meta = metadata(bed)
        with open(os.path.join(partial, "environment.txt"), "w") as env:
            env.write(f"kernel: active {meta['active']['uname']}; passive {meta['passive']['uname']}\n")
            env.write(f"netperfmeter: active {meta['active']['versions']['netperfmeter']}; "
                      f"passive {meta['passive']['versions']['netperfmeter']}; "
                      f"lab {self.tools.version('netperfmeter')}\n")
            env.write(f"python: {sys.version.split()[0]}\n")
            env.write(f"variables: {json.dumps(values)}\n")
            for group, passive_cmd, active_cmd in pairs:
                env.write(f"{pair_name(group)} passive: "
                          + (f"{bed.pair.passive}: {shlex.join(passive_cmd)}\n" if passive_cmd
                             else f"{bed.pair.passive}: the running netperfmeter.service\n"))
                env.write(f"{pair_name(group)} active: {bed.pair.active}: {shlex.join(active_cmd)}\n")
            for x, passive_cmd, active_cmd in cross:
                env.write(f"cross traffic {x.number}: {x.host}: {shlex.join(active_cmd)}\n")
            env.write(bed.describe())
        mine = []
        before = after = None
        codes, ccs = [], {}
        try:
            self._wait_for_closed(bed, len(pairs), partial)
            for side in ("active", "passive"):
                dirs = [f"{work[side]}/f{i}" for i in range(len(pairs))] + \
                       [f"{work[side]}/x{x.number}" for x, _, _ in cross]
                bed.hosts[side].check("mkdir -p " + " ".join(shlex.quote(d) for d in dirs))
            for x, _, _ in cross:
                crosswork[x.number] = self.remotes[x.host].check("mktemp -d /tmp/npmlab.XXXXXXXX").strip()
                with self.lock:
                    self.cross_dirs.append((self.remotes[x.host], crosswork[x.number]))
            passives = []
            for i, (_, passive_cmd, _) in enumerate(pairs):
                os.makedirs(os.path.join(partial, f"f{i}"))
                if passive_cmd:
                    passives.append((self._start(mine, bed.hosts["passive"], f"{work['passive']}/f{i}", passive_cmd,
                                                 os.path.join(partial, f"f{i}", "passive.log")),
                                     os.path.join(partial, f"f{i}", "passive.log")))
            for x, passive_cmd, _ in cross:
                os.makedirs(os.path.join(partial, f"x{x.number}"))
                if passive_cmd:
                    log = os.path.join(partial, f"x{x.number}", "passive.log")
                    passives.append((self._start(mine, bed.hosts["passive"], f"{work['passive']}/x{x.number}",
                                                 passive_cmd, log), log))
            for p, log in passives:
                self._wait_for_passive(p, log)
            before = bed.counters()
            # Flows from several hosts load the paths together: every active sends its START at
            # one time (netperfmeter --start-at), late enough for all of them to be launched.
            timed = []
            if cross:
                start_at_us = time.time_ns() // 1000 + int((START_MARGIN_S + START_PER_ACTIVE_S
                                                            * (len(pairs) + len(cross))) * 1e6)
                timed = [f"--start-at={start_at_us // 1000000}.{start_at_us % 1000000:06d}"]
                if self.spec.shared_clock:
                    timed.append("--start-at-unsynchronised")
                with open(os.path.join(partial, "environment.txt"), "a") as env:
                    env.write(f"synchronised start: every active with {' '.join(timed)}\n")
            crossing = [self._start(mine, self.remotes[x.host], crosswork[x.number], _with(active_cmd, timed),
                                    os.path.join(partial, f"x{x.number}", "active.log"))
                        for x, _, active_cmd in cross]
            actives = [self._start(mine, bed.hosts["active"], f"{work['active']}/f{i}", _with(active_cmd, timed),
                                   os.path.join(partial, f"f{i}", "active.log"))
                       for i, (_, _, active_cmd) in enumerate(pairs)]
            if self.spec.service is None:  # the service's connections of all flows share its ports
                ccs = self._ccs_while_running(bed, groups, actives,
                                              [os.path.join(partial, f"f{i}", "active.log") for i in range(len(pairs))])
            deadline = time.monotonic() + self.study.runtime + 90
            for a in actives + crossing:
                try:
                    codes.append(a.wait(timeout=max(1, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    for other in actives + crossing:
                        self._stop(other, timeout=5)
                    raise LabError(f"an active netperfmeter did not finish within {self.study.runtime + 90:g} s")
            with open(os.path.join(partial, "environment.txt"), "a") as env:
                env.write(f"exit status: {' '.join(map(str, codes[:len(actives)]))}\n")  # of each pair's active
                if crossing:
                    env.write(f"cross traffic exit status: {' '.join(map(str, codes[len(actives):]))}\n")
            after = bed.counters()
        finally:
            for p in reversed(mine):
                self._stop(p)
            with self.lock:
                self.current = [p for p in self.current if p not in mine]
        if self.stopping:
            raise Interrupted("stopping")
        for i in range(len(pairs)):
            self._fetch(bed.hosts["active"], f"{work['active']}/f{i}", os.path.join(partial, f"f{i}"))
        for x, _, _ in cross:
            self._fetch(self.remotes[x.host], crosswork[x.number], os.path.join(partial, f"x{x.number}"))
        for side in ("active", "passive"):
            bed.hosts[side].run(f"rm -rf {shlex.quote(work[side])}")
        for side in ("active", "passive"):
            r = bed.hosts[side].run("tc -s qdisc show 2>&1")
            meta[side]["qdisc_after"] = r.stdout if r.returncode == 0 else None
        with open(os.path.join(partial, "hosts.json"), "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
        for x, _, _ in cross:
            code = codes[len(pairs) + x.number - 1]
            if code != 0:
                with open(os.path.join(partial, f"x{x.number}", "active.log"), errors="replace") as f:
                    raise LabError(f"the cross traffic of {x.host} failed (exit {code}): {_last_line(f.read())}")
        judged = self._conclude(bed, partial, groups, codes[:len(pairs)], before, after, None, ccs, None)
        if cross:
            self._judge_start(partial, judged, start_at_us,
                              [os.path.join(partial, f"f{i}", "run.json") for i in range(len(pairs))]
                              + [os.path.join(partial, f"x{x.number}", "cross.json") for x, _, _ in cross])
        return judged

    def _judge_start(self, partial, judged, start_at_us, documents):
        """The synchronised start's evidence: when each passive handled its START (the first
        statistics event of its session, in each active's JSON document). STARTs handled more
        than START_SKEW_LIMIT_S apart did not load the paths together: the run is invalid."""
        handled = []
        for path in documents:
            try:
                first = stats.load_document(path)["totals"]["passive"]["first_us"]
            except (OSError, ValueError, KeyError, TypeError):
                first = None
            handled.append(first if isinstance(first, int) and not isinstance(first, bool) else None)
        entry = {"start_at_us": start_at_us, "handled_us": handled}
        known = [h for h in handled if h is not None]
        if len(known) < len(handled):
            judged["unverified"].append("synchronised start: a passive's START time is unknown")
        if len(known) >= 2:
            entry["skew_s"] = (max(known) - min(known)) / 1e6
            if entry["skew_s"] > START_SKEW_LIMIT_S:
                judged["problems"].append(f"synchronised start: the passives handled the STARTs "
                                          f"{entry['skew_s'] * 1e3:.1f} ms apart (at most "
                                          f"{START_SKEW_LIMIT_S * 1e3:g} ms)")
                judged["valid"] = False
        judged["synchronised_start"] = entry
        with open(os.path.join(partial, "evidence.json"), "w") as f:
            json.dump(judged, f, indent=1, sort_keys=True)
        with open(os.path.join(partial, "environment.txt"), "a") as env:
            late = ", ".join("unknown" if h is None else f"{(h - start_at_us) / 1e3:+.3f} ms" for h in handled)
            env.write(f"synchronised start: STARTs handled at {late} from the start time\n")

    # -- several pairs at once -----------------------------------------------------------------
    def _run_jobs(self, jobs, progress):
        """The jobs in their order, each on the next free pair; up to `parallel` at once."""
        if self.parallel <= 1:
            self.local.bed = self.beds[0]
            return super()._run_jobs(jobs, progress)
        work = queue.Queue()
        for job in jobs:
            work.put(job)
        failures = []
        guarded = _LockedProgress(progress, self.lock)

        def worker(bed):
            self.local.bed = bed
            while not self.stopping and not failures:
                try:
                    values, rep = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    self.run_one(values, rep, guarded)
                except BaseException as e:  # noqa: BLE001 - handed to the main thread
                    failures.append(e)
                    return

        threads = [threading.Thread(target=worker, args=(bed,), daemon=True) for bed in self.beds[:self.parallel]]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.2)
        except BaseException:
            self.stopping = True
            with self.lock:
                running = list(self.current)
            for p in running:
                self._stop(p, timeout=3)
            for t in threads:
                t.join(60)
            raise
        real = [e for e in failures if not isinstance(e, Interrupted)]
        if real:
            raise real[0]
        if failures:
            raise failures[0]


class _LockedProgress:
    """The progress display of runs in several threads: one line at a time."""

    def __init__(self, progress, lock):
        self.progress, self.lock = progress, lock
        self.stream = progress.stream

    def start(self, text, estimate):
        with self.lock:
            self.progress.start(text, estimate)

    def finish(self, text):
        with self.lock:
            self.progress.finish(text)
