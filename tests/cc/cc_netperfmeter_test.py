#!/usr/bin/env python3
"""netperfmeter uses the bundled congestion controls on both sides: -tcp ...:cc=npm_lia and
-mptcp ...:cc=npm_olia carry the name in ADD_FLOW, the active sets TCP_CONGESTION on its data
socket, the passive on the accepted one; `ss -tin` must show the CC on every socket (for MPTCP:
every subflow) at both ends while the measurement runs.

    cc_netperfmeter_test.py NETPERFMETER LOADER
"""

import os
import subprocess
import sys
import tempfile
import time

from cc_netns import Loader, arm_watchdog, log, require_root_btf_mptcp

# The integration tests' harness: ports from this process's own block, a passive that is ready
# when it says so.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
import harness  # noqa: E402

KNOWN = ("npm_lia", "npm_olia", "npm_rpv1", "npm_rpv2", "reno", "cubic", "bbr")


def congestion_controls(ss_out, port):
    """The congestion control of every socket with `port` as local or peer port (`ss -tinH`)."""
    found = []
    lines = ss_out.splitlines()
    for i, line in enumerate(lines):
        if not line or line[0].isspace():
            continue
        fields = line.split()
        if not any(f.endswith(f":{port}") for f in fields[3:5]):
            continue
        info = lines[i + 1].split() if i + 1 < len(lines) and lines[i + 1][:1].isspace() else []
        found.append(next((w for w in info if w in KNOWN), "?"))
    return found


def sockets_with_cc(ports_ccs, timeout=30.0):
    """`ss -tinH` once both ends of every data connection (port, cc) show a congestion control
    (or the last one taken when `timeout` is over)."""
    deadline = time.monotonic() + timeout
    while True:
        ss = subprocess.run(["ss", "-tinH"], capture_output=True, text=True, check=True).stdout
        if all(len(congestion_controls(ss, port)) >= 2 for port, _ in ports_ccs) or time.monotonic() > deadline:
            return ss
        time.sleep(0.05)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    npm, loader_path = sys.argv[1:]
    require_root_btf_mptcp()
    arm_watchdog(120)
    loader = Loader(loader_path)
    harness.NETPERFMETER = npm
    failures = []
    try:
        loader.start()
        workdir = tempfile.mkdtemp(prefix="npm-cc-flows-")
        port, _ = harness.free_base_port()
        with harness.Passive(port, "-X"):
            active = subprocess.Popen([npm, f"127.0.0.1:{port}", "-y", "-nodisplay", "-runtime=4", "-scalar=run.sca",
                                       "-tcp", "const0:const1400:const0:const1400:cc=npm_lia",
                                       "-mptcp", "const0:const1400:cc=npm_olia"],
                                      cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            flows = ((port, "npm_lia"), (port - 1, "npm_olia"))
            ss = sockets_with_cc(flows)
            _, err = active.communicate(timeout=60)
        if active.returncode != 0:
            failures.append("netperfmeter failed: " + err)
        for port, cc in flows:
            seen = congestion_controls(ss, port)
            log(f"port {port}: congestion controls {seen}")
            # both ends of the data connection (TCP), or of every subflow (MPTCP)
            if len(seen) < 2 or any(name != cc for name in seen):
                failures.append(f"port {port}: expected {cc} on every socket at both ends, got {seen}")
    finally:
        loader.restore()
    for f in failures:
        log("FAIL  " + f)
    print(f"{2 - min(2, len(failures))} passed, {min(2, len(failures))} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
