#!/usr/bin/env python3
"""Load/unload test of the BPF congestion controls.

netperfmeter-cc-loader start registers npm_lia, npm_olia, npm_rpv1 and
npm_rpv2; they must appear in tcp_available_congestion_control and
tcp_allowed_congestion_control; each is selected with TCP_CONGESTION on a
TCP and an MPTCP socket (getsockopt shows it), and used by a real TCP flow
and a real MPTCP flow with two subflows inside network namespaces, where
`ss -tin` must show it on every subflow of both ends; the coupled code path
must have run; `stop` unregisters them all. Also checks the loader's clear
errors (no CAP_BPF, no BTF, kernel too old).

usage: cc_load_test.py BINDIR LOADER
"""
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cc_netns as T  # noqa: E402

CCS = T.Loader.NAMES
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
IPPROTO_MPTCP = getattr(socket, "IPPROTO_MPTCP", 262)


def check(cond, msg, failures):
    T.log(("ok    " if cond else "FAIL  ") + msg)
    if not cond:
        failures.append(msg)


def sockopt_cc(proto, cc):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    try:
        s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
        return s.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).rstrip(b"\0").decode()
    finally:
        s.close()


def main():
    bindir, loader_path = sys.argv[1], sys.argv[2]
    T.require_root_btf_mptcp()
    T.remove_stale_namespaces()
    failures = []
    loader = T.Loader(loader_path, exclusive=True)   # waits for other runs
    T.arm_watchdog(120)
    if not loader.were_registered:
        loader.stop()    # leftovers of an earlier test run that died
    topo = T.Topo(bindir, mode="shared", rate_a="100mbit", limit_a=250000, delay_ms=2, tag="load")
    try:
        # clear one-line errors
        env = dict(os.environ, NPM_CC_LOADER_BTF="/nonexistent/btf")
        r = subprocess.run([loader_path, "start"], capture_output=True, text=True, env=env)
        check(r.returncode == 2 and "no kernel BTF" in r.stderr, "no BTF -> clear error: " + r.stderr.strip(), failures)
        env = dict(os.environ, NPM_CC_LOADER_KERNEL_RELEASE="5.10.0-old")
        r = subprocess.run([loader_path, "start"], capture_output=True, text=True, env=env)
        check(r.returncode == 2 and "too old" in r.stderr, "old kernel -> clear error: " + r.stderr.strip(), failures)
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            loader_path, "start"], capture_output=True, text=True)
        check(r.returncode == 4 and "no CAP_BPF" in r.stderr,
              "no CAP_BPF -> clear error: " + r.stderr.strip(), failures)

        bad = os.path.join(bindir, "bad_cc.bpf.o")
        if os.path.exists(bad) and not loader.were_registered:
            env = dict(os.environ, NPM_CC_LOADER_OBJECT=bad)
            r = subprocess.run([loader_path, "start"], capture_output=True, text=True, env=env)
            first = r.stderr.strip().splitlines()[:1]
            check(r.returncode == 5 and "verifier rejected program 'bad_ssthresh'" in r.stderr
                  and "verifier log (last lines)" in r.stderr,
                  "verifier rejection -> clear error with the log's last lines: %s" % first, failures)
            T.log("      " + "\n      ".join(r.stderr.strip().splitlines()[-4:]))

        out = loader.start()
        T.log(out.strip())
        avail = T.read_sysctl("net.ipv4.tcp_available_congestion_control")
        allowed = T.read_sysctl("net.ipv4.tcp_allowed_congestion_control")
        for cc in CCS:
            check(cc in avail, "%s in tcp_available_congestion_control" % cc, failures)
            check(cc in allowed, "%s in tcp_allowed_congestion_control" % cc, failures)
            for proto, pname in ((socket.IPPROTO_TCP, "TCP"), (IPPROTO_MPTCP, "MPTCP")):
                got = sockopt_cc(proto, cc)
                check(got == cc, "%s socket: setsockopt/getsockopt TCP_CONGESTION %s -> %s"
                      % (pname, cc, got), failures)
        r = subprocess.run([loader_path, "status"], capture_output=True, text=True)
        check(r.returncode == 0 and all(cc in r.stdout for cc in CCS), "status lists all, exit 0", failures)

        topo.up()
        before = loader.stats()
        for i, cc in enumerate(CCS):
            port = 7000 + 2 * i
            res = topo.flows([
                {"port": port, "mptcp": True, "cc": cc, "dst": topo.server},
                {"port": port + 1, "mptcp": False, "cc": cc, "dst": topo.server},
            ], warmup=0.5, end=3.5, probe_at=1.5)
            m, t, probe = res
            check(m["sender_cc"] == cc and m["cc"] == cc,
                  "%s: MPTCP getsockopt sender %s, accepted %s" % (cc, m["sender_cc"], m["cc"]), failures)
            check(t["sender_cc"] == cc and t["cc"] == cc,
                  "%s: TCP getsockopt sender %s, accepted %s" % (cc, t["sender_cc"], t["cc"]), failures)
            for side in ("client", "server"):
                sf = [c for c, is_mp in T.subflows(probe[side], port) if is_mp]
                check(len(sf) >= 2 and all(c == cc for c in sf),
                      "%s: ss -tin (%s) MPTCP subflows: %s" % (cc, side, sf), failures)
                tc = [c for c, is_mp in T.subflows(probe[side], port + 1) if not is_mp]
                check(len(tc) == 1 and tc[0] == cc, "%s: ss -tin (%s) TCP: %s" % (cc, side, tc), failures)
            check(m["bytes"] > 0 and t["bytes"] > 0, "%s: data flowed (MPTCP %.1f, TCP %.1f Mbit/s)"
                  % (cc, m["mbps"], t["mbps"]), failures)
        after = loader.stats()
        for cc in CCS:
            d = [after.get(cc, (0, 0, 0))[k] - before.get(cc, (0, 0, 0))[k] for k in range(3)]
            check(d[0] > 0 and d[1] > 0,
                  "%s: coupled path %d times (MPTCP), Reno fallback %d times (TCP), walk truncated %d"
                  % (cc, d[0], d[1], d[2]), failures)
            check(d[2] == 0, "%s: sibling walk never hit its bound" % cc, failures)
        topo.down()

        rc, out = loader.stop()
        check(rc == 0, "stop: exit 0", failures)
        avail = T.read_sysctl("net.ipv4.tcp_available_congestion_control")
        allowed = T.read_sysctl("net.ipv4.tcp_allowed_congestion_control")
        for cc in CCS:
            check(cc not in avail and cc not in allowed, "%s unregistered" % cc, failures)
        r = subprocess.run([loader_path, "status"], capture_output=True, text=True)
        check(r.returncode == 3, "status after stop: exit 3", failures)
        rc, out = loader.run("stop")
        check(rc == 0, "second stop is harmless", failures)
        # nothing of ours may stay behind in the kernel (all sockets closed)
        if shutil.which("bpftool"):
            left = None
            for _ in range(20):
                maps = subprocess.run(["bpftool", "map", "list"], capture_output=True, text=True).stdout
                left = [line for line in maps.splitlines() if "struct_ops" in line and " npm_" in line]
                if not left:
                    break
                time.sleep(0.5)
            check(not left, "no struct_ops maps of ours left in the kernel %s" % (left or ""), failures)
    except T.Watchdog as e:
        failures.append(str(e))
    except Exception as e:  # noqa: BLE001
        failures.append("error: %s" % e)
    finally:
        topo.down()
        if loader.were_registered:
            loader.run("start")     # registered by someone else: put back
        else:
            loader.stop()
        loader.lockf.close()
    if failures:
        T.log("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    T.log("\nOK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
