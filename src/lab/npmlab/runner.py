"""The run loop: every parameter combination x repetition as a real netperfmeter run (passive in
one namespace, active in another), then createsummary, summary.csv and the plots.

Layout of a results directory DIR:
  DIR/lab.json                 what was run (study file, --quick, tools), for `plot` and --resume
  DIR/study.toml               a copy of the study file
  DIR/runs/<var>=<v>-...-r<k>/ one complete run: run.config, run-{active,passive}.sca.bz2,
                               active.log, passive.log, environment.txt (kernel, settings, qdiscs,
                               tool versions, the exact command lines)
  DIR/runs/.partial-*          a run in progress (removed when it fails or is interrupted)
  DIR/results.summary          createsummary's input; DIR/tables/ its tables
  DIR/runs.csv                 every run's metrics; DIR/summary.csv means with t-based CIs
  DIR/<metric>.pdf             one plot per metric (plot-netperfmeter-summary)
"""

import bz2
import csv
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time

from . import expr, stats, topology
from .topology import LabError

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


def _duration(seconds):
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
        line = f"[{self.done + 1}/{self.total}] ETA {_duration(left)} {text}"
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


class Interrupted(Exception):
    pass


def _raise_interrupted(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def complete(run_dir):
    """A run counts as done when its directory exists (renamed into place at the end) and both
    scalar files decompress and hold flow scalars."""
    try:
        for side in ("active", "passive"):
            stats.read_scalars(os.path.join(run_dir, f"run-{side}.sca.bz2"), side)
        return True
    except (OSError, EOFError, ValueError):
        return False


class Runner:
    def __init__(self, study, outdir, tools, repetitions=None, ci_target=None, resume=False, retries=1,
                 log=sys.stderr):
        self.study, self.outdir, self.tools = study, outdir, tools
        self.repetitions = repetitions
        self.ci_target = ci_target
        self.resume = resume
        self.retries = retries
        self.log = log
        self.topo = None
        self.topo_key = None
        self.topo_text = ""
        self.unconverged = []
        self.current = []  # processes of the run in progress

    # ------------------------------------------------------------------ runs
    def run_dir(self, values, rep):
        return os.path.join(self.outdir, "runs", f"{label(values)}-r{rep}")

    def _topology_for(self, values):
        paths = self.study.paths_for(values)
        bottleneck = self.study.bottleneck_for(values)
        key = (tuple(p.key() for p in paths), bottleneck.key() if bottleneck else None)
        if key != self.topo_key:
            self._teardown()
            common = dict(delayline=self.tools["netperfmeter-delayline"], sysctls=self.study.sysctls)
            if bottleneck is not None:
                self.topo = topology.Shared(paths, bottleneck, **common)
            else:
                self.topo = topology.Disjoint(paths, **common)
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

    def _stop(self, proc, timeout=10):
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _commands(self, topo, values):
        study = self.study
        passive = ["ip", "netns", "exec", topo.P, self.tools["netperfmeter"], str(topology.PASSIVE_PORT),
                   "-nodisplay", *study.args_for("passive", values)]
        flows = study.flows_for(values)
        active = ["ip", "netns", "exec", topo.A, self.tools["netperfmeter"],
                  f"{topo.address('passive', 0)}:{topology.PASSIVE_PORT}", "-control-over-tcp",
                  f"-runtime={study.runtime:g}", "-config=run.config", "-scalar=run.sca.bz2", "-nodisplay"]
        if study.warmup > 0:
            active.append(f"--warmup={study.warmup:g}")
        if any(f.protocol == "sctp" for f in flows) and len(topo.paths) > 1:
            active.append("-L" + ",".join(topo.active_addresses()))
        active += study.args_for("active", values)
        for f in flows:
            active += f.argument()
        return passive, active

    def _attempt(self, topo, values, partial):
        passive_cmd, active_cmd = self._commands(topo, values)
        with open(os.path.join(partial, "environment.txt"), "w") as env:
            env.write(f"kernel: {platform.uname().release} ({platform.uname().version})\n")
            env.write(f"netperfmeter: {self.tools.version('netperfmeter')}\n")
            env.write(f"python: {platform.python_version()}\n")
            env.write(f"variables: {json.dumps(values)}\n")
            env.write(f"passive: {subprocess.list2cmdline(passive_cmd)}\n")
            env.write(f"active: {subprocess.list2cmdline(active_cmd)}\n")
            env.write(self.topo_text)
        passive_log = os.path.join(partial, "passive.log")
        with open(passive_log, "w") as plog, open(os.path.join(partial, "active.log"), "w") as alog:
            passive = subprocess.Popen(passive_cmd, stdout=subprocess.DEVNULL, stderr=plog, cwd=partial,
                                       start_new_session=True)
            self.current = [passive]
            try:
                self._wait_for_passive(passive, passive_log)
                active = subprocess.Popen(active_cmd, stdout=alog, stderr=subprocess.STDOUT, cwd=partial,
                                          start_new_session=True)
                self.current.append(active)
                try:
                    code = active.wait(timeout=self.study.runtime + 90)
                except subprocess.TimeoutExpired:
                    self._stop(active, timeout=5)
                    raise LabError(f"the active netperfmeter did not finish within {self.study.runtime + 90:g} s")
            finally:
                for p in reversed(self.current):
                    self._stop(p)
                self.current = []
        if code != 0:
            with open(os.path.join(partial, "active.log"), errors="replace") as f:
                lines = [l for l in f.read().splitlines() if l.strip()]
            raise LabError(f"netperfmeter failed (exit {code}): {lines[-1] if lines else 'no output'}")
        if not complete(partial):
            raise LabError("netperfmeter ended without complete scalar files")

    def run_one(self, values, rep, progress):
        final = self.run_dir(values, rep)
        if os.path.isdir(final):
            if self.resume and complete(final):
                progress.finish(f"run {label(values)} r{rep}: complete, kept")
                return False
            shutil.rmtree(final)
        text = f"{label(values)} r{rep}"
        progress.start(text, self.study.runtime + 3)
        topo = self._topology_for(values)
        partial = os.path.join(self.outdir, "runs", f".partial-{label(values)}-r{rep}")
        for attempt in range(self.retries + 1):
            shutil.rmtree(partial, ignore_errors=True)
            os.makedirs(partial)
            began = time.monotonic()
            try:
                self._attempt(topo, values, partial)
                break
            except LabError as e:
                if attempt == self.retries:
                    failed = os.path.join(self.outdir, "runs", f".failed-{label(values)}-r{rep}")
                    shutil.rmtree(failed, ignore_errors=True)
                    os.rename(partial, failed)
                    raise LabError(f"run {text}: {e} (logs in {failed})")
                progress.stream.write(f"\nrun {text}: {e}; repeating it\n")
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
        os.rename(partial, final)
        progress.finish(f"run {text}: done in {time.monotonic() - began:.1f} s")
        return True

    # -------------------------------------------------------------- metrics
    def metrics_of(self, run_dir):
        scalars = {}
        for side in ("active", "passive"):
            scalars.update(stats.read_scalars(os.path.join(run_dir, f"run-{side}.sca.bz2"), side))
        out = {}
        for m in self.study.metrics:
            try:
                out[m.name] = expr.evaluate(m.tree, scalars)
            except (KeyError, ZeroDivisionError, TypeError, ValueError) as e:
                raise LabError(f"{run_dir}: metric {m.name}: {e.args[0] if e.args else e}")
        return out

    def _main_converged(self, values, reps):
        samples = [self.metrics_of(self.run_dir(values, r))[self.study.metrics[0].name] for r in reps]
        n, mean, low, high = stats.mean_ci(samples, LEVEL)
        if n < 2 or mean == 0:
            return False
        return (high - low) / 2 <= abs(mean) * self.ci_target / 100

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
    def run(self):
        study = self.study
        os.makedirs(os.path.join(self.outdir, "runs"), exist_ok=True)
        for entry in os.listdir(os.path.join(self.outdir, "runs")):
            if entry.startswith(".partial-"):
                shutil.rmtree(os.path.join(self.outdir, "runs", entry), ignore_errors=True)
        combos = list(study.combinations())
        if self.ci_target is not None:
            first = study.min_repetitions
        else:
            first = self.repetitions or study.repetitions
        progress = Progress(len(combos) * first)
        old = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            for values in combos:
                reps = list(range(1, first + 1))
                for rep in reps:
                    self.run_one(values, rep, progress)
                if self.ci_target is not None:
                    while not self._main_converged(values, reps):
                        if len(reps) >= study.max_repetitions:
                            self.unconverged.append(values)
                            break
                        reps.append(len(reps) + 1)
                        progress.grow(1)
                        self.run_one(values, reps[-1], progress)
        finally:
            for p in self.current:
                self._stop(p, timeout=3)
            self._teardown()
            progress.close()
            for s, h in old.items():
                signal.signal(s, h)

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

    def summarize(self):
        study = self.study
        runs = self.runs_done()
        if not runs:
            raise LabError(f"{self.outdir}: no complete runs to summarize")
        variables = study.variables
        # createsummary: one table per scalar, the study's variables and the repetition as columns
        with open(os.path.join(self.outdir, "results.summary"), "w") as f:
            f.write("--varnames=" + " ".join(variables + ["Repetition"]) + "\n")
            f.write("--resultsdirectory=tables\n")
            for values, rep, run_dir in runs:
                for side in ("active", "passive"):
                    f.write("--values=" + " ".join(str(values[v]) for v in variables) + f" {rep}\n")
                    f.write(f"--input={os.path.relpath(run_dir, self.outdir)}/run-{side}.sca.bz2\n")
        tables = os.path.join(self.outdir, "tables")
        shutil.rmtree(tables, ignore_errors=True)
        os.makedirs(tables)
        with open(os.path.join(self.outdir, "results.summary")) as f:
            r = subprocess.run([self.tools["createsummary"], "--batch", "--quiet"],
                               stdin=f, cwd=self.outdir, capture_output=True, text=True)
        if r.returncode != 0:
            raise LabError(f"createsummary failed: {(r.stderr or r.stdout).strip()}")

        rows = []
        for values, rep, run_dir in runs:
            rows.append((values, rep, self.metrics_of(run_dir)))
        with open(os.path.join(self.outdir, "runs.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(variables + ["repetition"] + [m.name for m in study.metrics])
            for values, rep, metrics in rows:
                w.writerow([values[v] for v in variables] + [rep] + [repr(metrics[m.name]) for m in study.metrics])
        summary = []
        with open(os.path.join(self.outdir, "summary.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(variables + ["metric", "n", "mean", "ci_low", "ci_high"])
            for values in study.combinations():
                for m in study.metrics:
                    samples = [metrics[m.name] for v, _, metrics in rows if v == values]
                    if not samples:
                        continue
                    n, mean, low, high = stats.mean_ci(samples, LEVEL)
                    w.writerow([values[v] for v in variables] + [m.name, n, repr(mean), repr(low), repr(high)])
                    summary.append((values, m.name, n, mean, low, high))
        # per metric a table for the plotter: the variables, the repetition, the value
        for m in study.metrics:
            path = os.path.join(tables, f"lab-{m.name}.data.bz2")
            with bz2.open(path, "wt") as f:
                f.write(" ".join(variables + ["Repetition", m.name]) + "\n")
                for values, rep, metrics in rows:
                    f.write(" ".join(str(values[v]) for v in variables) + f" {rep} {metrics[m.name]!r}\n")
        return summary

    def plot(self):
        study = self.study
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
            cmd = [self.tools["plot-netperfmeter-summary"], os.path.join(self.outdir, "tables", f"lab-{m.name}.data.bz2"),
                   "-x", x, "-y", m.name, "-o", pdf, f"--confidence={LEVEL}",
                   f"--ylab={m.name.replace('_', ' ')}" + (f" [{m.unit}]" if m.unit else ""),
                   f"--title={study.name}: {m.name.replace('_', ' ')}"]
            if colour:
                cmd += ["-c", colour]
            if facets:
                cmd += ["-r", facets[0]]
            if len(facets) > 1:
                cmd += ["-k", facets[1]]
            if "xlab" in study.plot and x == study.plot.get("x"):
                cmd.append(f"--xlab={study.plot['xlab']}")
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise LabError(f"plot-netperfmeter-summary failed for {m.name}: "
                               f"{(r.stderr or r.stdout).strip().splitlines()[-1:]}")
            written.append(pdf)
        return written
