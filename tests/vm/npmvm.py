"""Runs a test script inside a VM with Debian's own kernel (QEMU, software emulation).

The host's root file system is the guest's root, read-only over 9p, so the guest runs the
very binaries of the build tree; a work directory of the host is shared read-write as
/mnt/out, where the script runs. Nothing is downloaded: QEMU, the kernel (linux-image-amd64,
whose modules include SCTP and DCCP) and mkinitramfs come from Debian's packages.

    python3 tests/vm/npmvm.py SCRIPT [--timeout S]     run SCRIPT in a VM, print its output, exit with its status

    vm = VM(); rc, output = vm.run("sh commands", timeout=120)
    results = vm.run_parts([("a", "sh commands"), ("b", "sh commands")], work, timeout=120)

A boot under software emulation costs many seconds: tests that need several independent guest
runs make them parts of one boot (run_parts), each in a directory of its own.

Skips (exit 77 from skip_unless_available) only where QEMU or the kernel package is missing.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
CACHE = os.environ.get("NPM_VM_CACHE", "/var/cache/netperfmeter-vm")


def kernel():
    """(version, vmlinuz) of the newest Debian kernel whose modules are installed, or None."""
    found = []
    for path in glob.glob("/boot/vmlinuz-*"):
        version = path[len("/boot/vmlinuz-"):]
        if os.path.isdir(f"/lib/modules/{version}/kernel"):
            found.append((version, path))
    return sorted(found)[-1] if found else None


def missing():
    """Why a VM cannot run here, or None."""
    if shutil.which("qemu-system-x86_64") is None:
        return "qemu-system-x86_64 is not installed (Debian package qemu-system-x86)"
    if shutil.which("mkinitramfs") is None:
        return "mkinitramfs is not installed (Debian package initramfs-tools)"
    if kernel() is None:
        return "no kernel with modules in /boot (Debian package linux-image-amd64)"
    return None


def skip_unless_available():
    why = missing()
    if why:
        print("SKIP: " + why, flush=True)
        sys.exit(SKIP)


def run_tests():
    """Runs the calling script's unittest cases in VMs: skips (exit 77) without QEMU or the
    kernel package, or without root (the VM shares the root file system with
    security_model=none)."""
    import unittest
    skip_unless_available()
    if os.geteuid() != 0:
        print("SKIP: needs root (the VM shares the root file system with security_model=none)")
        sys.exit(SKIP)
    result = unittest.main(module="__main__", exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)


def initramfs(version):
    """An initramfs that can mount the root over 9p (built once per kernel, then cached)."""
    os.makedirs(CACHE, exist_ok=True)
    image = os.path.join(CACHE, f"initrd-9p-{version}.img")
    if os.path.exists(image):
        return image
    with tempfile.TemporaryDirectory() as conf:
        os.makedirs(os.path.join(conf, "scripts"))
        with open(os.path.join(conf, "initramfs.conf"), "w") as f:
            f.write("MODULES=list\nBUSYBOX=auto\nCOMPRESS=gzip\n")
        with open(os.path.join(conf, "modules"), "w") as f:
            f.write("9p\n9pnet\n9pnet_virtio\nvirtio_pci\nnetfs\n")
        partial = f"{image}.partial-{os.getpid()}"  # VM tests may build it at the same time
        subprocess.run(["mkinitramfs", "-d", conf, "-o", partial, version], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.replace(partial, image)
    return image


# Between the parts of one boot: whatever a part left running is killed (a part that timed out
# leaves its background passive), so that the next one finds its ports free.
PART_RUNNER = """
for part in {names}; do
  start=$(cut -d' ' -f1 /proc/uptime)
  (cd "$part" && timeout {timeout} sh ./test.sh >output 2>&1; echo $? >rc)
  echo "[part $part: $start s to $(cut -d' ' -f1 /proc/uptime) s of the guest's uptime]" >>"$part/output"
  pkill -KILL -x netperfmeter 2>/dev/null
  for i in $(seq 50); do pgrep -x netperfmeter >/dev/null || break; sleep 0.1; done
done
"""


class VM:
    def __init__(self, memory_mib=1024, cpus=2):
        why = missing()
        if why:
            raise RuntimeError(why)
        self.version, self.vmlinuz = kernel()
        self.initrd = initramfs(self.version)
        self.memory, self.cpus = memory_mib, cpus

    def run(self, script, timeout=300, workdir=None):
        """Runs `script` (sh) in a fresh VM; returns (exit status, output). The VM always powers
        off; one that does not within `timeout` + 60 s is killed and counts as a failure."""
        own = workdir is None
        work = workdir or tempfile.mkdtemp(prefix="npm-vm-")
        try:
            with open(os.path.join(work, "test.sh"), "w") as f:
                f.write(script)
            with open(os.path.join(work, "timeout"), "w") as f:
                f.write(str(int(timeout)))
            for name in ("rc", "output"):
                if os.path.exists(os.path.join(work, name)):
                    os.unlink(os.path.join(work, name))
            cmd = ["qemu-system-x86_64", "-machine", "pc", "-cpu", "max", "-m", str(self.memory),
                   "-smp", str(self.cpus), "-nographic", "-no-reboot", "-nic", "none",
                   "-kernel", self.vmlinuz, "-initrd", self.initrd,
                   # cache=loose: the guest keeps what it read of the host's root (read-only,
                   # unchanged while a guest runs) in its page cache. Without it every exec read
                   # the program and its libraries over 9p again: about a second per command under
                   # software emulation, a boot 33 s instead of 14 s.
                   "-append", "console=ttyS0 root=hostroot rootfstype=9p "
                              "rootflags=trans=virtio,version=9p2000.L,msize=262144,cache=loose ro "
                              f"init={HERE}/guest-init.sh panic=-1 quiet",
                   "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
                   "-virtfs", f"local,path={work},mount_tag=out,security_model=none"]
            try:
                console = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                                         timeout=timeout + 60).stdout
            except subprocess.TimeoutExpired:
                return 124, "the VM did not power off in time"
            output = ""
            if os.path.exists(os.path.join(work, "output")):
                with open(os.path.join(work, "output"), errors="replace") as f:
                    output = f.read()
            try:
                with open(os.path.join(work, "rc")) as f:
                    return int(f.read().strip() or 1), output
            except (OSError, ValueError):
                return 125, output + "\n[no exit status from the VM; its console:]\n" + console[-3000:]
        finally:
            if own:
                shutil.rmtree(work, ignore_errors=True)

    def run_parts(self, parts, workdir, timeout=180):
        """Runs several independent scripts in one boot, in the order given, each in
        `workdir`/NAME with at most `timeout` seconds; a part must leave the guest as it found it
        (sysctls, loaded modules) unless it is the last one that depends on that. Returns
        {name: (exit status, output)}; a part that did not run (the guest died) has status 125."""
        names = [name for name, _ in parts]
        for name, script in parts:
            if not name.replace("_", "").replace("-", "").isalnum():
                raise ValueError(f"part name {name!r}: letters, digits, - and _ only")
            os.makedirs(os.path.join(workdir, name), exist_ok=True)
            with open(os.path.join(workdir, name, "test.sh"), "w") as f:
                f.write(script)
            for leftover in ("rc", "output"):
                if os.path.exists(os.path.join(workdir, name, leftover)):
                    os.unlink(os.path.join(workdir, name, leftover))
        runner = PART_RUNNER.format(names=" ".join(names), timeout=int(timeout))
        rc, output = self.run(runner, timeout=len(parts) * (timeout + 10), workdir=workdir)
        results = {}
        for name in names:
            part_output = ""
            path = os.path.join(workdir, name, "output")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    part_output = f.read()
            try:
                with open(os.path.join(workdir, name, "rc")) as f:
                    results[name] = (int(f.read().strip() or 1), part_output)
            except (OSError, ValueError):
                results[name] = (125, part_output + f"\n[part {name} did not finish; the boot: status {rc}]\n" + output)
        return results


def main():
    import argparse

    ap = argparse.ArgumentParser(description="Run a shell script in a VM with Debian's kernel")
    ap.add_argument("script")
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    skip_unless_available()
    with open(a.script) as f:
        rc, output = VM().run(f.read(), a.timeout)
    sys.stdout.write(output)
    sys.exit(rc)


if __name__ == "__main__":
    main()
