#!/usr/bin/env python3
"""ablations/cwnd-cuts.py DIR [WARMUP_S]: per path of each run's flow 0 (the active's per-path vector) the
sampled cwnd's drops and drops to 60 % or less, and the stack's cwnd cuts by cause (patch 0013), counted
from the warm-up's end."""
import bz2, sys, glob, os
CAUSES = ("FR", "T3", "Restart", "ECN", "PktDrop", "Burst", "Resched", "Other")
def rows(path):
    with bz2.open(path, "rt") as f:
        lines = f.read().splitlines()
    cols = lines[0].split("\t")
    out = {}
    for l in lines[1:]:
        r = dict(zip(["Line"] + cols, l.split("\t")))
        if r["Path"] == "-1": continue
        out.setdefault(r["Remote"], []).append(r)
    return out
def num(x): return None if x == "NA" else float(x)
warm = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
for vec in sorted(glob.glob(os.path.join(sys.argv[1], "runs", "*", "f0", "run-paths-active-*.vec.bz2"))):
    run = vec.split("/runs/")[1].split("/")[0]
    for remote, rs in sorted(rows(vec).items()):
        rs = [r for r in rs if float(r["RelTime"]) >= warm]
        cw = [num(r["Cwnd"]) for r in rs]
        sampled = sum(1 for a, b in zip(cw, cw[1:]) if b <= 0.6 * a)
        drops = sum(1 for a, b in zip(cw, cw[1:]) if b < a)
        first, last = rs[0], rs[-1]
        d = lambda k: num(last[k]) - num(first[k])
        span = float(last["RelTime"]) - float(first["RelTime"])
        c = {k: int(d("CwndCuts" + k)) for k in CAUSES}
        b = {k: int(d("CwndCutBytes" + k)) for k in CAUSES}
        mean = sum(cw) / len(cw)
        print(f"{run} {remote}: {span:.0f} s, mean cwnd {mean/1000:.1f} kB, sampled drops {drops}, to <=60 % {sampled}; "
              f"cuts {{{', '.join(f'{k} {v}' for k, v in c.items() if v)}}} bytes {{{', '.join(f'{k} {v}' for k, v in b.items() if v)}}}; "
              f"seen {d('CwndCutsSeen'):.0f} unattributed {d('CwndCutsUnattributed'):.0f}; fast rtx {d('FastRetrans'):.0f} timer {d('TimerRetrans'):.0f}; "
              f"sent {d('BytesSent')/1e6:.2f} MB")
