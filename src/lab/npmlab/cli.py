"""netperfmeter-lab: list | run STUDY|FILE | preflight STUDY|FILE | plot DIR | db DIR | convergence DIR. See
netperfmeter-lab(1)."""

import argparse
import json
import math
import os
import shutil
import sys

from . import study as studymod
from . import convergence, evidence, hosts, preflight, regime, resultsdb, testbed, topology, traces, verdict
from .errors import Interrupted, LabError
from .runner import (FAILED_ATTEMPTS, Runner, Tools, duration, check_command_lines,
                     failed_attempts, label, run_attempts, run_evidence, run_validity)

PROGRAM = "netperfmeter-lab"

# What a run takes beyond its runtime: test bed up and down, the pairs' start, result files and
# their download, the evidence (runs of 35 s took 38.1-40.3 s on the development machine).
RUN_OVERHEAD = 5.0


def _fail(message, code=1):
    print(f"{PROGRAM}: {message}", file=sys.stderr)
    return code


def shipped(studies_dir):
    """{name: path} of the shipped studies, those in folders (ablations/...) by their path there."""
    out = {}
    if os.path.isdir(studies_dir):
        for folder, dirs, files in sorted(os.walk(studies_dir)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".toml"):
                    path = os.path.join(folder, name)
                    out[os.path.relpath(path, studies_dir)[:-5]] = path
    return out


def resolve(name, studies_dir):
    # a shipped study under a folder of the studies (ablations/...) by its name there
    nested = os.path.join(studies_dir, name + ".toml")
    if os.path.sep in name and not name.endswith(".toml") and os.path.exists(nested):
        return nested
    if os.path.sep in name or name.endswith(".toml") or os.path.exists(name):
        return name
    known = shipped(studies_dir)
    if name not in known:
        raise studymod.StudyError(f"{name}: no such study (shipped: {', '.join(known) or 'none'}; "
                                  "or give a study file)")
    return known[name]


def cmd_list(args, config):
    known = shipped(config["studies"])
    if not known:
        return _fail(f"no studies in {config['studies']}")
    width = max(map(len, known))
    for name, path in known.items():
        try:
            s = studymod.load(path)
            print(f"{name:<{width}}  {s.description}" + (f" [{s.reproduces}]" if s.reproduces else ""))
        except studymod.StudyError as e:
            print(f"{name:<{width}}  (unreadable: {e})")
    return 0


def _remote(study):
    """Whether the study's test bed is reached over ssh (the hosts) rather than built here: its
    registered class says (testbed.py)."""
    return testbed.get(study.topology).remote


def _check_root():
    if os.geteuid() != 0:
        raise LabError("building namespaces needs root (run as root or with CAP_NET_ADMIN and CAP_SYS_ADMIN)")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise LabError(f"{tool} (iproute2) is not installed")


def _report(runner, summary, pdfs, out):
    main = runner.study.metrics[0]
    unit = f" {main.unit}" if main.unit else ""
    print(f"{len(runner.runs_done())} runs in {out}; summary.csv:")
    for values, metric, n, mean, low, high, procedure in summary:
        if metric == main.name:
            spread = procedure if math.isnan(low) else f"[{low:.6g}, {high:.6g}]"
            print(f"  {label(values):<40} {metric} = {mean:.6g}{unit} {spread} (n={n})")
    for rule in runner.verdicts:
        print(f"  verdict {rule['key']} ({rule['claim']}): {rule['verdict']}: {rule['reason']}")
    for pdf in pdfs:
        print(f"  plot: {pdf}")
    print(f"  database: {os.path.join(out, resultsdb.NAME)}")
    if runner.unconverged:
        print("the wanted half-width needs more than max_repetitions runs: " +
              "; ".join(label(v) for v in runner.unconverged))
    invalid = [run for run in runner.runs_done() if run_evidence(run[2]).get("valid") is False]
    if invalid:
        print(f"{len(invalid)} run(s) did not measure what the study asks for and are left out of the summary "
              "(runs.csv and each run's evidence.json say why):")
        for values, rep, run_dir in invalid:
            print(f"  {label(values)} r{rep}: {'; '.join(run_evidence(run_dir).get('problems', []))}")
    repeated = [(v, rep, d) for v, rep, d in runner.runs_done() if failed_attempts(d)]
    if repeated:
        print(f"{len(repeated)} run(s) were repeated after a failed attempt (runs.csv: failed_attempts; "
              f"each attempt in the run's {FAILED_ATTEMPTS}/):")
        for values, rep, run_dir in repeated:
            for record in run_attempts(run_dir)["failed"]:
                print(f"  {label(values)} r{rep}, attempt {record.get('attempt')}: {record.get('error')}")


def _dry_run(study, args, out):
    """What `run` would do: the sweep, the number of runs and about how long they take."""
    combinations = len(list(study.combinations()))
    print(f"{study.name}{' (quick form)' if args.quick else ''}: {study.description}")
    if study.reproduces:
        print(f"  reproduces: {study.reproduces}")
    if study.hosts is not None:
        for pair in study.hosts.pairs:
            print(f"  hosts: pair {pair.number}: active {pair.active}, passive {pair.passive}, "
                  f"{len(pair.paths)} path(s)")
    for var, values in study.sweep.items():
        print(f"  {var}: {', '.join(map(str, values))}")
    for rule in study.exclude:
        print(f"  excluded: {label(rule)}")
    each = f"runs of {study.runtime:g} s" + (f" ({study.warmup:g} s warm-up)" if study.warmup else "")
    per_run = study.runtime + RUN_OVERHEAD
    if args.ci_target is not None:
        low, high = combinations * study.min_repetitions, combinations * study.max_repetitions
        print(f"  {combinations} combinations x {study.min_repetitions} to {study.max_repetitions} repetitions "
              f"(--ci-target {args.ci_target:g} %): {low} to {high} {each}, about {duration(low * per_run)} to "
              f"{duration(high * per_run)}")
    else:
        repetitions = args.repetitions or study.repetitions
        runs = combinations * repetitions
        print(f"  {combinations} combinations x {repetitions} repetitions = {runs} {each}, about "
              f"{duration(runs * per_run)}")
    print(f"  results: {out}")
    if study.verdicts:
        print("  verdict rules (the pairs each needs to show its claim):")
        most = study.max_repetitions if args.ci_target is not None else args.repetitions or study.repetitions
        for line in verdict.power(study, most):
            print(line)
    if not _remote(study) and shutil.which("tshark") is None:
        print(f"{PROGRAM}: warning: tshark is not installed: run checks every run against a capture, and does not "
              "start without it", file=sys.stderr)
    return 0


def cmd_run(args, config):
    path = resolve(args.study, config["studies"])
    study = studymod.load(path, quick=args.quick)
    out = args.output or f"{study.name}{'-quick' if args.quick else ''}"
    if args.ci_target is not None and not 0 < args.ci_target < 100:
        raise LabError("--ci-target is a percentage above 0 and below 100")
    if args.repetitions is not None and not 1 <= args.repetitions <= 10000:
        raise LabError("--repetitions must be 1 to 10000")
    if not args.max_other_load >= 0:
        raise LabError("--max-other-load must be a number of cores, 0 or more")
    if not args.max_process_load > 0:
        raise LabError("--max-process-load must be a number of cores above 0")
    if not args.max_lateness > 0:
        raise LabError("--max-lateness must be a number of microseconds above 0")
    for var in study.unused:
        print(f"{PROGRAM}: warning: the sweep variable {var} is used nowhere in the study (no {{{var}}} in its "
              "paths, flows, metrics or options): its runs differ in their names only", file=sys.stderr)
    full = studymod.SCTP_DATA_PER_PACKET
    for number, direction, size, tail in study.short_tails:
        print(f"{PROGRAM}: warning: flow {number}'s {size}-byte {direction} messages take {-(-size // full)} SCTP "
              f"packets each on the test bed (1500-byte MTU, UDP encapsulation: {full} bytes of data per packet), "
              f"the last with {tail} bytes; {full}-byte messages fill one packet", file=sys.stderr)
    resultsdb.check(study)
    if args.parallel < 1:
        raise LabError("--parallel must be 1 or more")
    if not _remote(study) and args.parallel != 1:
        raise LabError("--parallel runs pairs of hosts at the same time: only a study on hosts (topology = \"hosts\") "
                       "has them")
    if study.hosts is not None and args.parallel > len(study.hosts.pairs):
        raise LabError(f"--parallel={args.parallel}: the study has {len(study.hosts.pairs)} pair(s) of hosts "
                       "([hosts] and [[hosts.pairs]])")
    _check_command_lines(study, Tools(config["tools"])["netperfmeter"], warn=args.dry_run)
    if args.dry_run:
        _dry_run(study, args, out)
    _check_regime(study, show=args.dry_run)
    if args.dry_run:
        return 0
    if _remote(study):
        return _run_on_hosts(study, args, config, path, out)
    _check_root()
    runner = testbed.get(study.topology).runner_class()(
        study, out, Tools(config["tools"]), repetitions=args.repetitions, ci_target=args.ci_target,
        resume=args.resume, retries=args.retries, seed=_seed(args, out), **_limits(args))
    runner.check_capture()
    runner.check_congestion_controls()
    runner.check_quic()
    _check_output(out, args)
    for stale in topology.remove_stale():
        print(f"{PROGRAM}: removed the leftover namespace {stale}", file=sys.stderr)
    return _run(runner, study, args, path, out)


def _check_regime(study, show):
    """The study's [[regime]] against the paper's (npmlab/regime.py): printed when `show`; a
    mismatch without a reason is an error (before anything runs)."""
    table = regime.regime_table(study)
    if show and table:
        print("  regime (the paper's against this study's, at each sweep point):")
        for line in regime.report(table):
            print(line)
    problems = regime.errors(table)
    if problems:
        for problem in problems[1:]:
            print(f"{PROGRAM}: {study.path}: regime: {problem}", file=sys.stderr)
        raise LabError(f"{study.path}: regime: {problems[0]}" +
                       (f" ({len(problems) - 1} more above)" if len(problems) > 1 else ""))


def _limits(args):
    """The runs' limits beyond which a run is invalid (--max-other-load, --max-process-load, --max-lateness)."""
    return {"max_other_load": args.max_other_load, "max_process_load": args.max_process_load,
            "max_lateness_us": args.max_lateness}


def _check_command_lines(study, netperfmeter, warn):
    """The study's active command lines through netperfmeter's own parser (--validate), before
    anything is built or written; on hosts with the controller's netperfmeter, where it has one.
    What could not be checked is said when `warn` (--dry-run: the check is what was asked for);
    a run then meets netperfmeter's refusal at its first attempt."""
    if _remote(study) and not warn:
        return  # a run on hosts: their preflight checks their netperfmeters, the run their parsers
    if _remote(study) and shutil.which(netperfmeter) is None:
        if warn:
            print(f"{PROGRAM}: warning: no netperfmeter here ({netperfmeter}) to check the study's FLOWSPECs and "
                  "options with: the hosts' netperfmeters will", file=sys.stderr)
        return
    try:
        unchecked = check_command_lines(study, netperfmeter)
    except LabError as e:
        if not _remote(study):
            raise
        # netperfmeter also checks what this host's kernel can do (a congestion control, DCCP):
        # the controller's, not the hosts', whose preflight checks their own.
        print(f"{PROGRAM}: warning: {e} (on this controller; the hosts' preflight checks theirs)", file=sys.stderr)
        return
    if unchecked and warn:
        print(f"{PROGRAM}: warning: {unchecked}: the study's FLOWSPECs and options were not checked",
              file=sys.stderr)


def _seed(args, out):
    """--seed, or with --resume the seed of the earlier run (the same order of runs as before)."""
    meta_path = os.path.join(out, "lab.json")
    if args.resume and args.seed is None and os.path.exists(meta_path):
        try:
            with open(meta_path) as f:
                return json.load(f).get("seed")
        except (OSError, ValueError):
            pass
    return args.seed


def _check_output(out, args):
    if os.path.exists(os.path.join(out, "lab.json")) and not args.resume:
        existing = os.listdir(os.path.join(out, "runs")) if os.path.isdir(os.path.join(out, "runs")) else []
        if any(not e.startswith(".") for e in existing):
            raise LabError(f"{out} holds runs already: --resume to continue them, or choose another -o")


def _run_on_hosts(study, args, config, path, out):
    """A study on real hosts: no root, no namespaces; the pre-flight checks first, one line per
    problem, and nothing is run (or written) when there is one."""
    _check_output(out, args)
    if hosts.uses_one_way_delay(study) and study.hosts.max_clock_offset_ms is None:
        print(f"{PROGRAM}: warning: a metric uses one-way delays, which depend on the hosts' clocks, and [hosts] "
              "sets no max_clock_offset_ms to check them against", file=sys.stderr)
    if args.parallel > 1:
        print(f"{PROGRAM}: warning: --parallel={args.parallel}: {args.parallel} pairs of hosts measure at the same "
              "time; pairs that share a link (a switch, an uplink, a bottleneck) load it together and change each "
              "other's results", file=sys.stderr)
    runner = testbed.get(study.topology).runner_class()(
        study, out, Tools(config["tools"]), parallel=args.parallel, repetitions=args.repetitions,
        ci_target=args.ci_target, resume=args.resume, retries=args.retries, seed=_seed(args, out), **_limits(args))
    try:
        runner.check_quic(local_netperfmeter=False)  # the hosts' netperfmeters: in preflight()
        problems = runner.preflight()
        for problem in problems:
            print(f"{PROGRAM}: {problem}", file=sys.stderr)
        if problems:
            raise LabError(f"{len(problems)} problem(s) with the hosts (above): nothing was run")
        return _run(runner, study, args, path, out)
    finally:
        runner.close()


def _run(runner, study, args, path, out):
    meta_path = os.path.join(out, "lab.json")
    os.makedirs(out, exist_ok=True)
    if os.path.abspath(path) != os.path.abspath(os.path.join(out, "study.toml")):
        shutil.copyfile(path, os.path.join(out, "study.toml"))
    with open(meta_path, "w") as f:
        json.dump({"study": os.path.abspath(path), "quick": args.quick, "repetitions": args.repetitions,
                   "ci_target": args.ci_target, "seed": runner.seed, **_limits(args),
                   "order": "blocks: each repetition runs every combination once, shuffled with the seed",
                   "traffic": "netperfmeter -seed per repetition and flow, derived from the seed, the same for "
                              "every combination (common random numbers); SEED= in each run's run.config",
                   "procedure": "stein two-stage (pilot: min_repetitions)" if args.ci_target else "fixed repetitions",
                   "topology": study.topology, "parallel": args.parallel,
                   "hosts": study.hosts.describe() if study.hosts is not None else None},
                  f, indent=1)
    print(f"{PROGRAM}: {study.name}: run order from seed {runner.seed} (blocks of every combination per "
          "repetition)", file=sys.stderr)
    try:
        runner.run()
    except Interrupted as e:
        kept = len(runner.runs_done())
        return _fail(f"interrupted ({e}): {kept} complete run(s) kept in {out}, the current one discarded; "
                     "--resume continues", 130)
    summary = runner.summarize()
    resultsdb.write(runner)
    pdfs = [] if args.no_plot else runner.plot() + _traces(runner)
    _report(runner, summary, pdfs, out)
    return 0


def cmd_preflight(args, config):
    """The checks of run before its first run (preflight.py), nothing run or written."""
    study, tools = studymod.load(resolve(args.study, config["studies"]), quick=args.quick), Tools(config["tools"])
    return preflight.check(study, tools, lambda: _check_command_lines(study, tools["netperfmeter"], warn=True),
                           _check_root, PROGRAM)


def cmd_plot(args, config):
    """plot and db: summarises existing results again and writes results.sqlite; plot also draws."""
    meta_path = os.path.join(args.directory, "lab.json")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise LabError(f"{args.directory}: not a netperfmeter-lab results directory ({meta_path}: {e})")
    study = studymod.load(os.path.join(args.directory, "study.toml"), quick=bool(meta.get("quick")))
    runner = Runner(study, args.directory, Tools(config["tools"]), ci_target=meta.get("ci_target"),
                    seed=meta.get("seed"))
    summary = runner.summarize()
    resultsdb.write(runner)
    _report(runner, summary, runner.plot() + _traces(runner) if args.command == "plot" else [], args.directory)
    return 0


def _traces(runner):
    """The window traces of a study with [traces] (npmlab/traces.py): its valid runs only."""
    return traces.plot(runner, lambda run_dir: run_validity(run_evidence(run_dir)) == "valid")


def main(argv, config):
    parser = argparse.ArgumentParser(prog=PROGRAM, description="Multipath transport studies on namespace test beds "
                                     "or real hosts (over ssh), measured with netperfmeter, summarised and plotted.")
    parser.add_argument("-v", "--version", action="version",
                        version=f"NetPerfMeter-Lab {config.get('version', 'unknown')}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the shipped studies")
    run = sub.add_parser("run", help="run a study (a shipped name or a study file)")
    run.add_argument("study")
    run.add_argument("--quick", action="store_true", help="the study's quick form ([quick] in its file)")
    run.add_argument("-o", "--output", help="results directory (default: the study's name)")
    run.add_argument("--repetitions", type=int, help="repetitions per parameter combination")
    run.add_argument("--ci-target", type=float, metavar="PERCENT",
                     help="Stein's two-stage procedure: a pilot of min_repetitions runs per combination fixes how "
                          "many runs give the main metric a 95%% CI half-width of PERCENT of its mean (at most "
                          "max_repetitions); the interval uses the pilot's variance, so it keeps its coverage")
    run.add_argument("--seed", type=int, help="seed of the run order (default: drawn and recorded in lab.json)")
    run.add_argument("--resume", action="store_true", help="keep complete runs of an earlier, unfinished run")
    run.add_argument("--retries", type=int, default=1, help="repeat a failed run this often (default 1)")
    run.add_argument("--no-plot", action="store_true", help="no PDFs (summary.csv and tables only)")
    run.add_argument("--dry-run", action="store_true",
                     help="say what would run (the sweep, the number of runs, about how long, the pairs each "
                          "verdict rule needs) and run nothing")
    run.add_argument("--parallel", type=int, default=1, metavar="N",
                     help="a study on hosts: run on up to N of its pairs of hosts at the same time (runs go to "
                          "whichever pair is free; pairs that share a link change each other's results)")
    run.add_argument("--max-other-load", type=float, default=evidence.FOREIGN_LOAD_LIMIT, metavar="CORES",
                     help="a run whose host was busier than its own processes by more than this (cores, on "
                          f"average) is invalid (default {evidence.FOREIGN_LOAD_LIMIT})")
    run.add_argument("--max-process-load", type=float, default=evidence.PROCESS_LOAD_LIMIT, metavar="CORES",
                     help="a run in which a netperfmeter process used more than this (cores, over its measurement) "
                          f"was bound by its CPU and is invalid (default {evidence.PROCESS_LOAD_LIMIT})")
    run.add_argument("--max-lateness", type=float, default=evidence.LATENESS_LIMIT_US, metavar="US",
                     help="a run whose delay line sent packets later than their due time by more than this at the "
                          f"99th percentile (microseconds) is invalid (default {evidence.LATENESS_LIMIT_US})")
    check = sub.add_parser("preflight", help="check a study without running it: on hosts ssh, versions, stacks, "
                           "addresses, routes, clocks, free ports; on namespaces root, tc, tshark, the delay line")
    check.add_argument("study")
    check.add_argument("--quick", action="store_true", help="the study's quick form ([quick] in its file)")
    plot = sub.add_parser("plot", help="summarise and plot existing results again")
    plot.add_argument("directory")
    db = sub.add_parser("db", help="summarise existing results again and write results.sqlite (no plots)")
    db.add_argument("directory")
    conv = sub.add_parser("convergence", help="when each run's running mean of goodput settles within a tolerance "
                          "of its final value (runs with per-flow vectors)")
    conv.add_argument("directory")
    conv.add_argument("--tolerance", type=float, default=2.0, metavar="PERCENT", help="the band (default 2)")
    conv.add_argument("--interval", type=float, default=1.0, metavar="SECONDS", help="goodput per interval (default 1)")
    conv.add_argument("--length", type=float, metavar="SECONDS", help="say whether runs measuring this long settle")
    args = parser.parse_args(argv)
    try:
        if args.command == "convergence":
            try:
                return convergence.command(args.directory, args.tolerance, args.interval, args.length)
            except ValueError as e:  # bad input, an unreadable vector or study
                return _fail(str(e))
        return {"list": cmd_list, "run": cmd_run, "preflight": cmd_preflight, "plot": cmd_plot,
                "db": cmd_plot}[args.command](args, config)
    except (studymod.StudyError, LabError) as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:
        # the reader went away (netperfmeter-lab list | head): stop quietly, as other programs do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as e:
        # a full disk, a directory that cannot be written: one line; the complete runs stay, the
        # run in progress is discarded (--resume redoes it)
        where = " -> ".join(str(f) for f in (e.filename, e.filename2) if f)  # a copy names both files
        return _fail(f"{where + ': ' if where else ''}{e.strerror or e}")
