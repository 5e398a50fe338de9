#!/usr/bin/env python3
"""Shared-bottleneck fairness of the BPF congestion controls.

One MPTCP flow with two subflows against one single-path TCP Reno flow, all
three crossing the same tbf (20 Mbit/s, drop-tail queue of 100 kB = 2 BDP
of the 20 ms base RTT) with a real propagation delay (userspace delay line,
10 ms each way). With a 1-BDP queue losses are more synchronised and the
coupled CCs measured lower (OLIA ~0.37, RPv1 ~0.40; see src/cc/README.md). The MPTCP flow's
share of the sum of both goodputs is measured per run and averaged over the
repetitions. Expected: uncoupled Reno on each subflow ~2/3 (asserted mean in
[0.58, 0.75]), each coupled CC ~1/2 (asserted mean in [0.40, 0.58]).

Every CC gets its own copy of the test bed (separate namespaces, separate
bottleneck), and the copies run in parallel to fit the CI time budget.

usage: cc_fairness_test.py BINDIR LOADER [--reps N] [--secs S] [--cc a,b]
"""
import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cc_netns as T  # noqa: E402

COUPLED = ["npm_lia", "npm_olia", "npm_rpv1", "npm_rpv2"]
BANDS = {"reno": (0.58, 0.75)}
COUPLED_BAND = (0.40, 0.58)


def run_cc(cc, idx, a, out):
    """All repetitions for one CC on its own test bed; results into out[cc]."""
    topo = T.Topo(a.bindir, mode="shared", rate_a=a.rate, limit_a=a.limit, delay_ms=10,
                  tag=str(idx))
    rec = {"topo": topo, "runs": [], "errors": []}
    out[cc] = rec
    try:
        topo.up()
        rec["rtt"] = topo.rtt_ms()
        if rec["rtt"] is None or rec["rtt"] < 18:
            raise RuntimeError("delay line not effective: RTT %s ms" % rec["rtt"])
        reps = a.reno_reps if cc == "reno" else a.reps
        for rep in range(reps):
            port = 6000 + 2 * rep
            res = topo.flows([
                {"port": port, "mptcp": True, "cc": cc, "dst": topo.server},
                {"port": port + 1, "mptcp": False, "cc": "reno", "dst": topo.server},
            ], warmup=a.warmup, end=a.secs, probe_at=a.warmup)
            m, t, probe = res
            n_sf = sum(1 for c, is_mp in T.subflows(probe["client"], port) if is_mp and c == cc)
            tot = m["bytes"] + t["bytes"]
            share = m["bytes"] / float(tot) if tot else 0.0
            T.log("%-9s run %d: MPTCP %.2f Mbit/s (%d subflows with %s) vs TCP Reno %.2f Mbit/s"
                  " -> share %.3f" % (cc, rep + 1, m["mbps"], n_sf, cc, t["mbps"], share))
            if n_sf < 2:
                rec["errors"].append("%s run %d: %d MPTCP subflows ran %s, expected 2"
                                     % (cc, rep + 1, n_sf, cc))
            if m["sender_cc"] != cc or t["sender_cc"] != "reno":
                rec["errors"].append("%s run %d: CC not applied (%s/%s)"
                                     % (cc, rep + 1, m["sender_cc"], t["sender_cc"]))
            rec["runs"].append((share, m["mbps"], t["mbps"]))
    except Exception as e:  # noqa: BLE001
        rec["errors"].append("%s: %s" % (cc, e))
    finally:
        topo.down()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bindir")
    ap.add_argument("loader")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--reno-reps", type=int, default=3)
    ap.add_argument("--secs", type=float, default=40.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--cc", default=",".join(["reno"] + COUPLED))
    ap.add_argument("--watchdog", type=int, default=280)
    ap.add_argument("--rate", default="20mbit")
    ap.add_argument("--limit", type=int, default=100000)
    a = ap.parse_args()

    T.require_root_btf_mptcp()
    T.remove_stale_namespaces()
    loader = T.Loader(a.loader)   # shared lock: waits only for a running load test
    T.arm_watchdog(a.watchdog)
    failures = []
    results = {}
    threads = []
    ccs = a.cc.split(",")
    try:
        loader.start()
        before = loader.stats()
        for i, cc in enumerate(ccs):
            th = threading.Thread(target=run_cc, args=(cc, i, a, results), daemon=True)
            th.start()
            threads.append(th)
            time.sleep(0.5)
        for th in threads:
            while th.is_alive():
                th.join(0.5)
        after = loader.stats()
        for cc in ccs:
            if cc in after:
                coupled = after[cc][0] - before.get(cc, (0, 0, 0))[0]
                T.log("%s: coupled cong_avoid calls during the test: %d" % (cc, coupled))
                if coupled <= 0:
                    failures.append("%s never took the coupled path" % cc)
    except T.Watchdog as e:
        failures.append(str(e))
    except Exception as e:  # noqa: BLE001
        failures.append("error: %s" % e)
    finally:
        for rec in list(results.values()):
            rec["topo"].down()
        loader.restore()
    T.log("\n| MPTCP CC | runs | MPTCP Mbit/s | TCP Reno Mbit/s | MPTCP share mean (min-max) | asserted |")
    T.log("|---|---|---|---|---|---|")
    for cc in ccs:
        rec = results.get(cc)
        if not rec:
            failures.append("%s: did not run" % cc)
            continue
        failures += rec["errors"]
        if not rec["runs"]:
            continue
        shares = [r[0] for r in rec["runs"]]
        mean = statistics.mean(shares)
        lo, hi = BANDS.get(cc, COUPLED_BAND)
        T.log("| %s | %d | %.2f | %.2f | %.3f (%.3f-%.3f) | [%.2f, %.2f] |"
              % (cc, len(shares), statistics.mean(r[1] for r in rec["runs"]),
                 statistics.mean(r[2] for r in rec["runs"]), mean, min(shares), max(shares), lo, hi))
        if not (lo <= mean <= hi):
            failures.append("%s: mean share %.3f outside [%.2f, %.2f]" % (cc, mean, lo, hi))
    if failures:
        T.log("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    T.log("\nOK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
