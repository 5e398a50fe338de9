"""The run loop: every parameter combination x repetition as real netperfmeter runs, then
createsummary, summary.csv and the plots.

Three classes: Runner, the runs (the loop over a test bed of testbed.py's protocol, the retries,
the evidence of each run); Statistics, what the complete runs say (metrics, intervals, runs.csv,
summary.csv, paired.csv, the verdicts, the tables); Report, the plots. A Runner hands its
results to its `statistics` and `report` (summarize(), plot()).

Each flow of a study runs in a netperfmeter pair of its own (an active in A's namespace, a
passive in P's, pair i on port 9000 + 10 i and userland SCTP over UDP port 9899 + i), all pairs
of a run started together: a reference flow shares no process, no SCTP stack and no UDP socket
with the multipath flow it is compared with. The QUIC flows of a run are the exception: they
share one pair, as streams of one QUIC connection (UDP port 9000 + 10 i - 1), with the results
directory's throw-away certificate (tls.py).

Runs are done in blocks: every repetition k is one block with each combination once, in an
order drawn from the recorded seed, so that the variants a study compares are measured
interleaved, and repetition k of two variants form a pair (paired comparisons, [compare]).
The repetitions are fixed before measuring (the study's, or --repetitions), or found by
Stein's two-stage procedure (--ci-target): a pilot of min_repetitions runs per combination
fixes how many runs give the wanted half-width, and the interval uses the pilot's variance.

Every run is checked against what its study asks for (evidence.py): a capture of its first
seconds, the congestion controls in force, the counters of queues, delay lines and MIBs. A run
that did not measure the asked-for configuration is kept, marked invalid and left out of the
summaries (counted there), never silently averaged. A run that fails (netperfmeter exits with
an error, a file is missing) is repeated (--retries); the failed attempt is a result about the
stack under test, not noise: its directory and error stay in the run's record, runs.csv and
summary.csv count the failed attempts, and the plots' captions say how many runs needed a
repetition.

Layout of a results directory DIR:
  DIR/lab.json                 what was run (study file, --quick, tools, the seed, the order)
  DIR/study.toml               a copy of the study file
  DIR/tls/                     QUIC flows only: the CA certificate and the passives' key and
                               certificate (tls.py)
  DIR/runs/<var>=<v>-...-r<k>/ one complete run: environment.txt (kernel, settings, qdiscs,
                               tool versions, the exact command lines), counters.json,
                               delay_lines.json (seeds, drops by cause, lateness), evidence.json,
                               capture.pcapng, settle.txt (the wait for an earlier run's
                               connections), and per pair i f<i>/ with its pair's run.config,
                               run.json (the figures the lab reads), run-{active,passive}.sca.bz2
                               (createsummary's input), active.log, passive.log; attempts.json
                               (the attempts it took, each failed one's error) and
                               failed-attempts/<n>/ (each failed attempt's directory as it was
                               left, with error.txt)
  DIR/runs/.partial-*          a run in progress (removed when it fails or is interrupted)
  DIR/runs/.attempts-*         the failed attempts of a run not yet complete (an interrupted
                               repetition keeps them: --resume counts them in)
  DIR/runs/.failed-*           a run that failed every attempt, each attempt's directory in it
  DIR/results.summary          createsummary's input; DIR/tables/ its tables
  DIR/runs.csv                 every run's metrics and validity; DIR/summary.csv means with
                               BCa intervals of the valid runs; DIR/paired.csv paired differences
  DIR/results.sqlite           all of it as one SQLite database: runs, every scalar, the metrics
                               per run, summary.csv (resultsdb.py)
  DIR/<metric>.pdf             one plot per metric (plot-netperfmeter-summary), runs as points,
                               summary.csv's intervals as error bars (what is drawn:
                               DIR/tables/lab-<metric>-plotted.csv)
"""

import bz2
import csv
import hashlib
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime

from . import evidence, expr, scalars, stats, testbed, tls, topology, verdict
from .errors import Interrupted, LabError  # noqa: F401  (runner.Interrupted, runner.LabError: their old home)

LEVEL = 0.95


class Tools:
    def __init__(self, paths):
        self.paths = paths

    def __getitem__(self, name):
        return self.paths.get(name) or name

    def version(self, name):
        try:
            out = subprocess.run([self[name], "--version"], capture_output=True, text=True, timeout=10)
            return (out.stdout or out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "unknown"


def label(values):
    return "-".join(f"{k}={v}" for k, v in values.items()) or "run"


def run_plotter(cmd, what):
    """Runs one of rplot's programs; a failure is a LabError with its last line of output."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr or r.stdout).strip().splitlines()[-1:]
        raise LabError(f"{os.path.basename(cmd[0])} failed for {what}: {last[0] if last else 'no output'}")


def duration(seconds):
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


class Progress:
    def __init__(self, total, stream=sys.stderr):
        self.total, self.done, self.stream = total, 0, stream
        self.tty = stream.isatty()
        self.began = time.monotonic()
        self.per_run = None

    def start(self, text, estimate):
        if self.per_run is None:
            self.per_run = estimate
        left = (self.total - self.done) * self.per_run
        line = f"[{self.done + 1}/{self.total}] ETA {duration(left)} {text}"
        if self.tty:
            self.stream.write("\r\033[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self, text):
        self.done += 1
        elapsed = time.monotonic() - self.began
        self.per_run = elapsed / self.done
        if not self.tty and text:
            self.stream.write(text + "\n")
            self.stream.flush()

    def grow(self, n):
        self.total += n

    def close(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _raise_interrupted(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


PAIR_STEP = 10


def pair_port(i):
    """The passive port of flow i's netperfmeter pair (its control port is one above)."""
    return topology.PASSIVE_PORT + PAIR_STEP * i


def pair_udp(i):
    """The passive's userland SCTP (UDP encapsulation) port of flow i's pair."""
    return 9899 + i


def pair_groups(flows):
    """The flows of each netperfmeter pair of a run, in order: a pair per flow, except that all
    QUIC flows share the pair of the first (one -quic option: one QUIC connection with a stream
    pair per flow, as the reference runs them)."""
    groups, quic = [], None
    for f in flows:
        if f.protocol != "quic":
            groups.append([f])
        elif quic is None:
            quic = [f]
            groups.append(quic)
        else:
            quic.append(f)
    return groups


def pair_name(group):
    """How environment.txt names a pair: "flow 2", or "flows 1,3" (QUIC flows in one pair)."""
    return f"flow {group[0].number}" if len(group) == 1 else "flows " + ",".join(str(f.number) for f in group)


def pair_dirs(run_dir):
    """The directories of a run's netperfmeter pairs (f0, f1, ...); a run made before flows had
    pairs of their own has its files at the top."""
    try:
        dirs = sorted((e for e in os.listdir(run_dir) if re.fullmatch(r"f\d+", e)), key=lambda e: int(e[1:]))
    except OSError:
        return []
    return [os.path.join(run_dir, d) for d in dirs] or [run_dir]


def pair_scalar_file(pair_dir, side):
    """The scalar file of one side of a pair (run-SIDE.sca.bz2, as the lab writes it, or .sca.gz or
    .sca: scalars.scalar_file()); the .bz2 name where there is none (to name in an error)."""
    return scalars.scalar_file(pair_dir, side) or os.path.join(pair_dir, f"run-{side}.sca.bz2")


def pair_scalars(pair_dir):
    """{(side, flow, name): value} of both sides of one pair: from its JSON document, or from
    its scalar files for runs made before the lab asked for the document; raises OSError,
    EOFError or ValueError."""
    document = os.path.join(pair_dir, "run.json")
    if os.path.exists(document):
        return stats.document_scalars(stats.load_document(document), document)
    figures = {}
    for side in scalars.SIDES:
        figures.update(stats.read_scalars(pair_scalar_file(pair_dir, side), side))
    return figures


def pair_cpu_idle(pair_dir, side):
    """The idle share of one side during the pair's measurement (percent); None if unknown."""
    document = os.path.join(pair_dir, "run.json")
    if os.path.exists(document):
        try:
            return stats.document_cpu_idle(stats.load_document(document), side)
        except (OSError, ValueError):
            return None
    return stats.read_cpu_idle(pair_scalar_file(pair_dir, side), side)


def flow_arguments(group):
    """The flow option of a pair's active: ["-PROTOCOL", FLOWSPEC, ...], each flow with its number
    in the study (goodput(i)) as id=."""
    flow = ["-" + group[0].protocol]
    for member in group:
        spec = member.argument()[1]
        if "id" not in evidence.flow_options(member.spec):
            spec += f":id={member.number}"
        flow.append(spec)
    return flow


VALIDATE = "--validate"  # netperfmeter: parse and check the whole command line, connect nowhere


def check_command_lines(study, netperfmeter):
    """Every active command line the study makes (each combination's pairs: its FLOWSPECs, the
    study's active options, the lab's own) through netperfmeter's own parser, `netperfmeter
    127.0.0.1:9000 --validate ...`, once each, in a scratch directory. Raises LabError with
    netperfmeter's line for the first it refuses; returns None when all passed, or why nothing
    was checked (a netperfmeter without --validate)."""
    seen = set()
    scratch = tempfile.mkdtemp(prefix="npmlab-validate-")
    try:
        for values in study.combinations():
            for i, group in enumerate(pair_groups(study.flows_for(values))):
                args = ["-control-over-tcp", f"--sctp-remote-udp-port={pair_udp(i)}", f"-runtime={study.runtime:g}",
                        "-nodisplay"]
                if study.warmup > 0:
                    args.append(f"--warmup={study.warmup:g}")
                args += study.args_for("active", values) + flow_arguments(group)
                if tuple(args) in seen:
                    continue
                seen.add(tuple(args))
                try:
                    r = subprocess.run([netperfmeter, f"127.0.0.1:{pair_port(i)}", VALIDATE, *args], cwd=scratch,
                                       capture_output=True, text=True, timeout=30)
                except (OSError, subprocess.TimeoutExpired) as e:
                    raise LabError(f"{netperfmeter} could not check the study's command lines: {e}")
                said = (r.stderr or r.stdout).strip().splitlines()
                if r.returncode == 0:
                    continue
                line = said[-1] if said else f"exit status {r.returncode}, no output"
                if f'unknown option "{VALIDATE}"' in line:
                    return f"{netperfmeter} has no {VALIDATE} (an older build)"
                line = re.sub(r"^netperfmeter: ", "", line)
                raise LabError(f"{study.path}: {label(values)}, {pair_name(group)}: netperfmeter refuses the active's "
                               f"command line: {line}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return None


def complete(run_dir):
    """A run counts as done when its directory exists (renamed into place at the end) and every
    pair's figures can be read, and its scalar files (createsummary's input) are there."""
    dirs = pair_dirs(run_dir)
    try:
        for d in dirs:
            pair_scalars(d)
            for side in scalars.SIDES:
                if not os.path.isfile(pair_scalar_file(d, side)):
                    return False
        return bool(dirs)
    except (OSError, EOFError, ValueError):
        return False


def read_run_scalars(run_dir):
    scalars = {}
    for d in pair_dirs(run_dir):
        scalars.update(pair_scalars(d))
    return scalars


def read_json(path):
    """The JSON document in `path`; None when there is none (or it is not JSON)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_evidence(run_dir):
    """evidence.json of a run ({} for a run made before runs were checked)."""
    return read_json(os.path.join(run_dir, "evidence.json")) or {}


def run_validity(judged):
    """"valid", "invalid" or "unchecked" (a run made before runs were checked) from its evidence.json."""
    return "unchecked" if not judged else ("valid" if judged.get("valid") else "invalid")


ATTEMPTS = "attempts.json"  # in a run's directory: {"attempts": n, "failed": [record, ...]}
FAILED_ATTEMPTS = "failed-attempts"  # in a run's directory: <n>/ per failed attempt


def failed_attempts_in(held):
    """The records of the failed attempts kept in `held` (<n>/error.json each), in order."""
    records = []
    try:
        entries = sorted((e for e in os.listdir(held) if e.isdigit()), key=int)
    except OSError:
        return records
    for e in entries:
        try:
            with open(os.path.join(held, e, "error.json")) as f:
                records.append(json.load(f))
        except (OSError, ValueError):
            records.append({"attempt": int(e), "error": "unknown (error.json unreadable)"})
    return records


def disk_full(path, reserve=1 << 20):
    """Whether the file system of `path` has less than `reserve` bytes left for us."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < reserve


def keep_failed_attempt(partial, held, error, seconds):
    """Moves a failed attempt's directory into `held` as the next <n>/, with its error in
    error.txt and error.json; returns n."""
    os.makedirs(held, exist_ok=True)
    n = len([e for e in os.listdir(held) if e.isdigit()]) + 1
    record = {"attempt": n, "error": error, "seconds": round(seconds, 1),
              "ended": datetime.now().astimezone().isoformat(timespec="seconds")}
    with open(os.path.join(partial, "error.txt"), "w") as f:
        f.write(error + "\n")
    with open(os.path.join(partial, "error.json"), "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
    os.rename(partial, os.path.join(held, str(n)))
    return n


def run_attempts(run_dir):
    """A complete run's attempts.json ({} for a run made before the lab recorded its attempts)."""
    try:
        with open(os.path.join(run_dir, ATTEMPTS)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def failed_attempts(run_dir):
    """How many attempts of a complete run failed before it; None when not recorded."""
    attempts = run_attempts(run_dir)
    return len(attempts["failed"]) if isinstance(attempts.get("failed"), list) else None


_LOG_TIME = re.compile(r"^(\d{2}-\w{3}-\d{4} \d{2}:\d{2}:\d{2}\.\d+): Starting measurement", re.M)


def start_time(active_log):
    """When an active sent START (its log's "Starting measurement" line), seconds since the epoch."""
    try:
        with open(active_log, errors="replace") as f:
            m = _LOG_TIME.search(f.read())
    except OSError:
        return None
    if not m:
        return None
    stamp, _, fraction = m.group(1).partition(".")
    return datetime.strptime(stamp, "%d-%b-%Y %H:%M:%S").timestamp() + float("0." + fraction)


def stein(pilot, half_width, level):
    """Stein's two-stage procedure: the number of runs whose mean has a `level` confidence
    interval of half-width `half_width`, from a pilot sample (at least 2 values)."""
    n0 = len(pilot)
    mean = sum(pilot) / n0
    sd = math.sqrt(sum((v - mean) ** 2 for v in pilot) / (n0 - 1))
    t = stats.t_quantile(1 - (1 - level) / 2, n0 - 1)
    return max(n0, math.ceil((t * sd / half_width) ** 2)) if half_width > 0 else n0


def two_modes(values):
    """A split of `values` into two modes (1-D 2-means from the extremes): (low, high) lists."""
    lo_c, hi_c = min(values), max(values)
    for _ in range(50):
        low = [v for v in values if abs(v - lo_c) <= abs(v - hi_c)]
        high = [v for v in values if abs(v - lo_c) > abs(v - hi_c)]
        new = (sum(low) / len(low) if low else lo_c, sum(high) / len(high) if high else hi_c)
        if new == (lo_c, hi_c):
            break
        lo_c, hi_c = new
    return low, high


def median(values):
    v = sorted(values)
    n = len(v)
    return math.nan if n == 0 else (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2)


class Runner:
    NO_CAPTURE = "no capture (tshark is not installed)"  # evidence.json's note when a run has none

    def __init__(self, study, outdir, tools, repetitions=None, ci_target=None, resume=False, retries=1,
                 seed=None, log=sys.stderr, max_other_load=evidence.FOREIGN_LOAD_LIMIT,
                 max_process_load=evidence.PROCESS_LOAD_LIMIT, max_lateness_us=evidence.LATENESS_LIMIT_US):
        self.study, self.outdir, self.tools = study, outdir, tools
        self.repetitions = repetitions
        self.ci_target = ci_target
        self.resume = resume
        self.retries = retries
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1 << 32)
        self.log = log
        self.max_other_load = max_other_load
        self.max_process_load = max_process_load
        self.max_lateness_us = max_lateness_us
        self.topo = None
        self.topo_key = None
        self.topo_text = ""
        self.unconverged = []
        self.invalid = []  # (label, reasons) of runs that did not measure what the study asks
        self.current = []  # processes of the run in progress
        self._quic = None  # whether the study has QUIC flows (needs_tls)
        # what the complete runs say, and the tables and plots of it
        self.statistics = Statistics(study, outdir, tools, self.seed, ci_target, self.unconverged)
        self.report = Report(self.statistics)

    # ------------------------------------------------------------------ runs
    def port_of(self, i):
        """The passive port of flow i's pair (its control port is one above, MPTCP one below)."""
        return pair_port(i)

    def udp_port_of(self, i):
        """The passive's userland SCTP port of flow i's pair."""
        return pair_udp(i)

    def run_dir(self, values, rep):
        return os.path.join(self.outdir, "runs", f"{label(values)}-r{rep}")

    def _topology_for(self, values):
        paths = self.study.paths_for(values)
        bottleneck = self.study.bottleneck_for(values)
        key = (tuple(p.key() for p in paths), bottleneck.key() if bottleneck else None)
        if key != self.topo_key:
            self._teardown()
            self.topo = testbed.get(self.study.topology).for_study(self.study, values,
                                                                   self.tools["netperfmeter-delayline"], self.seed)
            self.topo.up()
            self.topo_key = key
            self.topo_text = self.topo.describe()
        return self.topo

    def _teardown(self):
        if self.topo is not None:
            self.topo.down()
        self.topo = None
        self.topo_key = None

    def _wait_for_passive(self, proc, logfile):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with open(logfile, errors="replace") as f:
                text = f.read()
            if "waiting for incoming connections" in text:
                return
            if proc.poll() is not None:
                raise LabError(f"the passive netperfmeter exited ({proc.returncode}): "
                               f"{text.strip().splitlines()[-1] if text.strip() else 'no output'}")
            time.sleep(0.05)
        raise LabError("the passive netperfmeter did not start listening within 15 s")

    def _wait_for_closed(self, topo, pairs, partial, limit=120):
        """Waits until no TCP or MPTCP connection of an earlier run is open on the pairs' ports in
        either namespace: a connection that outlives its processes (a control connection's FIN
        behind the data in a path's queue; before netperfmeter closed data connections
        abortively, an orphaned MPTCP connection for about 60 s) would share the paths with the
        next run and show up in its evidence. Writes the wait and what it waited
        for into the run directory; a connection still open after `limit` seconds fails the run."""
        ports = [p for i in range(pairs) for p in (self.port_of(i) - 1, self.port_of(i), self.port_of(i) + 1)]
        began, first = time.monotonic(), None
        while True:
            still = evidence.open_connections(topo, ports)
            waited = time.monotonic() - began
            if not any(still.values()):
                break
            first = first or still
            if waited > limit:
                listed = "; ".join(f"{side}: {', '.join(c)}" for side, c in still.items() if c)
                raise LabError(f"connections of an earlier run still open after {limit} s ({listed})")
            time.sleep(0.2)
        with open(os.path.join(partial, "settle.txt"), "w") as f:
            f.write(f"waited {waited:.1f} s for earlier runs' connections to close\n")
            for side, connections in (first or {}).items():
                for c in connections:
                    f.write(f"  {side}: {c}\n")

    def _stop(self, proc, timeout=10):
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def traffic_seed(self, rep, flow):
        """netperfmeter's -seed for flow `flow` of repetition `rep`: derived from the lab's seed,
        the same for every combination of the sweep (common random numbers: the variants that a
        repetition compares see the same random frame rates, sizes and on/off times), other for
        each repetition and flow; 1 .. 2^53-1 as netperfmeter takes it."""
        digest = hashlib.sha256(f"npmlab-traffic-{self.seed}-{rep}-{flow}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % ((1 << 53) - 1) + 1

    def _commands(self, topo, values, rep=None):
        """[(flows, passive command, active command)]: a netperfmeter pair per flow, but one for
        all QUIC flows (pair_groups); with `rep`, each active gets its traffic seed."""
        study = self.study
        pairs = []
        for i, group in enumerate(pair_groups(study.flows_for(values))):
            f = group[0]
            passive = self._program(topo, "passive") + [str(self.port_of(i)), "-nodisplay",
                                                        f"--sctp-udp-port={self.udp_port_of(i)}",
                                                        *study.args_for("passive", values)]
            active = self._program(topo, "active") + [
                f"{topo.address('passive', 0)}:{self.port_of(i)}", "-control-over-tcp",
                f"--sctp-remote-udp-port={self.udp_port_of(i)}", f"-runtime={study.runtime:g}", "-config=run.config",
                "-scalar=run.sca.bz2", "--json=run.json", "-nodisplay", *self._active_options()]
            if study.warmup > 0:
                active.append(f"--warmup={study.warmup:g}")
            if rep is not None:
                active.append(f"-seed={self.traffic_seed(rep, f.number)}")
            if f.protocol == "sctp" and len(topo.paths) > 1:
                active.append("-L" + ",".join(topo.active_addresses()))
            if f.protocol == "quic":
                files = self._tls_files(topo)
                passive += [f"--tls-key={files['server.key']}", f"--tls-cert={files['server.pem']}"]
                active += [f"--tls-ca={files['ca.pem']}", f"--tls-hostname={tls.HOSTNAME}"]
            active += study.args_for("active", values) + flow_arguments(group)
            pairs.append((group, passive, active))
        return pairs

    def _tls_files(self, topo):
        """{ca.pem, server.key, server.pem: path} of the QUIC pairs' TLS files, where the passive
        and the active read them (the results directory's tls/, made by run())."""
        return tls.paths(self.outdir)

    def needs_tls(self):
        """Whether a flow of any combination is a QUIC flow."""
        if self._quic is None:
            self._quic = any(f.protocol == "quic" for values in self.study.combinations()
                             for f in self.study.flows_for(values))
        return self._quic

    def check_capture(self):
        """Every run on a namespace test bed is checked against a capture of it (tshark): without
        tshark no run could be valid, so the study does not start."""
        if shutil.which("tshark") is None:
            raise LabError("tshark is not installed, and every run is checked against a capture of it (Debian: "
                           "apt-get install tshark): nothing was run")

    def check_quic(self, local_netperfmeter=True):
        """A study with QUIC flows needs a netperfmeter built with QUIC (the local one here, the
        hosts' in their pre-flight checks) and openssl for the certificates: said before anything
        is built."""
        if not self.needs_tls():
            return
        if local_netperfmeter and tls.quic_built(self.tools["netperfmeter"]) is False:
            raise LabError(f"the study has QUIC flows, and {self.tools['netperfmeter']} was built without QUIC "
                           "(its --help offers no --tls-key; see src/quic/README.md)")
        if shutil.which("openssl") is None:
            raise LabError("the study has QUIC flows, whose certificates the lab makes with openssl, which is not "
                           "installed")

    def _program(self, topo, side):
        """The start of a netperfmeter command on a side of the test bed."""
        return topo.program(side, self.tools["netperfmeter"])

    def _active_options(self):
        """Options every active gets beyond the run's (none on the namespace test beds)."""
        return []

    def _ccs_while_running(self, topo, groups, actives, logs):
        """{flow index: {"active": [cc], "passive": [cc]}} of the TCP and MPTCP pairs, from ss once
        their measurements run (the passive sets a flow's CC when it identifies the connection,
        before START: from START on, every byte is sent under it)."""
        wanted = {i: self.port_of(i) - (1 if g[0].protocol == "mptcp" else 0) for i, g in enumerate(groups)
                  if g[0].protocol in ("tcp", "mptcp")}
        seen = {i: {"active": set(), "passive": set()} for i in wanted}
        if not wanted:
            return {}
        deadline = time.monotonic() + 15

        def started(log):
            try:
                with open(log, errors="replace") as f:
                    return "Starting measurement" in f.read()
            except OSError:
                return False

        while not all(started(logs[i]) for i in wanted):
            if time.monotonic() > deadline or any(a.poll() is not None for a in actives):
                return {}  # the run fails or ends without its CCs: said by the run's exit or checks
            time.sleep(0.05)
        for _ in range(3):
            for i, port in wanted.items():
                for side in ("active", "passive"):
                    seen[i][side] |= evidence.congestion_controls(topo, side, port)
            time.sleep(0.1)
        return {i: {side: sorted(v) for side, v in sides.items()} for i, sides in seen.items()}

    def _attempt(self, topo, values, partial, rep):
        pairs = self._commands(topo, values, rep)
        groups = [g for g, _, _ in pairs]
        with open(os.path.join(partial, "environment.txt"), "w") as env:
            env.write(f"kernel: {platform.uname().release} ({platform.uname().version})\n")
            env.write(f"netperfmeter: {self.tools.version('netperfmeter')}\n")
            env.write(f"python: {platform.python_version()}\n")
            env.write(f"variables: {json.dumps(values)}\n")
            for group, passive_cmd, active_cmd in pairs:
                env.write(f"{pair_name(group)} passive: {subprocess.list2cmdline(passive_cmd)}\n")
                env.write(f"{pair_name(group)} active: {subprocess.list2cmdline(active_cmd)}\n")
            env.write(self.topo_text)
        logs = []
        cpu = None
        try:
            self._wait_for_closed(topo, len(pairs), partial)
            passives = []
            for i, (_, passive_cmd, _) in enumerate(pairs):
                d = os.path.join(partial, f"f{i}")
                os.makedirs(d)
                logs.append(open(os.path.join(d, "passive.log"), "w"))
                passives.append(subprocess.Popen(passive_cmd, stdout=subprocess.DEVNULL, stderr=logs[-1], cwd=d,
                                                 start_new_session=True))
                self.current.append(passives[-1])
            for i, p in enumerate(passives):
                self._wait_for_passive(p, os.path.join(partial, f"f{i}", "passive.log"))
            topo.begin(rep)
            before = topo.counters()
            load = evidence.HostLoad(getattr(topo, "delaylines", ()))
            capture = topo.capture(os.path.join(partial, "capture.pcapng"), self.study.capture)
            actives = []
            for i, (_, _, active_cmd) in enumerate(pairs):
                logs.append(open(os.path.join(partial, f"f{i}", "active.log"), "w"))
                actives.append(subprocess.Popen(active_cmd, stdout=logs[-1], stderr=subprocess.STDOUT,
                                                cwd=os.path.join(partial, f"f{i}"), start_new_session=True))
                self.current.append(actives[-1])
            cpu = evidence.ProcessCpu({f"{pair_name(g)} {side}": p.pid for g, a, pa in zip(groups, actives, passives)
                                       for side, p in (("active", a), ("passive", pa))})
            ccs = self._ccs_while_running(topo, groups, actives,
                                          [os.path.join(partial, f"f{i}", "active.log") for i in range(len(pairs))])
            deadline = time.monotonic() + self.study.runtime + 90
            codes = []
            for a in actives:
                try:
                    codes.append(a.wait(timeout=max(1, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    for other in actives:
                        self._stop(other, timeout=5)
                    raise LabError(f"an active netperfmeter did not finish within {self.study.runtime + 90:g} s")
            with open(os.path.join(partial, "environment.txt"), "a") as env:
                env.write(f"exit status: {' '.join(map(str, codes))}\n")  # of each pair's active
            cpu.stop()
            if capture is not None:
                capture.stop()
            after = topo.counters()
            record = topo.record()
            if record is not None:  # the delay lines: seeds, drops by cause, lateness of the run
                with open(os.path.join(partial, "delay_lines.json"), "w") as f:
                    json.dump(record, f, indent=1, sort_keys=True)
        finally:
            if cpu is not None:
                cpu.stop()
            for p in reversed(self.current):
                self._stop(p)
            self.current = []
            for f in logs:
                f.close()
        return self._conclude(topo, partial, groups, codes, before, after, capture, ccs, load.finish(), cpu)

    def _conclude(self, topo, partial, groups, codes, before, after, capture, ccs, host, cpu=None):
        """After a run's processes ended: fails the attempt if a pair's active failed or the
        scalar files are incomplete; else writes counters.json and evidence.json; the verdict.
        `groups`: the flows of each pair; `cpu`: the ProcessCpu of its netperfmeter processes."""
        for i, code in enumerate(codes):
            if code != 0:
                with open(os.path.join(partial, f"f{i}", "active.log"), errors="replace") as f:
                    lines = [line for line in f.read().splitlines() if line.strip()]
                raise LabError(f"netperfmeter (flow {i}) failed (exit {code}): {lines[-1] if lines else 'no output'}")
        if not complete(partial):
            raise LabError("netperfmeter ended without complete scalar files")
        counters = evidence.delta(before, after)
        with open(os.path.join(partial, "counters.json"), "w") as f:
            json.dump(counters, f, indent=1, sort_keys=True)
        starts = [start_time(os.path.join(partial, f"f{i}", "active.log")) for i in range(len(groups))]
        ccs = dict(ccs)
        for i, group in enumerate(groups):
            if group[0].protocol == "quic":  # ngtcp2's, in userland: as netperfmeter's document names it
                ccs[i] = {"document": evidence.document_ccs(os.path.join(partial, f"f{i}", "run.json"))}
        holds = {i: {side: evidence.log_holds(os.path.join(partial, f"f{i}", f"{side}.log"))
                     for side in ("active", "passive")} for i in range(len(groups))}
        known = [t for t in starts if t is not None]
        # each process's load over the measurement (from the first START to the last one's end)
        processes = cpu.finish((min(known), max(known) + self.study.runtime) if known else None) if cpu else None
        # The hosts topology captures nothing (capture None): its checks that need a capture
        # stay unverified, listed, and do not make its runs invalid.
        judged = evidence.judge(groups, topo, capture, ccs, counters, starts,
                                [self.udp_port_of(i) for i in range(len(groups))],
                                [self.port_of(i) for i in range(len(groups))], host, self.max_other_load,
                                no_capture=self.NO_CAPTURE, holds=holds, processes=processes,
                                max_process_load=self.max_process_load, max_lateness_us=self.max_lateness_us,
                                strict=capture is not None,
                                delay_lines=read_json(os.path.join(partial, "delay_lines.json")))
        with open(os.path.join(partial, "evidence.json"), "w") as f:
            json.dump(judged, f, indent=1, sort_keys=True)
        return judged

    def run_one(self, values, rep, progress):
        final = self.run_dir(values, rep)
        if os.path.isdir(final):
            if self.resume and complete(final):
                progress.finish(f"run {label(values)} r{rep}: complete, kept")
                return False
            shutil.rmtree(final)
        text = f"{label(values)} r{rep}"
        progress.start(text, self.study.runtime + 8)
        topo = self._topology_for(values)
        runs = os.path.join(self.outdir, "runs")
        partial = os.path.join(runs, f".partial-{label(values)}-r{rep}")
        held = os.path.join(runs, f".attempts-{label(values)}-r{rep}")
        failed = os.path.join(runs, f".failed-{label(values)}-r{rep}")
        if os.path.isdir(failed) and not os.path.exists(held):
            os.rename(failed, held)  # the attempts of an earlier invocation, in which this run failed
        for attempt in range(self.retries + 1):
            shutil.rmtree(partial, ignore_errors=True)
            os.makedirs(partial)
            began = time.monotonic()
            try:
                judged = self._attempt(topo, values, partial, rep)
                break
            except LabError as e:
                if disk_full(runs):
                    # not a result about the stack: the run in progress is discarded, as when interrupted
                    shutil.rmtree(partial, ignore_errors=True)
                    raise LabError(f"run {text}: {e}; the file system of {self.outdir} is full "
                                   "(No space left on device): the complete runs are kept, --resume continues")
                try:
                    n = keep_failed_attempt(partial, held, str(e), time.monotonic() - began)
                except OSError as kept:  # e.g. a quota: the attempt cannot be kept, the study stops
                    shutil.rmtree(partial, ignore_errors=True)
                    raise LabError(f"run {text}: {e} (the attempt's files not kept: {kept.strerror or kept})")
                if attempt == self.retries:
                    shutil.rmtree(failed, ignore_errors=True)
                    os.rename(held, failed)
                    raise LabError(f"run {text}: {e} (logs in {os.path.join(failed, str(n))})")
                progress.stream.write(f"\nrun {text}: {e}; repeating it (attempt {n} kept in its record)\n")
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
        failures = failed_attempts_in(held)
        with open(os.path.join(partial, ATTEMPTS), "w") as f:
            json.dump({"attempts": len(failures) + 1, "failed": failures}, f, indent=1, sort_keys=True)
        if failures:
            os.rename(held, os.path.join(partial, FAILED_ATTEMPTS))
        os.rename(partial, final)
        verdict = ""
        if not judged.get("valid", True):
            self.invalid.append((text, judged.get("problems", [])))
            verdict = " INVALID: " + "; ".join(judged.get("problems", []))
            progress.stream.write(f"\nrun {text} did not measure what the study asks for:{verdict[9:]}\n")
        progress.finish(f"run {text}: done in {time.monotonic() - began:.1f} s{verdict}")
        return True

    def _n_for(self, values, reps):
        """Stein: the runs this combination needs for the wanted half-width, from its pilot."""
        pilot = [self.metrics_of(self.run_dir(values, r), values)[self.study.metrics[0].name] for r in reps
                 if run_evidence(self.run_dir(values, r)).get("valid", True)]
        if len(pilot) < 2:
            return self.study.max_repetitions
        mean = sum(pilot) / len(pilot)
        return stein(pilot, abs(mean) * self.ci_target / 100, LEVEL)

    def check_congestion_controls(self):
        """Every cc= of the study's flows must be available before anything is built."""
        try:
            with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
                available = set(f.read().split())
        except OSError:
            return
        wanted = set()
        for values in self.study.combinations():
            for flow in self.study.flows_for(values):
                for option in flow.spec.split(":"):
                    if option.startswith("cc="):
                        wanted.add(option[3:])
        missing = sorted(wanted - available)
        if missing:
            hint = " (the bundled ones: netperfmeter-cc-loader start)" if any(m.startswith("npm_") for m in missing) \
                else ""
            raise LabError(f"congestion control {', '.join(missing)} not available in this kernel "
                           f"(available: {' '.join(sorted(available))}){hint}")

    # ------------------------------------------------------------------ all
    def blocks(self, first, last):
        """Repetitions first..last as blocks: in each, every combination once, in an order drawn
        from the seed and the repetition (the same order for a --resume)."""
        combos = list(self.study.combinations())
        order = []
        for rep in range(first, last + 1):
            block = list(combos)
            random.Random(f"{self.seed}-{rep}").shuffle(block)
            order += [(values, rep) for values in block]
        return order

    def run(self):
        study = self.study
        os.makedirs(os.path.join(self.outdir, "runs"), exist_ok=True)
        if self.needs_tls():
            tls.ensure(self.outdir)
        for entry in os.listdir(os.path.join(self.outdir, "runs")):
            if entry.startswith(".partial-"):
                shutil.rmtree(os.path.join(self.outdir, "runs", entry), ignore_errors=True)
        combos = list(study.combinations())
        first = study.min_repetitions if self.ci_target is not None else (self.repetitions or study.repetitions)
        progress = Progress(len(combos) * first)
        old = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            self._run_jobs(self.blocks(1, first), progress)
            if self.ci_target is not None:
                # Stein's second stage: as many more runs per combination as its pilot asks for
                need = {}
                for values in combos:
                    n = self._n_for(values, range(1, first + 1))
                    if n > study.max_repetitions:
                        self.unconverged.append(values)
                        n = study.max_repetitions
                    need[label(values)] = n
                extra = [(v, r) for v, r in self.blocks(first + 1, max(need.values(), default=first))
                         if r <= need[label(v)]]
                progress.grow(len(extra))
                self._run_jobs(extra, progress)
        finally:
            for p in self.current:
                self._stop(p, timeout=3)
            self._teardown()
            progress.close()
            for s, h in old.items():
                signal.signal(s, h)

    def _run_jobs(self, jobs, progress):
        """Runs [(values, repetition)] in their order, one after the other."""
        for values, rep in jobs:
            self.run_one(values, rep, progress)

    # -------------------------------------------- the statistics and reports of the runs
    @property
    def verdicts(self):
        """verdict.apply() of the last summarize()."""
        return self.statistics.verdicts

    def runs_done(self):
        return self.statistics.runs_done()

    def metrics_of(self, run_dir, values):
        return self.statistics.metrics_of(run_dir, values)

    def recorded_metrics(self, run_dir):
        return self.statistics.recorded_metrics(run_dir)

    def summarize(self):
        return self.statistics.summarize()

    def write_summaries(self, rows, attempts):
        return self.statistics.write_summaries(rows, attempts)

    def caption(self):
        return self.report.caption()

    def plot(self):
        return self.report.plot()


class Statistics:
    """The statistics of a study's complete runs (runs/ of its results directory): each run's
    metrics, the intervals of each combination, runs.csv, summary.csv, paired.csv, the verdicts,
    createsummary's tables and the plotter's (summarize()). Needs no test bed: `netperfmeter-lab
    plot` and `db` summarise the runs again. `unconverged`: the combinations whose wanted
    half-width (--ci-target) needed more than max_repetitions runs (the run loop's)."""

    def __init__(self, study, outdir, tools, seed, ci_target=None, unconverged=None):
        self.study, self.outdir, self.tools = study, outdir, tools
        self.seed = seed
        self.ci_target = ci_target
        self.unconverged = unconverged if unconverged is not None else []
        self.verdicts = []  # verdict.apply() of the last summarize()

    # -------------------------------------------------------------- metrics
    def metrics_of(self, run_dir, values):
        scalars = read_run_scalars(run_dir)
        counters = {}
        try:
            with open(os.path.join(run_dir, "counters.json")) as f:
                counters = json.load(f)
        except (OSError, ValueError):
            pass
        out = {}
        for m in self.study.metrics:
            try:
                out[m.name] = expr.evaluate(self.study.metric_tree(m, values), scalars, counters)
            except (KeyError, ZeroDivisionError, TypeError, ValueError) as e:
                raise LabError(f"{run_dir}: metric {m.name}: {e.args[0] if e.args else e}")
        return out

    def recorded_metrics(self, run_dir):
        """The metrics every run records beside the study's: per path and direction the queue's
        drops, both hosts' UDP send-buffer errors, both sides' CPU load (percent, busiest pair), the
        other work on the host during the run (cores beyond the run's own processes), the busiest
        netperfmeter process (cores), per SCTP flow and path the chunks its capture saw arrive
        twice, per flow and path its share of the data (data_share_f<i>_path<N>, on more than one
        path) and per SCTP flow the NR-SACKs' share of its acknowledgements."""
        out = {}
        try:
            with open(os.path.join(run_dir, "counters.json")) as f:
                counters = json.load(f)
        except (OSError, ValueError):
            counters = {}
        for path, dirs in sorted(counters.get("paths", {}).items()):
            for direction, c in sorted(dirs.items()):
                out[f"drops_path{path}_{direction}"] = c.get("drops", 0)
        for direction, c in sorted(counters.get("bottleneck", {}).items()):
            out[f"drops_bottleneck_{direction}"] = c.get("drops", 0)
        for side in ("active", "passive"):
            out[f"udp_sndbuf_errors_{side}"] = counters.get("nstat", {}).get(side, {}).get("UdpSndbufErrors", 0)
        for side in ("active", "passive"):
            busy = []
            for d in pair_dirs(run_dir):
                idle = pair_cpu_idle(d, side)
                if idle is not None:
                    busy.append(100.0 - idle)
            if busy:
                out[f"cpu_{side}"] = max(busy)
        judged = run_evidence(run_dir)
        host = judged.get("host")
        if host:
            out["host_foreign_cores"] = host["foreign_cores"]
        # SCTP chunks received twice, per flow and path, over the capture (the first seconds, or
        # the study's `capture`): retransmissions of chunks that had not been lost
        for flow in judged.get("flows", []):
            seen = flow.get("seen") or {}
            if flow.get("protocol") == "sctp" and "data_chunks_per_interface" in seen:
                for i in range(len(self.study.paths)):
                    n = seen.get("duplicate_tsns_per_interface", {}).get(str(i), 0)
                    out[f"dup_tsns_f{flow['flow']}_path{i + 1}"] = n
            # each path's share of the flow's data (bytes from the active in the capture), and the
            # share of NR-SACKs in the passive's acknowledgements: what the stack did with the paths
            for path, share in sorted((flow.get("path_share") or {}).items()):
                out[f"data_share_f{flow['flow']}_path{path}"] = share
            if flow.get("nr_sack_share") is not None:
                out[f"nr_sack_share_f{flow['flow']}"] = flow["nr_sack_share"]
        # the busiest netperfmeter process of the run (cores, over its measurement)
        loads = [p["cores"] for p in judged.get("processes", {}).values() if p.get("cores") is not None]
        if loads:
            out["netperfmeter_cores_max"] = max(loads)
        return out

    # -------------------------------------------------------------- results
    def runs_done(self):
        """[(values, rep, run_dir)] of every complete run that belongs to the study."""
        done = []
        by_label = {label(v): v for v in self.study.combinations()}
        runs = os.path.join(self.outdir, "runs")
        for entry in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
            base, _, rep = entry.rpartition("-r")
            if entry.startswith(".") or base not in by_label or not rep.isdigit():
                continue
            if complete(os.path.join(runs, entry)):
                done.append((by_label[base], int(rep), os.path.join(runs, entry)))
        return done

    def _interval(self, values, samples_by_rep, metric):
        """(n, mean, low, high, procedure) of a combination's valid runs: the BCa interval
        (stats.interval: none, low and high nan, for a single run, fewer than stats.MIN_RUNS or
        no spread, the procedure saying which), seeded by the study seed, the combination and the
        metric; or Stein's (the pilot's variance and degrees of freedom) for runs made with
        --ci-target."""
        samples = [v for _, v in sorted(samples_by_rep.items())]
        got = stats.interval(samples, LEVEL, (self.seed, label(values), metric))
        n, mean = got["n"], got["estimate"]
        low, high = (math.nan, math.nan) if got["low"] is None else (got["low"], got["high"])
        n0 = self.study.min_repetitions
        pilot = [v for r, v in sorted(samples_by_rep.items()) if r <= n0]
        if self.ci_target is not None and metric == self.study.metrics[0].name and len(pilot) >= 2 and n >= n0:
            m0 = sum(pilot) / len(pilot)
            sd0 = math.sqrt(sum((v - m0) ** 2 for v in pilot) / (len(pilot) - 1))
            half = stats.t_quantile(1 - (1 - LEVEL) / 2, len(pilot) - 1) * sd0 / math.sqrt(n)
            return n, mean, mean - half, mean + half, f"stein(n0={len(pilot)})"
        return n, mean, low, high, got["procedure"]

    def summarize(self):
        study = self.study
        runs = self.runs_done()
        if not runs:
            raise LabError(f"{self.outdir}: no complete runs to summarize")
        variables = study.variables
        # createsummary: one table per scalar, the study's variables, the repetition and the
        # flow's pair as columns
        with open(os.path.join(self.outdir, "results.summary"), "w") as f:
            f.write("--varnames=" + " ".join(variables + ["Repetition", "Pair"]) + "\n")
            f.write("--resultsdirectory=tables\n")
            for values, rep, run_dir in runs:
                for d in pair_dirs(run_dir):
                    pair = os.path.basename(d)[1:] if d != run_dir else "0"
                    for side in ("active", "passive"):
                        f.write("--values=" + " ".join(str(values[v]) for v in variables) + f" {rep} {pair}\n")
                        f.write(f"--input={os.path.relpath(pair_scalar_file(d, side), self.outdir)}\n")
        tables = os.path.join(self.outdir, "tables")
        shutil.rmtree(tables, ignore_errors=True)
        os.makedirs(tables)
        with open(os.path.join(self.outdir, "results.summary")) as f:
            r = subprocess.run([self.tools["createsummary"], "--batch", "--quiet"],
                               stdin=f, cwd=self.outdir, capture_output=True, text=True)
        if r.returncode != 0:
            raise LabError(f"createsummary failed: {(r.stderr or r.stdout).strip()}")

        rows = []
        attempts = {}  # (label, repetition) -> failed attempts before the run, None when not recorded
        for values, rep, run_dir in runs:
            judged = run_evidence(run_dir)
            metrics = self.metrics_of(run_dir, values)
            metrics.update(self.recorded_metrics(run_dir))
            rows.append((values, rep, metrics, run_validity(judged), "; ".join(judged.get("problems", []))))
            attempts[(label(values), rep)] = failed_attempts(run_dir)
        return self.write_summaries(rows, attempts)

    def write_summaries(self, rows, attempts):
        """runs.csv, summary.csv, paired.csv, verdicts.json and the plotter's tables from the runs'
        rows [(values, repetition, metrics, validity, problems)] and their failed attempts
        {(label, repetition): n or None}; returns [(values, metric, n, mean, low, high, procedure)]
        of the study's metrics."""
        study = self.study
        variables = study.variables
        tables = os.path.join(self.outdir, "tables")
        os.makedirs(tables, exist_ok=True)
        names = [m.name for m in study.metrics]
        recorded = sorted({k for _, _, m, _, _ in rows for k in m} - set(names))
        with open(os.path.join(self.outdir, "runs.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(variables + ["repetition"] + names + recorded + ["failed_attempts", "validity", "problems"])
            for values, rep, metrics, validity, problems in rows:
                failures = attempts[(label(values), rep)]
                w.writerow([values[v] for v in variables] + [rep] +
                           [repr(metrics[n]) if n in metrics else "NA" for n in names + recorded] +
                           ["NA" if failures is None else failures, validity, problems])
        summary = []
        intervals = {}  # (label, metric) -> (low, high, procedure) as summary.csv has them
        bimodal = {m.name for m in study.metrics if m.bimodal}
        with open(os.path.join(self.outdir, "summary.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(variables + ["metric", "n", "mean", "ci_low", "ci_high", "procedure", "n_invalid", "median",
                                    "low_mode_mean", "high_mode_mean", "high_mode_fraction", "failed_attempts"])
            for values in study.combinations():
                mine = [(rep, metrics, validity) for v, rep, metrics, validity, _ in rows if v == values]
                invalid = sum(1 for _, _, validity in mine if validity == "invalid")
                # the failed attempts of all its runs (invalid ones too); NA when no run recorded them
                known = [attempts[(label(values), rep)] for rep, _, _ in mine
                         if attempts[(label(values), rep)] is not None]
                failures = sum(known) if known else "NA"
                for name in names + recorded:
                    by_rep = {rep: metrics[name] for rep, metrics, validity in mine
                              if validity != "invalid" and name in metrics}
                    if not by_rep:
                        continue
                    n, mean, low, high, procedure = self._interval(values, by_rep, name)
                    samples = list(by_rep.values())
                    modes = ["", "", ""]
                    if name in bimodal and len(samples) >= 2:
                        lo, hi = two_modes(samples)
                        modes = [repr(sum(lo) / len(lo)) if lo else "NA", repr(sum(hi) / len(hi)) if hi else "NA",
                                 repr(len(hi) / len(samples))]
                    w.writerow([values[v] for v in variables] +
                               [name, n, repr(mean)] + (["NA", "NA"] if math.isnan(low) else [repr(low), repr(high)]) +
                               [procedure, invalid, repr(median(samples))] + modes + [failures])
                    if name in names:
                        summary.append((values, name, n, mean, low, high, procedure))
                        intervals[(label(values), name)] = (low, high, procedure)
        if study.compare:
            self._paired(rows)
        # the study file's verdict rules (fixed before the runs) applied to the valid runs
        self.verdicts = verdict.apply(study, rows, self.seed)
        if study.verdicts:
            verdict.write(os.path.join(self.outdir, "verdicts.json"), self.verdicts, self.seed)
        # per metric a table for the plotter: the variables, the repetition, the combination's interval
        # as summary.csv has it (ci_low, ci_high, procedure: the same on each of its rows), the value
        # (valid runs), in the study's sweep order, which the plotter keeps for categories ("none",
        # "50", "100"); the plotter draws these intervals (--ci=given), so figure and table agree
        order = {tuple(str(v) for v in c.values()): i for i, c in enumerate(study.combinations())}
        in_order = sorted(rows, key=lambda r: (order.get(tuple(str(r[0][v]) for v in variables), len(order)), r[1]))
        for m in study.metrics:
            path = os.path.join(tables, f"lab-{m.name}.data.bz2")
            with bz2.open(path, "wt") as f:
                f.write(" ".join(variables + ["Repetition", "ci_low", "ci_high", "procedure", m.name]) + "\n")
                for values, rep, metrics, validity, _ in in_order:
                    if validity != "invalid":
                        low, high, procedure = intervals[(label(values), m.name)]
                        bounds = "NA NA" if math.isnan(low) else f"{low!r} {high!r}"
                        f.write(" ".join(str(values[v]) for v in variables) +
                                f' {rep} {bounds} "{procedure}" {metrics[m.name]!r}\n')
        return summary

    def _paired(self, rows):
        """paired.csv: per combination of the other variables, each variant's difference from the
        baseline variant in the same repetition (block), with a BCa interval of the differences."""
        study = self.study
        var, baseline = study.compare["variable"], study.compare["baseline"]
        others = [v for v in study.variables if v != var]
        valid = {(tuple(str(values[v]) for v in others), str(values[var]), rep): metrics
                 for values, rep, metrics, validity, _ in rows if validity != "invalid"}
        with open(os.path.join(self.outdir, "paired.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(others + [var, "baseline", "metric", "pairs", "mean_difference", "ci_low", "ci_high",
                                 "procedure"])
            keys = sorted({k[0] for k in valid})
            variants = [str(v) for v in study.sweep[var] if str(v) != str(baseline)]
            for key in keys:
                for variant in variants:
                    for m in study.metrics:
                        diffs = [valid[(key, variant, rep)][m.name] - valid[(key, str(baseline), rep)][m.name]
                                 for (k, v, rep) in valid if k == key and v == variant
                                 and (key, str(baseline), rep) in valid]
                        if not diffs:
                            continue
                        got = stats.interval(diffs, LEVEL, (self.seed, "paired", *key, variant, m.name))
                        w.writerow(list(key) + [variant, baseline, m.name, got["n"], repr(got["estimate"])] +
                                   (["NA", "NA"] if got["low"] is None else [repr(got["low"]), repr(got["high"])]) +
                                   [got["procedure"]])


class Report:
    """The plots of a study's results (one per metric, plot-netperfmeter-summary) from the tables
    Statistics.summarize() wrote, with the paper's values and a caption of what the runs behind
    them were."""

    def __init__(self, statistics):
        self.statistics = statistics
        self.study, self.outdir, self.tools = statistics.study, statistics.outdir, statistics.tools

    def runs_done(self):
        return self.statistics.runs_done()

    def _paper_table(self, metric, x, colour):
        """The paper's values of a metric (the study's [[paper]]) that fit this plot: a table of
        the x variable, the colour variable, the value and whether it is a bound, for the plotter's --reference; None
        when there are none."""
        rows = []
        for entry in self.study.paper:
            values = entry["values"]
            if entry["metric"] != metric.name or x not in values or (colour and colour not in values):
                continue
            # only points of this form of the study (a quick form runs fewer values)
            if any(str(v) not in map(str, self.study.sweep[k]) for k, v in values.items()):
                continue
            rows.append([str(values[x])] + ([str(values[colour])] if colour else []) +
                        [repr(entry["value"]), entry["bound"]])
        if not rows:
            return None
        path = os.path.join(self.outdir, "tables", f"lab-{metric.name}-paper.data")
        with open(path, "w") as f:
            f.write(" ".join([x] + ([colour] if colour else []) + [metric.name, "bound"]) + "\n")
            for row in rows:
                f.write(" ".join(row) + "\n")
        return path

    def caption(self):
        """What the plots must say about the runs behind them: the invalid runs left out, the
        runs repeated after a failed attempt, the runs whose attempts were not recorded ("" when
        nothing is to be said)."""
        runs = self.runs_done()
        invalid = sum(1 for _, _, d in runs if run_validity(run_evidence(d)) == "invalid")
        failures = [failed_attempts(d) for _, _, d in runs]
        repeated = [k for k in failures if k]
        unknown = sum(1 for k in failures if k is None)
        parts = []
        if invalid:
            parts.append(f"{invalid} of {len(runs)} runs invalid, left out (runs.csv: problems)")
        if repeated:
            attempts = sum(repeated)
            parts.append(f"{len(repeated)} of {len(runs)} runs repeated after {attempts} failed "
                         f"attempt{'s' if attempts != 1 else ''} (runs.csv: failed_attempts)")
        if unknown:
            parts.append(f"failed attempts of {unknown} of {len(runs)} runs not recorded "
                         "(made before the lab kept them)")
        return "; ".join(parts)

    def plot(self):
        study = self.study
        caption = self.caption()
        # Variables with one value (e.g. in a quick form) make no axis: the next one does.
        varying = [v for v in study.variables if len(study.sweep[v]) > 1]
        x = study.plot.get("x")
        if x not in varying:
            x = varying[0] if varying else (study.variables[0] if study.variables else None)
        if x is None:
            return []
        colour = study.plot.get("colour")
        if colour not in varying or colour == x:
            colour = next((v for v in varying if v != x), None)
        facets = [v for v in varying if v not in (x, colour)]
        written = []
        for m in study.metrics:
            pdf = os.path.join(self.outdir, f"{m.name}.pdf")
            table = os.path.join(self.outdir, "tables", f"lab-{m.name}.data.bz2")
            with bz2.open(table, "rt") as f:
                if sum(1 for _ in f) < 2:
                    continue  # no valid run: nothing to draw (the summary says which runs were left out)
            reference = self._paper_table(m, x, colour)
            # the intervals of summary.csv (the table's ci_low/ci_high), none where it has none; what
            # is drawn is also written to tables/lab-<metric>-plotted.csv
            plotted = os.path.join(self.outdir, "tables", f"lab-{m.name}-plotted.csv")
            cmd = [self.tools["plot-netperfmeter-summary"], table,
                   "-x", x, "-y", m.name, "-o", pdf, f"--confidence={LEVEL}", "--ci=given", f"--dump={plotted}",
                   "--runs",
                   f"--ylab={m.name.replace('_', ' ')}" + (f" [{m.unit}]" if m.unit else ""),
                   f"--title={study.name}: {m.name.replace('_', ' ')}"]
            if colour:
                cmd += ["-c", colour]
            if caption:
                cmd.append(f"--caption={caption}")
            if reference:
                cmd.append(f"--reference={reference}")
            if facets:
                cmd += ["-r", facets[0]]
            if len(facets) > 1:
                cmd += ["-k", facets[1]]
            if "xlab" in study.plot and x == study.plot.get("x"):
                cmd.append(f"--xlab={study.plot['xlab']}")
            run_plotter(cmd, m.name)
            written.append(pdf)
        return written
