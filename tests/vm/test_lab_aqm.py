"""The delay line's RED, CoDel and PIE against the Linux kernel's sch_red, sch_codel and sch_pie,
in a VM running Debian's own kernel (these hosts' kernel has none of them). In one boot, for each
AQM, the same arrival process crosses a 2 Mbit/s bottleneck twice: once the kernel's (tbf at the
rate, the AQM as its child, on the lab topology's router) and once the delay line's (the lab's
path with aqm = ...): unresponsive UDP at 1.5 times the rate for SECONDS, full frames, each
stamped when sent and when received. Compared: the fraction dropped and the one-way delay (the
queue's) over the second half, when the AQM has settled. RED without "gentle" (sch_red has
none), its weight 1/512 (what tc derives from burst 140 for these thresholds: ewma 9).
Measured on 2026-12-01 (one boot, 311 s): median one-way delay kernel / delay line: RED 473.5 /
472.2 ms, CoDel 66.5 / 62.2 ms, PIE 15.8 / 24.7 ms; a third dropped in each. (Under emulation the
delay line sent a quarter of its frames 1 ms or more late, which its PIE figure includes; the
guest's kernel updates PIE every 16 ms, its 15 ms in jiffies.)

usage: test_lab_aqm.py (DELAYLINE in the environment: the delay line to compare)"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import npmvm  # noqa: E402

LAB_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src", "lab")
RATE, FRAME, LOAD, SECONDS = 2e6, 1514, 1.5, 12
SLOT_MS = FRAME * 8 / RATE * 1e3  # one frame's serialisation: 6.06 ms

KERNEL = {  # the child of tbf on the router: thresholds in bytes (20 and 80 full frames)
    "red": f"red limit {1000 * FRAME} min {20 * FRAME} max {80 * FRAME} avpkt {FRAME} burst 140 probability 0.02 "
           f"bandwidth {int(RATE)}bit",
    "codel": "codel limit 1000",  # target 5 ms, interval 100 ms
    "pie": "pie limit 1000",      # target 15 ms, tupdate 15 ms, alpha 2/16, beta 20/16
}
DELAY_LINE = {"red": {"wq": 1 / 512, "min": 20, "max": 80, "maxp": 0.02, "gentle": False}, "codel": {}, "pie": {}}

GUEST = """
import json, subprocess, sys, time
sys.path.insert(0, {lab_src!r})
from npmlab import topology
RATE, FRAME, LOAD, SECONDS = {rate}, {frame}, {load}, {seconds}
KERNEL, DELAY_LINE = {kernel!r}, {delay_line!r}
RECEIVE = '''
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)  # SO_RCVBUFFORCE
s.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS
s.bind((sys.argv[1], 5000))
print("ready", flush=True)
s.settimeout(60)
out = []
try:
    while True:
        data, anc, _, _ = s.recvmsg(2048, 64)
        rx = next(struct.unpack("qq", d[:16]) for l, t, d in anc if t == 35)
        number, sent = struct.unpack("qq", data[:16])
        out.append((number, sent, rx[0] * 1000000000 + rx[1]))
        s.settimeout(3)
except socket.timeout:
    pass
print(repr(out))
'''
SEND = '''
import socket, struct, sys, time
dst, n, gap = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
start = time.monotonic()
for i in range(n):
    wait = start + i * gap - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    s.sendto(struct.pack("qq", i, time.time_ns()) + bytes(1472 - 16), (dst, 5000))
print(time.monotonic() - start)
'''
gap = FRAME * 8 / RATE / LOAD
n = int(SECONDS / gap)
results = []
began = time.monotonic()
# the kernel's three on one topology (its router's qdiscs replaced), the delay line's on one each
runs = [("kernel", [a for a in ("red", "codel", "pie")])] + [("delayline", [a]) for a in ("red", "codel", "pie")]
for impl, aqms in runs:
    if impl == "kernel":
        path = topology.path()
    else:
        path = topology.path(rate=RATE, queue=1000 * FRAME, aqm=aqms[0], aqm_params=DELAY_LINE[aqms[0]])
    topo = topology.Disjoint([path], delayline={delayline!r}, prefix="npmvm", netem=False)
    try:
        topo.up()
        print(f"{{time.monotonic() - began:.0f}} s: {{impl}} topology up", flush=True)
        r = topo.router(0)
        for aqm in aqms:
            if impl == "kernel":
                subprocess.run(["tc", "-n", r, "qdisc", "del", "dev", "rp", "root"], check=True)
                subprocess.run(["tc", "-n", r, "qdisc", "add", "dev", "rp", "root", "handle", "1:", "tbf", "rate",
                                f"{{int(RATE)}}bit", "burst", str(2 * FRAME), "limit", str(2 * FRAME)], check=True)
                subprocess.run(["tc", "-n", r, "qdisc", "add", "dev", "rp", "parent", "1:1", "handle", "10:",
                                *KERNEL[aqm].split()], check=True)
            dst = topo.address("passive", 0)
            receiver = topo.popen("passive", sys.executable, "-c", RECEIVE, dst, stdout=subprocess.PIPE, text=True)
            assert receiver.stdout.readline().strip() == "ready"
            took = float(topo.ns("active", sys.executable, "-c", SEND, dst, str(n), str(gap), timeout=300))
            got = eval(receiver.communicate(timeout=200)[0])
            qdisc = subprocess.run(["tc", "-n", r, "-s", "-d", "qdisc", "show", "dev", "rp"], capture_output=True,
                                   text=True).stdout
            counters = topo.delay_counters() if topo.delayline_of else {{}}
            results.append({{"aqm": aqm, "impl": impl, "sent": n, "send_s": took, "received": got, "qdisc": qdisc,
                            "counters": counters}})
            with open("result.json", "w") as f:  # after each: a guest out of time leaves what it measured
                json.dump(results, f)
            print(f"{{time.monotonic() - began:.0f}} s: {{impl}} {{aqm}}: {{len(got)}} of {{n}} received", flush=True)
    finally:
        topo.down()
"""


def quantile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


class LabAqm(unittest.TestCase):
    def test_delay_line_aqms_against_the_kernels(self):
        delayline = os.environ.get("DELAYLINE")
        if not delayline or not os.access(delayline, os.X_OK):
            self.skipTest("DELAYLINE (the delay line to compare) is not given")
        guest = GUEST.format(lab_src=LAB_SRC, rate=RATE, frame=FRAME, load=LOAD, seconds=SECONDS, kernel=KERNEL,
                             delay_line=DELAY_LINE, delayline=delayline)
        with tempfile.TemporaryDirectory(prefix="npm-vm-aqm-") as work:
            with open(os.path.join(work, "guest.py"), "w") as f:
                f.write(guest)
            script = "modprobe sch_tbf && modprobe sch_red && modprobe sch_codel && modprobe sch_pie || exit 3\n" \
                     "python3 -u guest.py\n"
            rc, output = npmvm.VM().run(script, timeout=900, workdir=work)
            print(output)
            self.assertEqual(rc, 0, output)
            with open(os.path.join(work, "result.json")) as f:
                results = json.load(f)
        figures = {}
        for r in results:
            half = r["sent"] // 2
            late = [(rx - sent) / 1e6 for number, sent, rx in r["received"] if number >= half]
            dropped = 1 - len(late) / (r["sent"] - half)
            figures[r["aqm"], r["impl"]] = dict(dropped=dropped, p10=quantile(late, 0.1), p50=quantile(late, 0.5),
                                                p90=quantile(late, 0.9), send_s=r["send_s"])
            print(f"{r['aqm']:5} {r['impl']:9}: second half {dropped:.1%} dropped, one-way delay p10/p50/p90 "
                  f"{quantile(late, 0.1):.1f}/{quantile(late, 0.5):.1f}/{quantile(late, 0.9):.1f} ms "
                  f"(sent {r['sent']} in {r['send_s']:.1f} s)")
            if r["impl"] == "kernel":
                print("  " + " ".join(r["qdisc"].split()))
            else:
                print(f"  delay line: {r['counters']}")
        for aqm in ("red", "codel", "pie"):
            k, d = figures[aqm, "kernel"], figures[aqm, "delayline"]
            # the sender kept its rate: 1.5 times the bottleneck's, a third of it dropped in both
            for f in (k, d):
                self.assertLess(f["send_s"], SECONDS * 1.1)
                self.assertAlmostEqual(f["dropped"], 1 - 1 / LOAD, delta=0.05)
            # the settled queue: within a quarter of the kernel's, or two frames' serialisation (12 ms:
            # PIE's queue is two or three frames, and the emulated guest makes the delay line late)
            self.assertLess(abs(d["p50"] - k["p50"]), max(0.25 * k["p50"], 2 * SLOT_MS), aqm)


if __name__ == "__main__":
    npmvm.run_tests()
