#!/usr/bin/env python3
"""Can clients that leave QUIC handshakes half-done lock legitimate actives out? Print the figures.

    python3 tests/bench/quic_lockout.py build/src/app/netperfmeter [--connections 32] [--silent 48]
        [--port 27400]

For each mode -- Retry off (--quic-retry-above equal to --max-quic-connections: the limit is
reached first) and Retry on (the default threshold, a sixteenth of the limit) -- a passive on
loopback gets --silent real Initials (netperfmeter's own ClientHello, taken off the wire once)
from as many addresses of 127.0.0.0/8 that never answer, then at once a legitimate -quic run;
the script prints whether that run succeeded, how long it took and its error line, and the bytes
the passive sent back to the silent clients against what they sent (the anti-amplification
limit: at most 3 x). Not a timed test: a script for the note (the pass/fail version is
tests/integration/test_quic_hostile.py).
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402
import test_quic_hostile as t  # noqa: E402


def measure(binary, port, files, initial, connections, silent, retry_above, workdir):
    harness.NETPERFMETER = binary
    args = ["-X", "-tls-key", files["server.key"], "-tls-cert", files["server.pem"],
            f"--max-quic-connections={connections}"]
    if retry_above is not None:
        args.append(f"--quic-retry-above={retry_above}")
    with harness.Passive(port, *args):
        clients = t.Clients(port, silent, first_address=30)
        try:
            for i in range(silent):
                clients.send(i, initial)
            began = time.monotonic()
            run = harness.run_active(f"127.0.0.1:{port}", "-control-over-tcp", "-runtime=1", "-tls-ca",
                                     files["ca.pem"], "-quic", "const10:const1000", cwd=workdir, check=False,
                                     timeout=60)
            took = time.monotonic() - began
            time.sleep(max(0.0, began + t.HANDSHAKE_TIMEOUT + 1 - time.monotonic()))
            received = [sum(len(d) for d in clients.replies(i)) for i in range(silent)]
        finally:
            clients.close()
    error = next((line for line in run.stderr.splitlines()
                  if "QUIC" in line and ("ERROR" in line or "cannot" in line)), "")
    mode = f"--quic-retry-above={retry_above}" if retry_above is not None else "Retry at the default threshold"
    print(f"{mode}, --max-quic-connections={connections}, {silent} silent clients:")
    print(f"   legitimate run: {'succeeded' if run.returncode == 0 else 'FAILED'} (exit {run.returncode}) "
          f"after {took:.1f} s {error.strip()}")
    answered = sum(1 for r in received if r)
    print(f"   silent clients answered: {answered} of {silent}; bytes back {sum(received)} for {silent * len(initial)} "
          f"sent; the most to one client {max(received)} B for {len(initial)} B "
          f"({max(received) / len(initial):.2f} x)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binary")
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--silent", type=int, default=48)
    p.add_argument("--port", type=int, default=27400)
    a = p.parse_args()
    harness.NETPERFMETER = os.path.abspath(a.binary)
    with tempfile.TemporaryDirectory() as d:
        files = t.make_certificates(d)
        initial = t.harvest_initial(a.port + 8, files, d)
        for retry_above in (a.connections, None):
            measure(harness.NETPERFMETER, a.port, files, initial, a.connections, a.silent, retry_above, d)


if __name__ == "__main__":
    main()
