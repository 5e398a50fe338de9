#!/usr/bin/env python3
"""Benchmark: createsummary --batch on a large parameter study against bzip2 itself.

The floor is what bzip2 needs on one core for the same bytes in the same run:
  one process decompressing all inputs   (cat */*.sca.bz2 | bzip2 -dc >/dev/null)
  one process compressing all tables     (cat <plain tables> | bzip2 -9 >/dev/null)
Target: createsummary wall time <= 1.0 x floor. Prints peak memory (max RSS) as well.

usage: bench_createsummary.py BUILD_DIR [--runs N] [--repeat K] [--keep DIR]
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(command, cwd, stdin=None):
    """Runs a shell command; returns (wall seconds, max RSS kB of its processes)."""
    start = time.perf_counter()
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as inp:
        proc = subprocess.Popen(command, shell=True, cwd=cwd, stdin=inp,
                                stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit("command failed (%d): %s" % (proc.returncode, command))
    return wall, usage.ru_maxrss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build_dir")
    parser.add_argument("--runs", type=int, default=300, help="runs (2 files each)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", help="use/keep the study in this directory")
    args = parser.parse_args()
    createsummary = os.path.join(os.path.abspath(args.build_dir), "src", "tools", "createsummary")
    if not os.access(createsummary, os.X_OK):
        sys.exit("no createsummary in %s" % args.build_dir)

    work = args.keep or tempfile.mkdtemp(prefix="npm-bench-tools-")
    try:
        if not os.path.exists(os.path.join(work, "results.summary")):
            print("generating %d scalar files in %s ..." % (2 * args.runs, work), flush=True)
            subprocess.run([sys.executable, os.path.join(HERE, "gen_parameter_study.py"), work,
                            "--runs", str(args.runs)], check=True)
        inputs = sorted(glob.glob(os.path.join(work, "run-*", "*.sca.bz2")))
        in_bytes = sum(os.path.getsize(f) for f in inputs)
        summary = os.path.join(work, "results.summary")

        # Plain tables once, for the compression half of the floor.
        plain = os.path.join(work, "plain")
        shutil.rmtree(plain, ignore_errors=True)
        with open(summary) as f:
            commands = "--resultsdirectory=plain\n" + f.read()
        with open(os.path.join(work, "plain.summary"), "w") as f:
            f.write(commands)
        timed("%s --batch -q -c 0" % createsummary, work, os.path.join(work, "plain.summary"))
        tables = sorted(glob.glob(os.path.join(plain, "*.data")))
        table_bytes = sum(os.path.getsize(f) for f in tables)
        with open(os.path.join(work, "tables.list"), "w") as f:
            f.write("\n".join(tables) + "\n")
        with open(os.path.join(work, "inputs.list"), "w") as f:
            f.write("\n".join(inputs) + "\n")

        out = os.path.join(work, "out")
        with open(os.path.join(work, "bench.summary"), "w") as f:
            f.write("--resultsdirectory=out\n" + open(summary).read())
        results = []
        for i in range(args.repeat):
            shutil.rmtree(out, ignore_errors=True)
            dec, _ = timed("xargs cat <inputs.list | bzip2 -dc >/dev/null", work)
            comp, _ = timed("xargs cat <tables.list | bzip2 -9 >/dev/null", work)
            wall, rss = timed("%s --batch -q" % createsummary, work,
                              os.path.join(work, "bench.summary"))
            floor = dec + comp
            results.append((wall / floor, wall, floor, dec, comp, rss))
            print("round %d: createsummary %.3f s, floor %.3f s (decompress %.3f + compress "
                  "%.3f) -> %.2fx, peak RSS %.1f MB" % (i + 1, wall, floor, dec, comp,
                                                        wall / floor, rss / 1024), flush=True)
        results.sort()
        ratio, wall, floor, dec, comp, rss = results[len(results) // 2]
        print("inputs: %d files, %.1f MB compressed; outputs: %d tables, %.1f MB uncompressed"
              % (len(inputs), in_bytes / 1e6, len(tables), table_bytes / 1e6))
        print("median: createsummary %.3f s vs bzip2 floor %.3f s = %.2fx (target <= 1.0x); "
              "peak RSS %.1f MB" % (wall, floor, ratio, rss / 1024))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
