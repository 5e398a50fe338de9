"""Data connections that never identify their flow, from many addresses of the legitimate user's
own /24, reconnecting as soon as they are closed: with the table of unidentified connections
full (1024 of them: ten addresses at the per-host limit of 128 fill it), a passive once closed
every newcomer -- the legitimate runs' flows included -- until the silent ones timed out, 30 s
later, and then the attackers took the room again. Now a newcomer is never refused for the
others: the connection that waited longest of the fullest group makes room."""

import os
import re
import socket
import tempfile
import time
import unittest

from harness import Attackers, Passive, free_base_port, run_active

PORT, _ = free_base_port(span=5)


class SilentDataConnections(unittest.TestCase):
    ATTACKERS = [f"127.0.0.{i}" for i in range(2, 12)]
    PER_ATTACKER = 160  # above the per-host limit (128): ten of them fill the table (1024) and more

    def attack(self, source, stop, counts):
        """Keeps PER_ATTACKER data connections of `source` to the passive's data port open,
        silent; each one the passive closes is opened again at once."""
        socks = []
        while not stop.is_set():
            while len(socks) < self.PER_ATTACKER and not stop.is_set():
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    s.bind((source, 0))
                    s.settimeout(2)
                    s.connect(("127.0.0.1", PORT))
                    s.setblocking(False)
                    socks.append(s)
                    counts[source] = counts.get(source, 0) + 1
                except OSError:
                    s.close()
                    stop.wait(0.01)
            alive = []
            for s in socks:
                try:
                    closed = s.recv(1) == b""
                except BlockingIOError:
                    closed = False
                except OSError:
                    closed = True
                if closed:
                    s.close()
                else:
                    alive.append(s)
            socks = alive
            stop.wait(0.02)
        for s in socks:
            s.close()

    def test_silent_data_connections_of_many_addresses_lock_nobody_out(self):
        with Passive(PORT, "-loglevel=3") as passive:
            with Attackers(passive, self.attack, self.ATTACKERS) as attackers:
                # The table is full (ten addresses at their per-host limit) and the attackers churn.
                deadline = time.monotonic() + 30
                while attackers.opened_so_far() < 4 * 1024 and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.assertGreaterEqual(attackers.opened_so_far(), 4 * 1024, "the attack did not get going")
                attackers.mark()
                served = []
                with tempfile.TemporaryDirectory() as d:
                    begin = time.monotonic()
                    while time.monotonic() - begin < 12 or len(served) < 4:  # past one 10-s log interval
                        t0 = time.monotonic()
                        r = run_active(f"127.0.0.1:{PORT}", "-y", "-runtime=1", "-scalar=run.sca", cwd=d,
                                       check=False, *["-tcp", "const50:const500:const50:const500",
                                                      "-tcp", "const50:const500"])
                        served.append(time.monotonic() - t0)
                        self.assertEqual(r.returncode, 0, f"run {len(served)} was not served:\n{r.stderr[-1500:]}")
                        # Every flow's data reached the passive: its connections were admitted.
                        with open(os.path.join(d, "run-passive.sca")) as f:
                            received = dict(re.findall(r'"netPerfMeter\.passive\.(flow\[\d\])" "Received Bytes" +(\d+)',
                                                       f.read()))
                        self.assertEqual(set(received), {"flow[0]", "flow[1]"}, received)
                        self.assertTrue(all(int(v) > 0 for v in received.values()), received)
            connects, grown_log, grown_rss = attackers.opened, attackers.log_growth, attackers.rss_growth
            print(f"{len(served)} runs of 1 s (3 data connections each) served, the slowest in {max(served):.2f} s; "
                  f"the attackers opened {connects} data connections; log +{grown_log} bytes, memory "
                  f"{grown_rss:+.1f} MiB")
            self.assertLess(max(served), 8.0, served)
            self.assertGreater(connects, 1024 + 100)  # they did fill the table and keep reconnecting
            self.assertLess(grown_log, 16384, passive.output()[-3000:])  # one line per kind and 10 s
            self.assertTrue(passive.alive())


if __name__ == "__main__":
    unittest.main()
