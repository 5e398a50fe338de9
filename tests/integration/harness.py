"""Helpers for the integration tests: run a passive and an active netperfmeter, read the
result files (plain or bzip2), build network namespaces (with the lab's topology module, src/lab).
Standard library otherwise."""

import bz2
import gzip
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

# The tests' shared modules (tests/lib: the NPMP codec).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))

NETPERFMETER = os.environ.get("NETPERFMETER", "netperfmeter")


def skip_unless_root(reason="needs root"):
    return unittest.skipUnless(os.geteuid() == 0, reason)


def wait_for_port(port, host="127.0.0.1", timeout=10.0, proto=socket.SOCK_STREAM):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.socket(socket.AF_INET, proto) as s:
                s.settimeout(0.2)
                s.connect((host, port))
                return True
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port}")


def _free(port, kind):
    """Whether nothing holds `port` (a socket in TIME_WAIT does not count: netperfmeter binds
    with SO_REUSEADDR, as this probe does)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


# Ports. Tests that run at the same time must not share a port, and a port of the kernel's
# ephemeral range (32768 and up here) may be taken by any outgoing connection at any moment. So
# each test process owns a block of ports below that range, claimed with a lock file (held
# until the process ends, whatever way it ends) and checked free with the kernel; all its ports
# come from there.
PORT_BLOCK = 250
_PORT_RANGE = (20000, 32500)
_LOCK_DIR = os.path.join(tempfile.gettempdir(), "npm-test-ports")
_block = {"fd": None, "base": None, "next": 0}


def _claim_block(after=None):
    """Claims the next free block (after the block starting at `after`); the earlier ones
    stay claimed until the process ends."""
    import fcntl
    os.makedirs(_LOCK_DIR, exist_ok=True)
    first = _PORT_RANGE[0] if after is None else after + PORT_BLOCK
    for base in range(first, _PORT_RANGE[1] - PORT_BLOCK + 1, PORT_BLOCK):
        fd = os.open(os.path.join(_LOCK_DIR, f"{base}.lock"), os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _block.update(fd=fd, base=base, next=0)
        return
    raise RuntimeError(f"all test port blocks in {_PORT_RANGE} are taken ({_LOCK_DIR})")


def take_ports(n, kinds=(socket.SOCK_STREAM, socket.SOCK_DGRAM)):
    """The first of `n` consecutive ports of this process's block that are free (for TCP and UDP)."""
    if n > PORT_BLOCK:
        raise ValueError(f"{n} ports are more than a block of {PORT_BLOCK}")
    if _block["fd"] is None:
        _claim_block()
    while True:
        while _block["next"] + n <= PORT_BLOCK:
            first = _block["base"] + _block["next"]
            _block["next"] += 1
            if all(_free(p, k) for p in range(first, first + n) for k in kinds):
                _block["next"] = first - _block["base"] + n
                return first
        _claim_block(after=_block["base"])  # this block is used up (or held by others): the next


def free_base_port(udp_ports=0, span=0):
    """A netperfmeter base port BASE whose neighbours BASE-1 (MPTCP) .. BASE+1 (control) and
    `span` more above are free, and `udp_ports` free UDP ports for usrsctp's encapsulation:
    (BASE, [UDP...]). From this process's block, so tests running together never collide."""
    base = take_ports(3 + span) + 1
    return base, [take_ports(1, (socket.SOCK_DGRAM,)) for _ in range(udp_ports)]


# The userland SCTP (UDP encapsulation) port of each passive this process started in its own
# namespace, by base port: run_active() tells an active the port of the passive it addresses.
_passive_udp = {}


class Passive:
    """A passive netperfmeter on `port`, stopped (SIGINT) at the end of a with-block."""

    def __init__(self, port, *args, netns=None, cwd=None):
        self.port = port
        # Its own userland SCTP port (usrsctp's UDP encapsulation; 9899 by default): passives of
        # tests that run at the same time on this host must not share it.
        given = [a.split("=", 1)[1] for a in args if a.startswith("--sctp-udp-port=")]
        if given:
            self.udp = int(given[0])
        elif netns is None:
            self.udp = take_ports(1, (socket.SOCK_DGRAM,))
            args = (*args, f"--sctp-udp-port={self.udp}")
        else:
            self.udp = 9899
        if netns is None:
            _passive_udp[port] = self.udp
        cmd = [NETPERFMETER, str(port), "-nodisplay", *args]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        self.log = tempfile.NamedTemporaryFile(prefix="passive-", suffix=".log", delete=False)
        # A crash leaves a core in its working directory (core_pattern permitting), which
        # crash_report() reads: a rare crash is diagnosed the first time it is seen.
        self.cwd = cwd or os.getcwd()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log, cwd=cwd,
                                     preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (-1, -1)))
        self.netns = netns
        # a log level above info (or -q) hides the line that says it is ready
        self.quiet = any(re.fullmatch(r"-?-loglevel=[3-5]|-q|--quiet", a) for a in args)

    def listening(self):
        """Whether its TCP control listener is open (for a passive whose log level hides the
        line that says it is ready)."""
        cmd = ["ss", "-Hltn", f"sport = :{self.port + 1}"]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        return bool(subprocess.run(cmd, capture_output=True, text=True).stdout.strip())

    def __enter__(self):
        # Ready when it says so (after every listener is open), in a namespace or not.
        deadline = time.monotonic() + 15
        while "waiting for incoming connections" not in self.output() and not (self.quiet and self.listening()):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the passive ended ({self.proc.returncode}): {self.output()[-500:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the passive on port {self.port} did not start: {self.output()[-500:]}")
            time.sleep(0.02)
        return self

    def alive(self):
        return self.proc.poll() is None

    def crash_report(self):
        """After the passive died of a signal: the backtraces of its threads from its core file
        (gdb), or why there are none."""
        if self.proc.poll() is None or self.proc.returncode >= 0:
            return "it did not die of a signal"
        with open("/proc/sys/kernel/core_pattern") as f:
            pattern = f.read().strip()
        cores = [os.path.join(self.cwd, name) for name in (f"core.{self.proc.pid}", "core")
                 if os.path.exists(os.path.join(self.cwd, name))]
        if not cores:
            return f"no core file in {self.cwd} (core_pattern {pattern!r})"
        if shutil.which("gdb") is None:
            return f"core file {cores[0]} (no gdb here to read it)"
        program = NETPERFMETER if os.path.isabs(NETPERFMETER) else shutil.which(NETPERFMETER)
        out = subprocess.run(["gdb", "-batch", "-ex", "thread apply all bt 25", program, cores[0]],
                             capture_output=True, text=True, timeout=120).stdout
        return f"core file {cores[0]}:\n" + "\n".join(line for line in out.splitlines()
                                                      if line.startswith(("#", "Thread")))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def __exit__(self, exc_type, exc, tb):
        self.stop()
        if exc_type is not None:  # the passive's side of a failure (a sanitizer's report, its error)
            log = self.output()
            if len(log) > 24000:  # a sanitizer's report: what matters is at its top
                log = f"{log[:16000]}\n[... {len(log) - 24000} characters ...]\n{log[-8000:]}"
            sys.stderr.write(f"--- the passive's log (exit status {self.proc.returncode}):\n{log}\n---\n")
        os.unlink(self.log.name)


class Capture:
    """tshark writing what `interface` carries (a capture filter) to `path` while the with-block
    runs; ready when tshark says it is capturing, stopped with SIGINT at the end, which writes
    out everything it took."""

    def __init__(self, path, capture_filter, interface="lo", netns=None, snaplen=None):
        self.path = path
        self.netns = netns
        # A marker datagram to a port of its own tells when the capture runs (tshark says
        # "Capturing on" a moment before it takes packets).
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            self.marker = s.getsockname()[1]
        cmd = ["tshark", "-i", interface, "-f", f"({capture_filter}) or (udp dst port {self.marker})", "-w", path,
               "-q", "-B", "32"]
        if snaplen:
            cmd += ["-s", str(snaplen)]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def _send_marker(self, text="npm-capture-marker"):
        code = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                f"s.sendto(b'{text}', ('127.0.0.1', {self.marker}))")
        cmd = [sys.executable, "-c", code]
        subprocess.run(["ip", "netns", "exec", self.netns, *cmd] if self.netns else cmd, check=False)

    def __enter__(self):
        deadline = time.monotonic() + 30
        seen = []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if "Capturing on" in line:
                break
            if not line and self.proc.poll() is not None:
                deadline = 0
            seen.append(line)
        while time.monotonic() < deadline:
            self._send_marker()
            time.sleep(0.05)
            try:
                with open(self.path, "rb") as f:
                    if b"npm-capture-marker" in f.read():
                        return self
            except FileNotFoundError:
                pass
        self.proc.kill()
        raise RuntimeError("tshark did not start capturing: " + "".join(seen[-3:]).strip())

    def _tail_has(self, text, size=1 << 20):
        try:
            with open(self.path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.path) - size))
                return text.encode() in f.read()
        except OSError:
            return False

    def __exit__(self, *exc):
        # Everything before a last marker is in the file once the marker is.
        deadline = time.monotonic() + 15
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._send_marker("npm-capture-end")
            time.sleep(0.05)
            if self._tail_has("npm-capture-end"):
                break
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def without_markers(self):
        """Takes the marker datagrams out of the capture file, once it is written (for checks
        that count every datagram)."""
        if LAB_SRC not in sys.path:
            sys.path.insert(0, LAB_SRC)
        from npmlab import tshark
        clean = self.path + ".clean"
        tshark.copy_matching(self.path, f"!(udp.port == {self.marker})", clean, error=AssertionError)
        os.replace(clean, self.path)

    def fields(self, display_filter, *fields, decode=()):
        """Rows (lists of strings, one per field) of the packets that match `display_filter`;
        `decode`: tshark -d rules (e.g. "udp.port==9899,sctp")."""
        if LAB_SRC not in sys.path:
            sys.path.insert(0, LAB_SRC)
        from npmlab import tshark  # the lab's and the tests' one tshark reader
        return tshark.read_fields(self.path, display_filter, fields, decode, error=AssertionError)


def active_args(target, args):
    """`args`, and the userland SCTP port of the passive at `target` if this process started it
    and the arguments do not name one."""
    port = target.rsplit(":", 1)[-1]
    if port.isdigit() and int(port) in _passive_udp and not any(a.startswith("--sctp-remote-udp-port") for a in args):
        return [*args, f"--sctp-remote-udp-port={_passive_udp[int(port)]}"]
    return list(args)


class WithPassive(unittest.TestCase):
    """Test classes whose tests share one passive (default options) on ports of their own
    (cls.port), and a scratch directory (cls.dir, named with DIR_PREFIX)."""

    DIR_PREFIX = "npm-test-"

    @classmethod
    def setUpClass(cls):
        cls.port, _ = free_base_port()
        cls.dir = tempfile.mkdtemp(prefix=cls.DIR_PREFIX)
        cls.passive = Passive(cls.port).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.passive.__exit__(None, None, None)


def rss_mib(pid):
    """The resident memory of process `pid` in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class Attackers:
    """Threads that run attack(source, stop, counts) for each of `sources` (stop: a
    threading.Event to return at; counts: a dict the attack counts its connections in, by
    source) for as long as the with-block lasts. mark() takes the passive's log length and
    memory; leaving the block, before the attackers stop, log_growth and rss_growth are what
    they grew since, and opened what the attackers opened."""

    def __init__(self, passive, attack, sources):
        self.passive, self.stop, self.counts = passive, threading.Event(), {}
        self.threads = [threading.Thread(target=attack, args=(source, self.stop, self.counts), daemon=True)
                        for source in sources]
        self.base = None

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def opened_so_far(self):
        return sum(self.counts.values())

    def mark(self):
        self.base = (len(self.passive.output()), rss_mib(self.passive.proc.pid))

    def __exit__(self, *exc):
        self.opened = self.opened_so_far()
        try:
            if self.base is not None and self.passive.alive():
                self.log_growth = len(self.passive.output()) - self.base[0]
                self.rss_growth = rss_mib(self.passive.proc.pid) - self.base[1]
        finally:
            self.stop.set()
            for t in self.threads:
                t.join(10)
        return False


def wait_for_text(read, text, timeout=15.0, proc=None, count=1):
    """Polls read() (a log's text) until `text` is in it `count` times; fails at the deadline or
    when `proc` has ended without it."""
    deadline = time.monotonic() + timeout
    while read().count(text) < count:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended (exit {proc.returncode}) before \"{text}\": {read()[-500:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no \"{text}\" within {timeout:g} s: {read()[-500:]}")
        time.sleep(0.02)


class Active:
    """An active netperfmeter started in the background (its log in a file), for tests that act
    while it runs: started() waits until its measurement runs."""

    def __init__(self, target, *args, cwd=None, netns=None):
        if netns is None:
            args = active_args(target, args)
        cmd = [NETPERFMETER, target, "-nodisplay", *args]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        self.log = tempfile.NamedTemporaryFile(prefix="active-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=self.log)

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def started(self, timeout=15.0):
        wait_for_text(self.output, "Starting measurement", timeout, self.proc)
        return self

    def finish(self, timeout=60):
        """Its exit status once it ends by itself."""
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            os.unlink(self.log.name)

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        os.unlink(self.log.name)


# The reference NetPerfMeter (2.0.10), built outside this repository and installed here by hand
# on the project's machines (tests/README.md), or named by NPM_REFERENCE_NETPERFMETER.
REFERENCE_INSTALLED = "/usr/local/lib/netperfmeter-reference-2.0.10/bin/netperfmeter"


def reference_netperfmeter():
    """The reference binary to interoperate with, or "" (then its tests skip and say why)."""
    path = os.environ.get("NPM_REFERENCE_NETPERFMETER", "") or REFERENCE_INSTALLED
    return path if os.access(path, os.X_OK) else ""


def run_active(target, *args, cwd=None, timeout=60, netns=None, check=True):
    if netns is None:
        args = active_args(target, args)
    cmd = [NETPERFMETER, target, "-nodisplay", *args]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed with {result.returncode}:\n{result.stderr}")
    return result


def descriptors(passive):
    return len(os.listdir(f"/proc/{passive.proc.pid}/fd"))


def settled(measure, timeout=10.0, quiet=0.3):
    """measure()'s value once it has not changed for `quiet` seconds (polled)."""
    deadline = time.monotonic() + timeout
    value, since = measure(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = measure()
        if now != value:
            value, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return value


def settled_descriptors(passive, port, cwd):
    """The passive's descriptors once its SCTP stack has opened all of its own (after one run)
    and the run's sockets are closed."""
    run_active(f"127.0.0.1:{port}", "-x", "-runtime=0.2", "-tcp", "const10:const100", cwd=cwd, timeout=30)
    return settled(lambda: descriptors(passive))


def descriptors_while_killed(passive, args, cwd):
    """Starts an active with `args` (SCTP control), waits until the passive runs its measurement,
    kills the active (SIGKILL: no goodbye) and returns the passive's descriptor count while it
    was running."""
    measuring = passive.output().count("Starting measurement")
    before = descriptors(passive)
    active = subprocess.Popen([NETPERFMETER, args[0], *active_args(args[0], args[1:])], cwd=cwd,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15

    def started():  # its log says so; a quiet one: its data connections are open
        if passive.quiet:
            return descriptors(passive) > before + 1
        return passive.output().count("Starting measurement") > measuring

    while not started():
        if active.poll() is not None or time.monotonic() > deadline:
            active.kill()
            raise AssertionError(f"the active's measurement did not start: {passive.output()[-500:]}")
        time.sleep(0.02)
    running = settled(lambda: descriptors(passive), timeout=3, quiet=0.2)
    active.kill()
    active.wait()
    return running


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:3] == b"BZh":
        data = bz2.decompress(data)
    elif data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode()


SCALAR = re.compile(r'^scalar\s+"([^"]*)"\s+"([^"]*)"\s+(\S+)\s*$')


def read_scalars(path):
    """{(object, name): float} of a .sca file; every line must parse."""
    values = {}
    for number, line in enumerate(read_text(path).splitlines(), 1):
        m = SCALAR.match(line)
        if not m:
            raise AssertionError(f"{path}:{number}: not a scalar line: {line!r}")
        values[(m.group(1), m.group(2))] = float(m.group(3))
    return values


def read_vector(path, columns):
    """Rows (dicts) of a vector file with `columns` header names and a leading line number."""
    lines = read_text(path).splitlines()
    header = lines[0].split("\t")
    if header != columns:
        raise AssertionError(f"{path}: header {header} != {columns}")
    rows = []
    for number, line in enumerate(lines[1:], 2):
        fields = line.split("\t")
        if len(fields) != len(columns) + 1:
            raise AssertionError(f"{path}:{number}: {len(fields)} fields, expected {len(columns) + 1}")
        rows.append(dict(zip(["Line"] + columns, fields)))
    return rows


MEASUREMENT_COLUMNS = ["AbsTime", "RelTime", "Interval", "FlowID", "Description", "Jitter", "Action",
                       "AbsBytes", "AbsPackets", "AbsFrames", "RelBytes", "RelPackets", "RelFrames"]
PATH_COLUMNS = ["AbsTime", "RelTime", "Path", "Local", "Remote", "State", "Cwnd", "Ssthresh", "RTT", "RTTVar", "RTO",
                "MTU", "BytesSent", "BytesAcked", "BytesReceived", "Retransmissions", "Lost", "Unacked",
                "DeliveryRate", "PacingRate", "Rwnd", "Pending", "FastRetrans", "TimerRetrans", "Rescheduled",
                "DropReported", "SmartFrIgnored"]
CONNECTION = -1  # the Path of the rows of a whole MPTCP connection or SCTP association


def number(text):
    """A vector field as a float; NA (not available) as None."""
    return None if text == "NA" else float(text)


def read_paths(path, connection=False):
    """{path id: [rows]} of a per-path vector; the connection's rows (Path -1) only if asked for."""
    paths = {}
    for row in read_vector(path, PATH_COLUMNS):
        if connection or int(row["Path"]) != CONNECTION:
            paths.setdefault(int(row["Path"]), []).append(row)
    return paths


def read_connection(path):
    """The rows of the whole MPTCP connection or SCTP association in a per-path vector."""
    return read_paths(path, connection=True).get(CONNECTION, [])


FLOW_COLUMNS = ["AbsTime", "RelTime", "SeqNumber", "AbsBytes", "AbsPackets", "AbsFrames", "RelBytes",
                "RelPackets", "RelFrames", "Delay", "PrevPacketDelayDiff", "Jitter"]


def read_config(path):
    """KEY="value" lines parsed as data (backslash escapes), never executed."""
    config = {}
    for line in read_text(path).splitlines():
        if not line.strip():
            continue
        key, _, value = line.partition("=")
        if value.startswith('"') and value.endswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        config[key] = value
    return config


LAB_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src", "lab")


def lab_topology():
    """The lab's topology module (npmlab.topology, src/lab): the namespaces of these tests."""
    if LAB_SRC not in sys.path:
        sys.path.insert(0, LAB_SRC)
    from npmlab import topology
    return topology


def two_paths(*paths, prefix="npmit"):
    """A lab Disjoint topology of `paths` (topology.path()), up: namespaces named after `prefix`
    and this process, stale ones of earlier runs of the prefix removed. Call down() at the end."""
    topology = lab_topology()
    topology.remove_stale(prefix)
    topo = topology.Disjoint(list(paths), prefix=prefix)
    topo.up()
    return topo


def bundled_usrsctp():
    """Whether netperfmeter links the bundled usrsctp (the second line of --version), whose patch
    series the tests of per-association settings and per-path counters need."""
    out = subprocess.run([NETPERFMETER, "--version"], capture_output=True, text=True, timeout=10).stdout
    return "bundled libusrsctp" in out


def tool_available(name):
    return shutil.which(name) is not None


def main():
    result = unittest.main(exit=False, verbosity=2).result
    if result.testsRun == len(result.skipped) and result.testsRun > 0:
        sys.exit(77)  # everything skipped: tell ctest
    sys.exit(0 if result.wasSuccessful() else 1)
