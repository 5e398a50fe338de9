"""What the benchmarks share: CPU seconds of a process, waiting for a listener, a passive's goodput."""

import os
import re
import shutil
import signal
import socket
import time

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def wait_port(port):
    """Returns once something accepts TCP connections on 127.0.0.1:port (at most 5 s)."""
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port}")


def passive_goodput(scalar_file):
    """(received bytes, bit/s) of flow 0 in a passive's scalar file, over its receptions."""
    values = {}
    with open(scalar_file) as f:
        for line in f:
            m = re.match(r'scalar "netPerfMeter\.passive\.flow\[0\]" "([^"]+)"\s+(\S+)', line)
            if m:
                values[m.group(1)] = float(m.group(2))
    received = values["Received Bytes"]
    duration = (values["Last Reception"] - values["First Reception"]) / 1e6
    return received, received * 8 / duration


def passive_total(scalar_file):
    """(received bytes, bit/s) of all flows in a passive's scalar file, over the receptions."""
    received, first, last = 0.0, None, None
    with open(scalar_file) as f:
        for line in f:
            m = re.match(r'scalar "netPerfMeter\.passive\.flow\[\d+\]" "([^"]+)"\s+(\S+)', line)
            if not m:
                continue
            name, value = m.group(1), float(m.group(2))
            if name == "Received Bytes":
                received += value
            elif name == "First Reception" and value > 0:
                first = value if first is None else min(first, value)
            elif name == "Last Reception" and value > 0:
                last = value if last is None else max(last, value)
    if not received or first is None or last is None or last <= first:
        raise SystemExit(f"{scalar_file}: no reception recorded")
    return received, received * 8 / ((last - first) / 1e6)


def stop_servers(passives, others, workdir):
    """Stops netperfmeter passives (SIGINT: a clean stop) and other servers, removes `workdir`."""
    for p in passives:
        p.send_signal(signal.SIGINT)
    for p in others:
        p.terminate()
    for p in [*passives, *others]:
        p.wait()
    shutil.rmtree(workdir, ignore_errors=True)
