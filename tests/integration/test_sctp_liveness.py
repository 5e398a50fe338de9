"""The passive notices a dead active on SCTP control by its heartbeats (every 5 s, lost after
4 misses) instead of the stacks' default of several minutes: an active killed with only UDP
flows (which cannot tell) is released within a minute. Its own process: nothing else runs
with it."""

import os
import tempfile
import time
import unittest

from harness import free_base_port, Passive, descriptors_while_killed, settled_descriptors

PORT, _ = free_base_port(span=2)  # this test's ports: PORT - 1 .. PORT + 3, its own


class SctpControlLiveness(unittest.TestCase):
    def test_a_silent_control_association_is_noticed_within_a_minute(self):
        # UDP flows cannot tell that the active is gone; the control association's heartbeats
        # (every 5 s, lost after 4) do, instead of the stack's default of several minutes.
        with Passive(PORT, "-loglevel=3") as passive, tempfile.TemporaryDirectory() as d:
            baseline = settled_descriptors(passive, PORT, d)
            running = descriptors_while_killed(
                passive, [f"127.0.0.1:{PORT}", "-x", "-nodisplay", "-runtime=120", "-vector=run.vec",
                          "-udp", "const10:const100:const10:const100"], d)
            self.assertGreater(running, baseline, passive.output())
            begin = time.monotonic()
            while len(os.listdir(f"/proc/{passive.proc.pid}/fd")) > baseline and time.monotonic() - begin < 60:
                time.sleep(0.5)
            self.assertLess(time.monotonic() - begin, 45, "the measurement of a dead active was kept")


if __name__ == "__main__":
    from harness import main

    main()
