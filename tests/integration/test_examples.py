"""The command lines of README.md's "Usage examples" and of netperfmeter(1)'s EXAMPLES run as
printed: those to a passive on this host (127.0.0.1, [::1]) for real against a passive of this
test's own (its port for 9000, each runtime cut to one second), the others -- other hosts,
files of a deployment -- through netperfmeter's own check of the whole command line
(--validate), which refuses what a run would refuse before it connects. An example without a
runtime (it runs until SIGINT) gets one second. The README's headline
example once failed as written (cc=npm_lia needs the loader) and recorded per-message vectors
of saturated flows for 30 s; the man page's on/off example could not be parsed."""

import os
import re
import shlex
import subprocess
import tempfile
import unittest

from harness import free_base_port, NETPERFMETER, Passive, main, run_active

PORT, _ = free_base_port(span=2)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def readme_commands():
    """The netperfmeter command lines of README.md's indented code blocks (continuations joined)."""
    with open(os.path.join(ROOT, "README.md")) as f:
        lines = f.read().splitlines()
    return join([line[4:] for line in lines if line.startswith("    ")], "\\")


def manpage_commands():
    """The netperfmeter command lines of netperfmeter(1)'s EXAMPLES (.nf blocks), unescaped."""
    with open(os.path.join(ROOT, "packaging", "man", "netperfmeter.1")) as f:
        text = f.read()
    section = text[text.index(".SH EXAMPLES"):text.index(".SH SEE ALSO")]
    lines = []
    for block in re.findall(r"^\.nf\n(.*?)^\.fi$", section, re.S | re.M):
        lines += [line.replace("\\-", "-").replace("\\\\", "\\") for line in block.splitlines()]
    return join(lines, "\\")


def join(lines, continuation):
    commands, current = [], ""
    for line in lines:
        current += " " + line.split("#")[0].strip()
        if line.rstrip().endswith(continuation):
            current = current.rstrip()[:-1]
            continue
        if current.split() and current.split()[0] == "netperfmeter":
            commands.append(shlex.split(current))
        current = ""
    return commands


def local(target):
    return target.startswith("127.0.0.1:") or target.startswith("[::1]:")


def shortened(args):
    """The runtime cut to one second (an example without one runs until SIGINT: one second too)."""
    cut = [re.sub(r"^-runtime=\d+(\.\d+)?$", "-runtime=1", a) for a in args]
    return cut if any(a.startswith("-runtime=") for a in cut) else ["-runtime=1", *cut]


class Examples(unittest.TestCase):
    def check(self, commands, where):
        self.assertTrue(commands, f"no command lines found in {where}")
        actives = [c for c in commands if len(c) > 1 and ":" in c[1]]
        self.assertTrue(any(local(c[1]) for c in actives), f"{where}: no example runs on this host")
        with tempfile.TemporaryDirectory() as d, Passive(PORT) as passive:
            for command in actives:
                target, args = command[1], command[2:]
                with self.subTest(example=" ".join(command)):
                    if local(target):
                        host = target.rsplit(":", 1)[0]
                        r = run_active(f"{host}:{PORT}", *shortened(args), cwd=d, check=False, timeout=120)
                        self.assertEqual(r.returncode, 0, f"{' '.join(command)}:\n{r.stderr[-1500:]}")
                        self.assertIn("Total (A->P", r.stdout)  # both sides at the end
                    else:
                        r = subprocess.run([NETPERFMETER, target, "--validate", *args], capture_output=True,
                                           text=True, timeout=30, cwd=d)
                        if r.returncode != 0 and re.search(r"cannot read|No such file|does not exist|cannot resolve|"
                                                           r"not a local address|unknown host", r.stderr):
                            # What only the deployment it is written for has (its key files, names,
                            # addresses): said, not hidden.
                            print(f"  {where}: not checkable on this host: {' '.join(command)}: {r.stderr.strip()}")
                            continue
                        self.assertEqual(r.returncode, 0, f"{' '.join(command)}:\n{r.stderr}")
            self.assertTrue(passive.alive())

    def test_the_readme_examples_run_as_printed(self):
        self.check(readme_commands(), "README.md")

    def test_the_manpage_examples_run_as_printed(self):
        self.check(manpage_commands(), "netperfmeter(1)")


if __name__ == "__main__":
    main()
