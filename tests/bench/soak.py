#!/usr/bin/env python3
"""Soak a passive with hostile peers, killed actives and many short runs; print its figures.

    python3 tests/bench/soak.py build/src/app/netperfmeter [--hostile 10000] [--killed 100]
                                [--runs 1000] [--port 25000]

One passive (default limits) on loopback meets, in this order:
  1. --hostile connections: garbage, impossible lengths, lengths that never arrive, silent
     and half-open connections to its control and data ports, and UDP garbage;
  2. --killed actives, each SIGKILLed while its measurement runs;
  3. --runs short normal runs, alternating control over TCP and over SCTP (userland).
Then it checks that the passive is alive and that its file descriptors and memory are back
at their baseline, and prints the figures. Not a timed test: a script for the note.
"""

import argparse
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def hostile(port, kind, rng):
    """One hostile connection of `kind`; returns nothing, raises nothing."""
    target = port + 1 if kind % 2 == 0 else port  # control or data port
    try:
        if kind == 6:  # UDP garbage
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                u.sendto(rng.randbytes(rng.randint(1, 1500)), ("127.0.0.1", port))
            return
        s = socket.create_connection(("127.0.0.1", target), timeout=2)
        with s:
            if kind in (0, 1):  # garbage
                s.sendall(rng.randbytes(rng.randint(1, 4000)))
            elif kind in (2, 3):  # a plausible header whose message never completes
                s.sendall(struct.pack("!BBH", rng.choice([2, 4, 6, 7]), 0, rng.randint(194, 65535)) + b"\0" * 10)
            elif kind == 4:  # half-open: nothing more will come
                s.shutdown(socket.SHUT_WR)
            elif kind == 5:  # an impossible length
                s.sendall(struct.pack("!BBH", 1, 0, 2))
            time.sleep(rng.random() * 0.05)
            if rng.random() < 0.5:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
    except OSError:
        pass


def wait_settled(pid, baseline_fds, limit):
    """Waits (up to `limit` s) until the passive's descriptors are back at the baseline."""
    end = time.monotonic() + limit
    while time.monotonic() < end and fds(pid) > baseline_fds:
        time.sleep(0.5)
    return fds(pid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("netperfmeter")
    ap.add_argument("--hostile", type=int, default=10000)
    ap.add_argument("--killed", type=int, default=100)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--port", type=int, default=25000)
    ap.add_argument("--sctp-udp-port", type=int, default=9960, help="the passive's SCTP/UDP encapsulation port")
    a = ap.parse_args()
    npm, port = os.path.abspath(a.netperfmeter), a.port
    rng = random.Random(1)
    work = tempfile.mkdtemp(prefix="npm-soak-")
    log = open(os.path.join(work, "passive.log"), "w")
    passive = subprocess.Popen([npm, str(port), "-nodisplay", "-loglevel=3", f"--sctp-udp-port={a.sctp_udp_port}"],
                               stdout=subprocess.DEVNULL, stderr=log)
    try:
        soak(a, npm, port, rng, work, log, passive)
    finally:
        if passive.poll() is None:
            passive.kill()


def soak(a, npm, port, rng, work, log, passive):
    sctp = f"--sctp-remote-udp-port={a.sctp_udp_port}"
    time.sleep(1.0)
    if passive.poll() is not None:
        sys.exit(f"the passive did not start: see {log.name}")
    pid = passive.pid
    # Warm up once with each control transport, then take the baseline.
    for control in ("-y", "-x"):
        subprocess.run([npm, f"127.0.0.1:{port}", control, sctp, "-nodisplay", "-runtime=0.2",
                        "-tcp", "const10:const100"], cwd=work, capture_output=True, timeout=60)
    base_fds, base_rss = fds(pid), rss_mib(pid)
    print(f"baseline: {base_fds} fds, {base_rss:.1f} MiB RSS")

    begin = time.monotonic()
    with ThreadPoolExecutor(max_workers=64) as pool:
        list(pool.map(lambda i: hostile(port, i % 7, random.Random(i)), range(a.hostile)))
    peak_rss = rss_mib(pid)
    print(f"{a.hostile} hostile connections in {time.monotonic() - begin:.1f} s: passive alive="
          f"{passive.poll() is None}, {fds(pid)} fds, {peak_rss:.1f} MiB RSS right after")

    begin = time.monotonic()
    for i in range(a.killed):
        active = subprocess.Popen([npm, f"127.0.0.1:{port}", "-y" if i % 2 else "-x", sctp, "-nodisplay", "-runtime=30",
                                   "-vector=k.vec", "-tcp", "const0:const1400:const50:const500"],
                                  cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3 + rng.random() * 0.7)
        active.send_signal(signal.SIGKILL)
        active.wait()
    print(f"{a.killed} SIGKILLed actives in {time.monotonic() - begin:.1f} s: passive alive={passive.poll() is None}")

    begin = time.monotonic()
    failures = []
    for i in range(a.runs):
        control = "-y" if i % 2 == 0 else "-x"
        r = subprocess.run([npm, f"127.0.0.1:{port}", control, sctp, "-nodisplay", "-runtime=0.1", "-scalar=run.sca",
                            "-tcp", "const20:const200:const20:const200"], cwd=work, capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            failures.append((i, control, r.stderr.strip().splitlines()[-1:] if r.stderr else ""))
    print(f"{a.runs} short runs (TCP and SCTP control alternating) in {time.monotonic() - begin:.1f} s: "
          f"{len(failures)} failed {failures[:5]}")

    end_fds = wait_settled(pid, base_fds, 60)
    time.sleep(1.5)  # memory is returned at most once a second
    # One more run, whose end returns the memory freed so far.
    subprocess.run([npm, f"127.0.0.1:{port}", "-y", "-nodisplay", "-runtime=0.1", "-tcp", "const10:const100"],
                   cwd=work, capture_output=True, timeout=60)
    end_rss = rss_mib(pid)
    alive = passive.poll() is None
    print(f"after: passive alive={alive}, {end_fds} fds (baseline {base_fds}), {end_rss:.1f} MiB RSS "
          f"(baseline {base_rss:.1f}, +{end_rss - base_rss:.1f})")
    passive.send_signal(signal.SIGINT)
    passive.wait(timeout=20)
    ok = alive and not failures and end_fds <= base_fds and end_rss - base_rss < 16
    print("PASS" if ok else "FAIL", f"(passive log: {log.name})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
