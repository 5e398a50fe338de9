#!/usr/bin/env python3
"""Benchmark: a saturated QUIC transfer on loopback, netperfmeter against ngtcp2's own example
client and server (Debian's ngtcp2-client and ngtcp2-server: gtlsclient, gtlsserver, on the same
libngtcp2 0.12 and GnuTLS), alternating, several rounds.

Both transfers go the same way, from the QUIC client to the QUIC server (an upload):
  netperfmeter  the active's saturated flow to the passive (-quic const0:constSIZE), one stream of
                one connection; goodput = the passive's received bytes over its first to last
                reception (scalar file), the payload without NPMP's frame headers;
  ngtcp2        gtlsclient POSTs a file of BYTES (-d, HTTP/3 request body) to gtlsserver, which
                answers once the whole body has arrived (404: it serves no such file; a logged
                upload of 100 kB checks that order first); goodput = BYTES over the client's wall
                time (start, handshake, upload, answer: a few ms more than the transfer, which
                counts against ngtcp2).
Both use CUBIC (--cc) and the same receive windows at the server: netperfmeter's (1 MiB per
stream, 8 MiB per connection, auto-tuned up to 16 and 64 MiB) given to gtlsserver. CPU seconds
per GB: user + system time of both processes (the client's from its exit, the server's from
/proc) over the bytes transferred. Prints the medians, the ratio netperfmeter/ngtcp2 and each
round's figures. BYTES is chosen so that an ngtcp2 upload takes about --seconds (from a first,
uncounted upload) unless --bytes says.

    quic_peers.py NETPERFMETER [--seconds 5] [--rounds 5] [--size 16000] [--bytes N]

Two runs of 2026-11-28 on this 2-core machine, otherwise idle: netperfmeter 1473 and 1719 Mbit/s,
ngtcp2 1280 and 1354 Mbit/s (ratio 1.15 and 1.27), 9-10 CPU s/GB for both.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import cpu_seconds, passive_goodput, stop_servers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src", "lab"))
import harness  # noqa: E402  (ports from the harness's blocks)
from npmlab import tls  # noqa: E402  (a throw-away CA and server certificate, made with openssl)

CC = "cubic"
# netperfmeter's receive windows (src/quic/connection.h, Limits), for gtlsserver too
WINDOWS = ["--max-stream-data-bidi-remote=1M", "--max-data=8M", "--max-stream-window=16M", "--max-window=64M"]


def run_client(cmd, server_pid, timeout, cwd):
    """(CPU seconds of client and server, wall seconds of the client)."""
    before, start = cpu_seconds(server_pid), os.times()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    end = os.times()
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
    cpu = (end.children_user - start.children_user) + (end.children_system - start.children_system)
    return cpu + cpu_seconds(server_pid) - before, end.elapsed - start.elapsed


class Netperfmeter:
    name = "netperfmeter"

    def __init__(self, binary, workdir, files, size, seconds):
        self.binary, self.dir, self.files, self.size, self.seconds = binary, workdir, files, size, seconds
        self.port, (udp,) = harness.free_base_port(udp_ports=1)  # QUIC on UDP port - 1; userland SCTP's port
        self.log = open(os.path.join(workdir, "passive.log"), "w")
        self.server = subprocess.Popen([binary, str(self.port), "-nodisplay", f"--sctp-udp-port={udp}",
                                        f"--tls-key={files['server.key']}", f"--tls-cert={files['server.pem']}"],
                                       cwd=workdir, stdout=subprocess.DEVNULL, stderr=self.log)
        try:
            harness.wait_for_text(lambda: open(self.log.name).read(), "waiting for incoming connections",
                                  proc=self.server)
        except BaseException:
            self.server.kill()
            self.server.wait()
            raise

    def round(self):
        """(goodput bit/s, CPU s per GB, payload bytes)."""
        cmd = [self.binary, f"127.0.0.1:{self.port}", "-control-over-tcp", "-nodisplay", "-q",
               f"-runtime={self.seconds:g}", "-scalar=bench.sca", f"--tls-ca={self.files['ca.pem']}",
               f"--tls-hostname={tls.HOSTNAME}", "-quic", f"const0:const{self.size}:cc={CC}"]
        cpu, _ = run_client(cmd, self.server.pid, self.seconds + 60, self.dir)
        received, rate = passive_goodput(os.path.join(self.dir, "bench-passive.sca"))
        return rate, cpu / (received / 1e9), received


class Ngtcp2:
    name = "ngtcp2"

    def __init__(self, workdir, files):
        self.dir = workdir
        self.port = harness.take_ports(1, kinds=(harness.socket.SOCK_DGRAM,))
        self.log = open(os.path.join(workdir, "gtlsserver.log"), "w")
        self.server = subprocess.Popen(["gtlsserver", "-q", "--no-quic-dump", "--no-http-dump", f"--cc={CC}",
                                        *WINDOWS, "-d", workdir, "127.0.0.1", str(self.port), files["server.key"],
                                        files["server.pem"]], cwd=workdir, stdout=self.log, stderr=subprocess.STDOUT)
        time.sleep(0.5)
        if self.server.poll() is not None:
            raise SystemExit(f"gtlsserver exited ({self.server.returncode}): {open(self.log.name).read()[-500:]}")
        self.data = os.path.join(workdir, "upload.bin")

    def command(self, nbytes, quiet=True):
        with open(self.data, "wb") as f:
            f.truncate(nbytes)  # sparse: reading it costs no disk
        return ["gtlsclient", *(["-q"] if quiet else []), "--no-quic-dump", "--no-http-dump",
                "--exit-on-all-streams-close", f"--cc={CC}", "-m", "POST", "-d", self.data, "127.0.0.1",
                str(self.port), f"https://{tls.HOSTNAME}/upload"]

    def check(self):
        """gtlsserver answers a POST once its body has arrived (without --early-response): a small
        upload, logged, must end with the answer (404: no such file) after all of the body."""
        r = subprocess.run(self.command(100000, quiet=False), capture_output=True, text=True, timeout=60)
        log = r.stdout + r.stderr
        frames = list(re.finditer(r"frm tx \d+ 1RTT STREAM\(0x0[a-f]\) id=0x0 fin=\d offset=(\d+) len=(\d+)", log))
        answer = log.find(":status: 404")
        if r.returncode != 0 or answer < 0 or not frames or frames[-1].start() > answer or \
                max(int(m.group(1)) + int(m.group(2)) for m in frames) < 100000:
            raise SystemExit(f"gtlsclient's upload did not end as expected (exit {r.returncode}):\n{log[-1500:]}")

    def round(self, nbytes):
        """(goodput bit/s, CPU s per GB, payload bytes) of an upload of `nbytes`."""
        cpu, wall = run_client(self.command(nbytes), self.server.pid, 600, self.dir)
        return nbytes * 8 / wall, cpu / (nbytes / 1e9), nbytes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("netperfmeter")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=16000, help="netperfmeter's frame size (bytes)")
    parser.add_argument("--bytes", type=int, help="ngtcp2's upload (default: about --seconds of it)")
    args = parser.parse_args()
    for tool, package in (("gtlsclient", "ngtcp2-client"), ("gtlsserver", "ngtcp2-server"), ("openssl", "openssl")):
        if not shutil.which(tool):
            print(f"SKIP: {tool} is not installed (Debian package {package})")
            return 77
    npm = os.path.abspath(args.netperfmeter)
    if tls.quic_built(npm) is False:
        print(f"SKIP: {npm} was built without QUIC")
        return 77
    workdir = tempfile.mkdtemp(prefix="npm-bench-quic-")
    files = tls.ensure(workdir)
    sides = []
    try:
        for name in ("npm", "ngtcp2"):
            os.makedirs(os.path.join(workdir, name))
        sides.append(Netperfmeter(npm, os.path.join(workdir, "npm"), files, args.size, args.seconds))
        sides.append(Ngtcp2(os.path.join(workdir, "ngtcp2"), files))
        npm_side, ngtcp2 = sides
        ngtcp2.check()
        nbytes = args.bytes
        if nbytes is None:  # about --seconds of ngtcp2's upload, from a first one that is not counted
            rate, _, _ = ngtcp2.round(200_000_000)
            nbytes = int(rate / 8 * args.seconds)
        print(f"QUIC on loopback, client -> server (upload), {CC}; netperfmeter: -quic const0:const{args.size} for "
              f"{args.seconds:g} s; ngtcp2: gtlsclient -m POST -d FILE of {nbytes / 1e6:.0f} MB to gtlsserver "
              f"({' '.join(WINDOWS)}); {args.rounds} rounds, alternating; {os.cpu_count()} cores; load "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; medians")
        rates = {s.name: [] for s in sides}
        cpus = {s.name: [] for s in sides}
        for r in range(args.rounds):
            for side in (sides if r % 2 == 0 else sides[::-1]):  # alternating, and who goes first too
                rate, cpu, _ = side.round() if side is npm_side else side.round(nbytes)
                rates[side.name].append(rate)
                cpus[side.name].append(cpu)
        a, b = statistics.median(rates["netperfmeter"]), statistics.median(rates["ngtcp2"])
        print(f"{'netperfmeter Mbit/s':>20} {'ngtcp2 Mbit/s':>14} {'ratio':>6} {'npm CPU s/GB':>13} "
              f"{'ngtcp2 CPU s/GB':>16}")
        print(f"{a / 1e6:>20.1f} {b / 1e6:>14.1f} {a / b:>6.3f} {statistics.median(cpus['netperfmeter']):>13.2f} "
              f"{statistics.median(cpus['ngtcp2']):>16.2f}")
        for name in ("netperfmeter", "ngtcp2"):
            print(f"  {name} rounds: Mbit/s {' '.join(f'{x / 1e6:.0f}' for x in rates[name])}; CPU s/GB "
                  f"{' '.join(f'{x:.2f}' for x in cpus[name])}")
        print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        stop_servers([s.server for s in sides if s.name == "netperfmeter"],
                     [s.server for s in sides if s.name == "ngtcp2"], workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
