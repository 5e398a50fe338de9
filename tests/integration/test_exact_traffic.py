"""A rate-driven flow sends what its FLOWSPEC says within the measurement, in both directions,
whatever else runs: the passive ends its sending at the runtime on its own timeline (the runtime
travels in ADD_FLOW), not when STOP arrives, which saturated flows delay while their send queues
drain (up to 1 s). Before, a const25 flow from the passive sent 116 and 140 frames instead of 76
in 3 s next to saturated TCP and MPTCP flows over a 10 Mbit/s path."""

import os
import tempfile
import unittest

from harness import Passive, free_base_port, lab_topology, main, read_scalars, run_active, skip_unless_root, two_paths

FLOWS = ["-tcp", "const0:const1400:const0:const1400", "-mptcp", "const0:const1400:const0:const1400",
         "-udp", "const50:const500:const25:const1000:id=5"]


def frames(scalars, side, what):
    return scalars[(f"netPerfMeter.{side}.flow[5]", f"{what} Frames")]


class ExactTraffic(unittest.TestCase):
    def check_sent(self, active, passive):
        # frames at 0, 1/rate, ..., 3 s: rate x runtime + 1, on each side's own timeline
        self.assertAlmostEqual(frames(active, "active", "Transmitted"), 151, delta=1)
        self.assertAlmostEqual(frames(passive, "passive", "Transmitted"), 76, delta=1)

    def test_on_loopback_every_count_is_exact(self):
        port, (udp,) = free_base_port(udp_ports=1)
        with tempfile.TemporaryDirectory(prefix="npm-exact-") as d, \
                Passive(port, f"--sctp-udp-port={udp}") as passive:
            run_active(f"127.0.0.1:{port}", "-control-over-tcp", "-runtime=3", "-scalar=run.sca", *FLOWS, cwd=d)
            self.assertTrue(passive.alive())
            active, passive_sca = (read_scalars(os.path.join(d, f"run-{side}.sca")) for side in ("active", "passive"))
        self.check_sent(active, passive_sca)
        self.assertAlmostEqual(frames(passive_sca, "passive", "Received"), 151, delta=1)
        self.assertAlmostEqual(frames(active, "active", "Received"), 76, delta=1)

    @skip_unless_root("network namespaces need root")
    def test_while_a_saturated_send_queue_drains_over_a_slow_path(self):
        # The forward direction is a 10 Mbit/s bottleneck that the saturated flows fill: the
        # active's stop waits for their send queues, so STOP reaches the passive late. (The
        # forward UDP frames share that queue with TCP, and some are dropped there.)
        topo = two_paths(lab_topology().path(rate="10mbit", queue=100 * 1514), prefix="npmex")
        self.addCleanup(topo.down)
        with tempfile.TemporaryDirectory(prefix="npm-exact-") as d, Passive(9000, netns=topo.P) as passive:
            run_active(f"{topo.address('passive', 0)}:9000", "-control-over-tcp", "-runtime=3", "-scalar=run.sca",
                       *FLOWS, cwd=d, netns=topo.A)
            self.assertTrue(passive.alive())
            active, passive_sca = (read_scalars(os.path.join(d, f"run-{side}.sca")) for side in ("active", "passive"))
        self.check_sent(active, passive_sca)
        # the reverse direction is not shaped: everything the passive sent arrives
        self.assertAlmostEqual(frames(active, "active", "Received"), frames(passive_sca, "passive", "Transmitted"),
                               delta=1)
        self.assertLessEqual(frames(passive_sca, "passive", "Received"), 151)


if __name__ == "__main__":
    main()
