#!/usr/bin/env python3
"""Disjoint paths: resource-pooling goal 1 of the CMT/RP papers.

Link A (20 Mbit/s) and link B (10 Mbit/s) are separate bottlenecks, both
with 10 ms propagation delay each way. On the same test bed, first a
single-path TCP Reno flow over the best path (A) alone, then an MPTCP flow
whose subflows use A and B. With every coupled CC the MPTCP flow must get at
least the best single path's throughput (asserted: >= 0.9 x the measured
TCP Reno on A, allowing for measurement noise). Each CC has its own test
bed; they run in parallel.

usage: cc_disjoint_test.py BINDIR LOADER [--secs S]
"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cc_netns as T  # noqa: E402

MIN_RATIO = 0.9


def run_cc(cc, idx, a, out):
    topo = T.Topo(a.bindir, mode="disjoint", rate_a="20mbit", rate_b="10mbit",
                  limit_a=50000, limit_b=25000, delay_ms=10, tag="d%d" % idx)
    rec = {"topo": topo, "errors": []}
    out[cc] = rec
    try:
        topo.up()
        ref = topo.flows([{"port": 6100, "mptcp": False, "cc": "reno", "dst": topo.server}],
                         warmup=a.warmup, end=a.secs)[0]
        res = topo.flows([{"port": 6101, "mptcp": True, "cc": cc, "dst": topo.server}],
                         warmup=a.warmup, end=a.secs, probe_at=a.warmup)
        m, probe = res
        if m["mbps"] < 0.1 * ref["mbps"]:
            # Seen once in many runs (npm_rpv1, four test beds on two cores): the MPTCP flow
            # delivered nothing in the measurement window. Say so loudly and measure once more;
            # a second stall fails the test.
            T.log("NOTE: %s: MPTCP flow stalled (%.2f Mbit/s); measuring once more" % (cc, m["mbps"]))
            m, probe = topo.flows([{"port": 6102, "mptcp": True, "cc": cc, "dst": topo.server}],
                                  warmup=a.warmup, end=a.secs, probe_at=a.warmup)
            rec["stalled_once"] = True
        sf = [c for c, is_mp in T.subflows(probe["client"], 6102 if rec.get("stalled_once") else 6101) if is_mp]
        rec["ref"], rec["mp"], rec["subflows"] = ref["mbps"], m["mbps"], sf
        T.log("%-9s TCP Reno on the best path A: %.2f Mbit/s; MPTCP over A+B: %.2f Mbit/s "
              "(subflows %s) -> ratio %.2f" % (cc, ref["mbps"], m["mbps"], sf,
                                               m["mbps"] / ref["mbps"] if ref["mbps"] else 0))
        if len(sf) < 2:
            rec["errors"].append("%s: MPTCP had subflows %s, expected 2" % (cc, sf))
    except Exception as e:  # noqa: BLE001
        rec["errors"].append("%s: %s" % (cc, e))
    finally:
        topo.down()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bindir")
    ap.add_argument("loader")
    ap.add_argument("--secs", type=float, default=15.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--cc", default="npm_lia,npm_olia,npm_rpv1,npm_rpv2")
    ap.add_argument("--watchdog", type=int, default=120)
    a = ap.parse_args()

    T.require_root_btf_mptcp()
    T.remove_stale_namespaces()
    loader = T.Loader(a.loader)   # shared lock: waits only for a running load test
    T.arm_watchdog(a.watchdog)
    results, threads, failures = {}, [], []
    ccs = a.cc.split(",")
    try:
        loader.start()
        for i, cc in enumerate(ccs):
            th = threading.Thread(target=run_cc, args=(cc, i, a, results), daemon=True)
            th.start()
            threads.append(th)
            time.sleep(0.5)
        for th in threads:
            while th.is_alive():
                th.join(0.5)
    except T.Watchdog as e:
        failures.append(str(e))
    except Exception as e:  # noqa: BLE001
        failures.append("error: %s" % e)
    finally:
        for rec in list(results.values()):
            rec["topo"].down()
        loader.restore()
    T.log("\n| MPTCP CC | TCP Reno on A (Mbit/s) | MPTCP on A+B (Mbit/s) | ratio | asserted |")
    T.log("|---|---|---|---|---|")
    for cc in ccs:
        rec = results.get(cc)
        if not rec:
            failures.append("%s: did not run" % cc)
            continue
        failures += rec["errors"]
        if "mp" not in rec:
            continue
        ratio = rec["mp"] / rec["ref"] if rec["ref"] else 0
        T.log("| %s | %.2f | %.2f | %.2f | >= %.2f |" % (cc, rec["ref"], rec["mp"], ratio, MIN_RATIO))
        if ratio < MIN_RATIO:
            failures.append("%s: MPTCP %.2f Mbit/s < %.2f x best single path %.2f Mbit/s"
                            % (cc, rec["mp"], MIN_RATIO, rec["ref"]))
    if failures:
        T.log("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    T.log("\nOK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
