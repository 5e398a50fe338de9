"""tshark reading a capture: the one place where the lab and the tests (tests/integration/
harness.py imports it) spell the command."""
import subprocess


def read_fields(path, display_filter, fields, decode=(), error=RuntimeError):
    """Rows (lists of strings, one per field; a field seen several times in a packet: its values
    joined by commas) of the packets of capture `path` that match `display_filter`. `decode`:
    tshark -d rules (e.g. "udp.port==9899,sctp"). A tshark that fails raises `error` with its
    last line."""
    cmd = ["tshark", "-n", "-r", path]
    for rule in decode:
        cmd += ["-d", rule]
    cmd += ["-Y", display_filter, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in fields:
        cmd += ["-e", f]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise error(f"tshark could not read {path}: {r.stderr.strip().splitlines()[-1:]}")
    return [line.split("\t") for line in r.stdout.splitlines() if line.strip()]


def copy_matching(path, display_filter, out, error=RuntimeError):
    """Writes the packets of capture `path` that match `display_filter` to `out`."""
    r = subprocess.run(["tshark", "-n", "-r", path, "-Y", display_filter, "-w", out],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise error(f"tshark could not filter {path}: {r.stderr.strip().splitlines()[-1:]}")
