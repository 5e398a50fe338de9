#!/usr/bin/env python3
"""How much a passive's SCTP/UDP port amplifies forged INITs; print the figures.

    python3 tests/bench/sctp_init_amplification.py build/src/app/netperfmeter [--inits 2000]
        [--seconds 0] [--port 27200] [--udp 27290] [--limit 500/1000] [--limit 0] ...

For each --limit (default: the built-in one and 0 = none), a passive on loopback gets --inits
hand-built 32-byte SCTP INITs (correct CRC32c) on its encapsulation port from one UDP socket,
as fast as possible, or spread over --seconds; the script counts the INIT-ACKs that come back
and prints bytes out / bytes in. Needs root for the filter. Not a timed test: a script for the
note (the pass/fail version is tests/integration/test_sctp_init_limit.py).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402
import test_sctp_init_limit as t  # noqa: E402


def measure(binary, port, udp, limit, inits, seconds):
    harness.NETPERFMETER = binary
    args = ["--sctp-stack=userland", f"--sctp-udp-port={udp}"]
    if limit is not None:
        args.append(f"--sctp-init-rate={limit}")
    with harness.Passive(port, *args) as passive:
        time.sleep(0.3)
        flood = t.InitFlood(udp, port)
        try:
            start = time.monotonic()
            batch = 25
            for i in range(0, inits, batch):
                flood.send(min(batch, inits - i), batch)
                if seconds > 0:
                    time.sleep(max(0.0, start + seconds * (i + batch) / inits - time.monotonic()))
            elapsed = time.monotonic() - start
            flood.receive(1.0)
        finally:
            flood.close()
        lines = [line for line in passive.output().splitlines() if "SCTP/UDP port" in line]
    print(f"--sctp-init-rate={limit if limit is not None else '(default)'}: {flood.sent} INITs "
          f"({flood.sent_bytes} B) in {elapsed:.2f} s -> {flood.init_acks} INIT-ACKs ({flood.received_bytes} B); "
          f"answered {flood.init_acks / flood.sent:.1%}, bytes out/in {flood.received_bytes / flood.sent_bytes:.2f}")
    for line in lines:
        print("   passive:", line.strip())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binary")
    p.add_argument("--inits", type=int, default=2000)
    p.add_argument("--seconds", type=float, default=0.0)
    p.add_argument("--port", type=int, default=27200)
    p.add_argument("--udp", type=int, default=27290)
    p.add_argument("--limit", action="append")
    a = p.parse_args()
    limits = a.limit if a.limit else [None, "0"]
    for i, limit in enumerate(limits):
        measure(os.path.abspath(a.binary), a.port + 10 * i, a.udp + i, limit, a.inits, a.seconds)


if __name__ == "__main__":
    main()
