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

PORT = 21700


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    npm, loader_path = sys.argv[1:]
    require_root_btf_mptcp()
    arm_watchdog(120)
    loader = Loader(loader_path)
    passive = None
    failures = []
    try:
        loader.start()
        workdir = tempfile.mkdtemp(prefix="npm-cc-flows-")
        passive = subprocess.Popen([npm, str(PORT), "-nodisplay", "-X"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        active = subprocess.Popen([npm, f"127.0.0.1:{PORT}", "-y", "-nodisplay", "-runtime=4", "-scalar=run.sca",
                                   "-tcp", "const0:const1400:const0:const1400:cc=npm_lia",
                                   "-mptcp", "const0:const1400:cc=npm_olia"],
                                  cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        ss = subprocess.run(["ss", "-tinH"], capture_output=True, text=True, check=True).stdout
        _, err = active.communicate(timeout=60)
        if active.returncode != 0:
            failures.append("netperfmeter failed: " + err)
        for port, cc in ((PORT, "npm_lia"), (PORT - 1, "npm_olia")):
            seen = congestion_controls(ss, port)
            log(f"port {port}: congestion controls {seen}")
            # both ends of the data connection (TCP), or of every subflow (MPTCP)
            if len(seen) < 2 or any(name != cc for name in seen):
                failures.append(f"port {port}: expected {cc} on every socket at both ends, got {seen}")
    finally:
        if passive:
            passive.terminate()
            passive.wait()
        loader.restore()
    for f in failures:
        log("FAIL  " + f)
    print(f"{2 - min(2, len(failures))} passed, {min(2, len(failures))} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
