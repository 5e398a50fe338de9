"""Container hosts for tests: Debian 12 machines of their own, reached only over ssh.

    lab = hostlab.Lab("npmhosts")            # a switch and an address range of its own
    a, b = lab.add_host("a"), lab.add_host("b")
    with lab:                                # boots them; stops and removes everything at the end
        a.ssh("systemctl is-active ssh")
        lab.write_inventory(path, "group", hostvars)   # for ansible-playbook

A host is:
* a file system: an overlay (upper directory in a temporary directory) over one cached Debian 12
  root, made once with debootstrap (minbase, then brought up to date with the release's updates
  and security updates) in ~/.cache/netperfmeter/hostroot-KEY, KEY naming the package list;
  the root has systemd, openssh-server, python3 and python3-apt (for Ansible), nftables,
  iproute2, sudo, and whatever packages the caller adds (e.g. the dependencies of .deb files it
  will install: the hosts have no route to the Internet);
* a network namespace of its own, NAME-PID-HOST, whose eth0 (a veth) is a port of the lab's
  switch (a bridge in the namespace NAME-PID-sw); the machine's root namespace has the lab's
  first address on a veth to that switch, so it reaches every host, and the hosts reach each
  other (198.18.N.0/24, the benchmarking range, N chosen so that no route of the root namespace
  overlaps it);
* booted with systemd-nspawn --boot (systemd as PID 1, Debian's sshd as its unit, journald, units
  with DynamicUser and credentials, nftables in the host's own namespace, which never touches
  the machine's; each container in a cgroup of its own, hostlab-NAME-PID-HOST, below this
  process's), or where systemd-nspawn is not installed (or NPM_HOSTLAB_MODE=chroot) with
  chroot + ip netns exec, running only sshd (no systemd: no units);
* Debian's real sshd on the host's address, with a host key made for it and the lab's client
  key authorized for root; the lab records the host keys in a known_hosts file of its own, so
  that ssh checks them (StrictHostKeyChecking=yes; the machine's ~/.ssh is never touched).

Everything a lab creates is removed by Lab.close() (also on failure: use it as a context
manager): the containers are shut down (systemd's orderly power-off, SIGKILL after a deadline),
the overlays unmounted, the namespaces, veths and cgroups deleted, the temporary directory
removed.
If the process dies without that, the containers get SIGTERM from the kernel (parent-death
signal), run_in_private_mount_namespace() has kept the mounts out of the machine's mount
table, and the next Lab of the same name removes namespaces, veths and cgroups left by dead
processes.

Needs root, debootstrap, ssh and ssh-keygen; systemd-nspawn (Debian package systemd-container)
for hosts with systemd. missing() says what is absent.
"""

import errno
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
SUITE = "bookworm"
# Changing what a cached root holds or how it is set up: bump this (the key of the cache).
ROOT_VERSION = 1
BASE_PACKAGES = ["systemd-sysv", "openssh-server", "python3", "python3-apt", "nftables", "iproute2", "sudo"]
CACHE_DIR = os.environ.get("NPM_HOSTROOT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "netperfmeter")


def log(*parts):
    print("[hostlab]", *parts, flush=True)


def run(cmd, check=True, timeout=None, **kwargs):
    """subprocess.run with text output captured; raises with the output on failure."""
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout, **kwargs)
    if check and r.returncode != 0:
        raise RuntimeError("%s exited with %d:\n%s%s" % (" ".join(map(str, cmd)), r.returncode,
                                                         r.stdout[-3000:], r.stderr[-3000:]))
    return r


def missing(systemd=True):
    """Why hosts cannot run here (None if they can); with systemd=True, hosts with systemd."""
    if os.geteuid() != 0:
        return "needs root (debootstrap, overlay mounts, network namespaces)"
    for tool, package in (("debootstrap", "debootstrap"), ("ssh", "openssh-client"), ("ssh-keygen", "openssh-client"),
                          ("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return "%s is not installed (Debian package %s)" % (tool, package)
    if systemd and mode() != "nspawn":
        if shutil.which("systemd-nspawn") is None:
            return ("systemd-nspawn is not installed (Debian package systemd-container): "
                    "hosts without it have no systemd")
        return "NPM_HOSTLAB_MODE=%s: hosts without systemd" % mode()
    return None


def mode():
    """nspawn (systemd as PID 1) where systemd-nspawn is installed, else chroot (sshd only)."""
    forced = os.environ.get("NPM_HOSTLAB_MODE")
    if forced in ("nspawn", "chroot"):
        return forced
    return "nspawn" if shutil.which("systemd-nspawn") else "chroot"


def run_in_private_mount_namespace():
    """Re-executes this program in a mount namespace of its own (once): whatever it mounts ends
    with it, however it ends. Its network namespace stays the machine's."""
    if os.environ.get("NPM_HOSTLAB_UNSHARED"):
        return
    os.environ["NPM_HOSTLAB_UNSHARED"] = "1"
    sys.stdout.flush()
    os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", sys.executable] + sys.argv)


# ---- the cached root ------------------------------------------------------------------------

def debian_mirror():
    """DEBIAN_MIRROR, else the Debian archive this machine's apt uses, else deb.debian.org
    (as packaging/fresh-root-check.sh and packaging/setup.sh)."""
    if os.environ.get("DEBIAN_MIRROR"):
        return os.environ["DEBIAN_MIRROR"]
    try:
        out = run(["apt-get", "indextargets", "--format", "$(REPO_URI)", "Identifier: Packages"], check=False).stdout
    except OSError:
        out = ""
    for uri in out.split():
        if re.search(r"/debian/?$", uri):
            return uri.rstrip("/")
    return "http://deb.debian.org/debian"


def root_key(packages):
    text = "%d\n%s\n%s\n" % (ROOT_VERSION, SUITE, " ".join(sorted(set(packages))))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cached_root(extra_packages=(), timings=None):
    """The path of the cached Debian 12 root with BASE_PACKAGES and extra_packages, made if
    there is none (several processes may ask at once: one makes it, the others wait)."""
    packages = sorted(set(BASE_PACKAGES) | set(extra_packages))
    os.makedirs(CACHE_DIR, exist_ok=True)
    path = os.path.join(CACHE_DIR, "hostroot-" + root_key(packages))
    marker = os.path.join(path, ".hostlab-complete")
    with open(path + ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(marker):
            log("cached root %s (warm)" % path)
            if timings is not None:
                timings["hostroot"] = ("warm", 0.0)
            return path
        start = time.monotonic()
        make_root(path, packages)
        took = time.monotonic() - start
        log("made the cached root %s in %.0f s" % (path, took))
        if timings is not None:
            timings["hostroot"] = ("cold", took)
    return path


def remove_tree(path):
    """rm -rf that never descends into a mount point below path."""
    if not os.path.lexists(path):
        return
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4]
            if point == real or point.startswith(real + "/"):
                raise RuntimeError("%s is still mounted below %s; not removing it" % (point, path))
    run(["rm", "-rf", "--one-file-system", path])


def make_root(path, packages):
    partial = path + ".partial"
    remove_tree(partial)
    mirror = debian_mirror()
    security = os.environ.get("DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
    log("debootstrap %s into %s (%s; with %s)" % (SUITE, partial, mirror, ", ".join(packages)))
    r = run(["debootstrap", "--variant=minbase", "--include=" + ",".join(packages), SUITE, partial, mirror],
            check=False, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError("debootstrap failed (%d):\n%s" % (r.returncode, (r.stdout + r.stderr)[-4000:]))
    with open(os.path.join(partial, "etc/apt/sources.list"), "w") as f:
        f.write("deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n"
                % (mirror, SUITE, mirror, SUITE, security, SUITE))
    shutil.copy("/etc/resolv.conf", os.path.join(partial, "etc/resolv.conf"))
    # The release's updates, as on a machine that is kept up to date; /proc for the scripts.
    script = ("mount -t proc proc \"$1/proc\" && chroot \"$1\" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "
              "DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update -qq && apt-get dist-upgrade -y -qq "
              "-o Dpkg::Options::=--force-confold && apt-get clean'")
    r = run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", partial], check=False,
            timeout=3600)
    if r.returncode != 0:
        raise RuntimeError("updating the root failed (%d):\n%s" % (r.returncode, (r.stdout + r.stderr)[-4000:]))
    # Every host gets a machine ID, host keys and a name of its own.
    for name in os.listdir(os.path.join(partial, "etc/ssh")):
        if name.startswith("ssh_host_"):
            os.unlink(os.path.join(partial, "etc/ssh", name))
    with open(os.path.join(partial, "etc/machine-id"), "w"):
        pass
    if os.path.exists(os.path.join(partial, "var/lib/dbus/machine-id")):
        os.unlink(os.path.join(partial, "var/lib/dbus/machine-id"))
    # A container has no consoles to log in on.
    for unit in ("getty@tty1.service", "console-getty.service"):
        link = os.path.join(partial, "etc/systemd/system/getty.target.wants", unit)
        if os.path.lexists(link):
            os.unlink(link)
    with open(os.path.join(partial, ".hostlab-complete"), "w") as f:
        f.write("hostlab root %d: %s %s from %s\n" % (ROOT_VERSION, SUITE, " ".join(packages), mirror))
    os.rename(partial, path)


def library_packages(program):
    """The Debian packages of the shared libraries a program built here links (ldd, dpkg -S):
    what a cached root needs so that the program runs on the hosts (Host.put)."""
    out = run(["ldd", program]).stdout
    files = re.findall(r"=>\s+(/\S+)", out) + re.findall(r"^\s*(/\S+)\s+\(", out, re.M)
    packages = set()
    for path in files:
        real = os.path.realpath(path)
        candidates = [path, real] + [p[4:] if p.startswith("/usr/") else "/usr" + p for p in (path, real)]
        for candidate in candidates:
            r = run(["dpkg", "-S", candidate], check=False)
            if r.returncode == 0 and ":" in r.stdout:
                packages.add(r.stdout.split(":")[0].split(",")[0].strip())
                break
        else:
            raise RuntimeError("%s links %s, which no Debian package holds" % (program, path))
    return sorted(packages)


# ---- the lab ---------------------------------------------------------------------------------

def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM
    return True


def _set_parent_death_signal():
    """In the child of a Popen: SIGTERM when the lab's process dies (nspawn then powers the
    container off)."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _cgroup_bases():
    """The cgroup directories systemd-nspawn works in, this process's in each: the cgroup2
    hierarchy and the name=systemd one (hybrid set-ups). nspawn --keep-unit makes its payload
    and supervisor cgroups below the one it runs in, so every host gets a cgroup of its own."""
    own = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            number, controllers, path = line.rstrip("\n").split(":", 2)
            if number == "0":
                own["cgroup2"] = path
            elif "name=systemd" in controllers.split(","):
                own["systemd"] = path
    bases = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            fstype, options = fields[sep + 1], fields[sep + 3].split(",")
            kind = ("cgroup2" if fstype == "cgroup2"
                    else "systemd" if fstype == "cgroup" and "name=systemd" in options else None)
            if kind and kind in own:
                bases.append(os.path.join(fields[4], own[kind].lstrip("/")))
    return bases


def _remove_cgroup(path):
    """Kills what is left in a cgroup tree and removes it."""
    if not os.path.isdir(path):
        return
    for directory, _, _ in os.walk(path, topdown=False):
        try:
            with open(os.path.join(directory, "cgroup.procs")) as f:
                for pid in f.read().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
        except OSError:
            pass
    for directory, _, _ in os.walk(path, topdown=False):
        for _ in range(50):
            try:
                os.rmdir(directory)
                break
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
                time.sleep(0.1)


class Host:
    def __init__(self, lab, name, address):
        self.lab, self.name, self.address = lab, name, address
        self.netns = "%s-%d-%s" % (lab.prefix, lab.pid, name)
        self.dir = os.path.join(lab.dir, name)
        self.merged = os.path.join(self.dir, "root")
        self.process = None
        self.mounted = False
        self.console = os.path.join(self.dir, "console.log")
        self.cgroups = []

    # -- use ------------------------------------------------------------------------------------
    def ssh_command(self, command):
        return ["ssh"] + self.lab.ssh_options() + ["root@" + self.address, command]

    def ssh(self, command, check=True, timeout=120, input=None):
        """Runs a shell command on the host over ssh; returns the CompletedProcess."""
        return run(self.ssh_command(command), check=check, timeout=timeout, input=input)

    def put(self, path, source, mode=0o755):
        """Copies a file of this machine into the host's file system (its overlay), e.g. a
        program built here; the host sees it at once."""
        target = os.path.join(self.merged, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(source, target)
        os.chmod(target, mode)

    def write(self, path, text, mode=0o755):
        """Writes a file into the host's file system (e.g. a script that stands in for a program)."""
        target = os.path.join(self.merged, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write(text)
        os.chmod(target, mode)

    def remove(self, path):
        target = os.path.join(self.merged, path.lstrip("/"))
        if os.path.lexists(target):
            os.unlink(target)

    # -- life -----------------------------------------------------------------------------------
    def prepare(self, root):
        os.makedirs(self.merged)
        upper, work = os.path.join(self.dir, "upper"), os.path.join(self.dir, "work")
        os.makedirs(upper)
        os.makedirs(work)
        run(["mount", "-t", "overlay", "overlay", "-o", "lowerdir=%s,upperdir=%s,workdir=%s" % (root, upper, work),
             self.merged])
        self.mounted = True
        m = self.merged
        with open(os.path.join(m, "etc/hostname"), "w") as f:
            f.write(self.name + "\n")
        with open(os.path.join(m, "etc/hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n%s %s\n"
                    % (self.address, self.name))
        key = os.path.join(m, "etc/ssh/ssh_host_ed25519_key")
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "root@" + self.name, "-f", key])
        with open(key + ".pub") as f:
            public = f.read().split()
        with open(self.lab.known_hosts, "a") as f:
            f.write("%s %s %s\n" % (self.address, public[0], public[1]))
        with open(os.path.join(m, "etc/ssh/sshd_config.d/hostlab.conf"), "w") as f:
            f.write("# hostlab: this host's key and address; keys only\n"
                    "HostKey /etc/ssh/ssh_host_ed25519_key\nListenAddress %s\n"
                    "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                    "PermitRootLogin prohibit-password\nUseDNS no\n" % self.address)
        ssh_dir = os.path.join(m, "root/.ssh")
        os.makedirs(ssh_dir, mode=0o700, exist_ok=True)
        os.chmod(ssh_dir, 0o700)
        authorized = os.path.join(ssh_dir, "authorized_keys")
        shutil.copy(self.lab.client_key + ".pub", authorized)
        os.chmod(authorized, 0o600)

    def connect(self):
        """The host's namespace and its veth to the switch."""
        lab = self.lab
        run(["ip", "netns", "add", self.netns])
        port = "p-" + self.name
        run(["ip", "link", "add", "eth0", "netns", self.netns, "type", "veth", "peer", "name", port,
             "netns", lab.switch])
        run(["ip", "-n", lab.switch, "link", "set", port, "master", "br0", "up"])
        run(["ip", "-n", self.netns, "addr", "add", "%s/%d" % (self.address, lab.network.prefixlen), "dev", "eth0"])
        run(["ip", "-n", self.netns, "link", "set", "lo", "up"])
        run(["ip", "-n", self.netns, "link", "set", "eth0", "up"])

    def start(self):
        console = open(self.console, "w")
        if self.lab.mode == "nspawn":
            cmd = ["systemd-nspawn", "--quiet", "--boot", "--directory=" + self.merged,
                   "--machine=" + self.netns, "--hostname=" + self.name,
                   "--network-namespace-path=/run/netns/" + self.netns,
                   "--register=no", "--keep-unit", "--private-users=no",
                   "--resolv-conf=off", "--timezone=off", "--link-journal=no",
                   # nftables in its namespace; the BPF congestion controls' loader and the
                   # passive's socket filter (bpf(2) with CAP_BPF, CAP_PERFMON)
                   "--capability=CAP_NET_ADMIN,CAP_BPF,CAP_PERFMON", "--system-call-filter=bpf"]
            self.cgroups = [os.path.join(base, "hostlab-" + self.netns) for base in _cgroup_bases()]
            for path in self.cgroups:
                os.makedirs(path, exist_ok=True)

            def enter():
                _set_parent_death_signal()
                for path in self.cgroups:
                    with open(os.path.join(path, "cgroup.procs"), "w") as f:
                        f.write("0")

            self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                                            preexec_fn=enter)
        else:
            m = self.merged
            script = ('set -e; hostname "$2"; mount -t proc proc "$1/proc"; mount -t sysfs sysfs "$1/sys"; '
                      'mount --rbind /dev "$1/dev"; mount -t tmpfs tmpfs "$1/run"; mkdir -p "$1/run/sshd"; '
                      'exec chroot "$1" /usr/sbin/sshd -D -e')
            cmd = ["ip", "netns", "exec", self.netns, "unshare", "--mount", "--propagation", "private", "--uts",
                   "--pid", "--fork", "--kill-child", "sh", "-c", script, "sh", m, self.name]
            self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                                            preexec_fn=_set_parent_death_signal)
        console.close()

    def wait_ready(self, deadline):
        """Until ssh works (and with systemd, until the boot has finished)."""
        last = ""
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("host %s stopped during its start (exit %s): %s"
                                   % (self.name, self.process.returncode, self.console_tail()))
            r = subprocess.run(self.ssh_command("true"), capture_output=True, text=True, errors="replace",
                               timeout=30)
            if r.returncode == 0:
                break
            last = r.stderr.strip()
            time.sleep(0.5)
        else:
            raise RuntimeError("host %s: no ssh within the deadline (%s); console: %s"
                               % (self.name, last, self.console_tail()))
        if self.lab.mode == "nspawn":
            left = max(10, int(deadline - time.monotonic()))
            r = self.ssh("timeout %d systemctl is-system-running --wait" % left, check=False, timeout=left + 30)
            state = r.stdout.strip()
            if state not in ("running", "degraded"):
                raise RuntimeError("host %s: systemd says %r after its boot" % (self.name, state))
            if state == "degraded":
                failed = self.ssh("systemctl --failed --no-legend --plain", check=False).stdout.strip()
                log("host %s booted degraded; failed units: %s" % (self.name, failed or "-"))

    def console_tail(self, lines=30):
        try:
            with open(self.console, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout=90):
        p = self.process
        if p is not None and p.poll() is None:
            # nspawn: SIGTERM makes it send the container's systemd SIGRTMIN+3 (power off). A
            # chroot's sshd has nothing to shut down: unshare --kill-child takes it along.
            p.send_signal(signal.SIGTERM if self.lab.mode == "nspawn" else signal.SIGKILL)
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log("host %s did not stop within %d s: killed" % (self.name, timeout))
                p.kill()
                p.wait()
        self.process = None
        # Whatever still runs in the namespace (a chroot's sshd children, a container killed).
        if os.path.exists("/run/netns/" + self.netns):
            pids = run(["ip", "netns", "pids", self.netns], check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            run(["ip", "netns", "del", self.netns], check=False)
        for path in self.cgroups:
            _remove_cgroup(path)
        self.cgroups = []
        if self.mounted:
            r = run(["umount", self.merged], check=False)
            if r.returncode != 0:
                run(["umount", "-l", self.merged], check=False)
            self.mounted = False


class Lab:
    """Hosts on one switch, reached from the machine's root namespace over ssh."""

    def __init__(self, prefix="npmhosts", extra_packages=(), boot_timeout=180):
        if not re.fullmatch(r"[a-z][a-z0-9]{1,9}", prefix):
            raise ValueError("prefix: 2 to 10 lowercase letters and digits")
        self.prefix, self.pid = prefix, os.getpid()
        self.extra_packages = list(extra_packages)
        self.boot_timeout = boot_timeout
        self.mode = mode()
        self.hosts = []
        self.timings = {}
        self.switch = "%s-%d-sw" % (prefix, self.pid)
        self.uplink = "%s%d" % (prefix[:5], self.pid)
        self.dir = tempfile.mkdtemp(prefix="%s-%d-" % (prefix, self.pid))
        self.known_hosts = os.path.join(self.dir, "known_hosts")
        self.client_key = os.path.join(self.dir, "id_ed25519")
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hostlab", "-f", self.client_key])
        open(self.known_hosts, "w").close()
        self.network = None
        self.started = False

    def ssh_options(self):
        return ["-F", "none", "-i", self.client_key, "-o", "IdentitiesOnly=yes",
                "-o", "UserKnownHostsFile=" + self.known_hosts,
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                "-o", "LogLevel=ERROR"]

    def add_host(self, name):
        if not re.fullmatch(r"[a-z][a-z0-9]{0,9}", name) or name == "sw":
            raise ValueError("host name: 1 to 10 lowercase letters and digits, not 'sw'")
        host = Host(self, name, None)
        self.hosts.append(host)
        return host

    @property
    def controller_address(self):
        return str(self.network.network_address + 1)

    # -- network --------------------------------------------------------------------------------
    def _remove_stale(self):
        """Namespaces and uplinks of this prefix whose process has died."""
        r = run(["ip", "netns", "list"], check=False)
        for line in r.stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            m = re.fullmatch(r"%s-(\d+)-[a-z0-9]+" % re.escape(self.prefix), name)
            if m and not _alive(int(m.group(1))):
                for pid in run(["ip", "netns", "pids", name], check=False).stdout.split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (OSError, ValueError):
                        pass
                run(["ip", "netns", "del", name], check=False)
                log("removed the stale namespace", name)
        for base in _cgroup_bases():
            for name in (os.listdir(base) if os.path.isdir(base) else []):
                m = re.fullmatch(r"hostlab-%s-(\d+)-[a-z0-9]+" % re.escape(self.prefix), name)
                if m and not _alive(int(m.group(1))):
                    _remove_cgroup(os.path.join(base, name))
                    log("removed the stale cgroup", os.path.join(base, name))
        r = run(["ip", "-o", "link", "show"], check=False)
        for m in re.finditer(r"^\d+: (%s(\d+))[@:]" % re.escape(self.prefix[:5]), r.stdout, re.M):
            if not _alive(int(m.group(2))):
                run(["ip", "link", "del", m.group(1)], check=False)
                log("removed the stale link", m.group(1))

    def _choose_network(self):
        used = []
        for cmd in (["ip", "-4", "-o", "route", "show", "table", "all"], ["ip", "-4", "-o", "addr", "show"]):
            for token in run(cmd, check=False).stdout.split():
                if re.fullmatch(r"\d+\.\d+\.\d+\.\d+(/\d+)?", token):
                    try:
                        used.append(ipaddress.ip_network(token, strict=False))
                    except ValueError:
                        pass
        used = [n for n in used if n.prefixlen > 0]
        for i in range(256):
            candidate = ipaddress.ip_network("198.18.%d.0/24" % ((self.pid + i) % 256))
            if not any(candidate.overlaps(n) for n in used):
                return candidate
        raise RuntimeError("no free /24 in 198.18.0.0/16 for the lab")

    def _connect_switch(self):
        run(["ip", "netns", "add", self.switch])
        run(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        run(["ip", "link", "add", self.uplink, "type", "veth", "peer", "name", "uplink", "netns", self.switch])
        run(["ip", "-n", self.switch, "link", "set", "uplink", "master", "br0", "up"])
        run(["ip", "addr", "add", "%s/%d" % (self.controller_address, self.network.prefixlen), "dev", self.uplink])
        run(["ip", "link", "set", self.uplink, "up"])

    # -- life -----------------------------------------------------------------------------------
    def start(self):
        self.started = True
        try:
            root = cached_root(self.extra_packages, self.timings)
            self._remove_stale()
            self.network = self._choose_network()
            for i, host in enumerate(self.hosts):
                host.address = str(self.network.network_address + 10 + i)
            self._connect_switch()
            log("lab %s: %s, controller %s, hosts %s (%s)" % (
                self.prefix, self.network, self.controller_address,
                ", ".join("%s %s" % (h.name, h.address) for h in self.hosts), self.mode))
            start = time.monotonic()
            for host in self.hosts:
                host.prepare(root)
                host.connect()
                host.start()
            deadline = time.monotonic() + self.boot_timeout
            for host in self.hosts:
                host.wait_ready(deadline)
            self.timings["boot"] = time.monotonic() - start
            log("hosts up after %.1f s" % self.timings["boot"])
        except BaseException:
            self.close()
            raise
        return self

    def close(self):
        """Stops every host and removes all the lab made; safe to call more than once."""
        errors = []
        for host in self.hosts:
            try:
                host.stop()
            except Exception as e:  # noqa: BLE001 - go on removing the rest
                errors.append("%s: %s" % (host.name, e))
        if run(["ip", "link", "show", self.uplink], check=False).returncode == 0:
            run(["ip", "link", "del", self.uplink], check=False)
        if os.path.exists("/run/netns/" + self.switch):
            run(["ip", "netns", "del", self.switch], check=False)
        if os.path.isdir(self.dir):
            try:
                remove_tree(self.dir)
            except RuntimeError as e:
                errors.append(str(e))
        self.started = False
        if errors:
            raise RuntimeError("cleaning up the lab: " + "; ".join(errors))

    def __enter__(self):
        return self if self.started else self.start()

    def __exit__(self, *exc):
        self.close()
        return False

    # -- Ansible --------------------------------------------------------------------------------
    def write_inventory(self, path, group, hostvars=None, groupvars=None):
        """An inventory (YAML's JSON subset) of the hosts in `group`, reached as root with the
        lab's key and known_hosts."""
        hostvars = hostvars or {}
        common = "-F none " + " ".join("-o %s" % o for o in (
            "IdentitiesOnly=yes", "UserKnownHostsFile=" + self.known_hosts, "StrictHostKeyChecking=yes",
            "ConnectTimeout=10"))
        inventory = {group: {
            "hosts": {h.name: dict({"ansible_host": h.address}, **hostvars.get(h.name, {})) for h in self.hosts},
            "vars": dict({"ansible_user": "root", "ansible_ssh_private_key_file": self.client_key,
                          "ansible_ssh_common_args": common, "ansible_python_interpreter": "/usr/bin/python3"},
                         **(groupvars or {})),
        }}
        with open(path, "w") as f:
            json.dump(inventory, f, indent=2)
        return path
