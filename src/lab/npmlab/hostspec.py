"""The [hosts] table of a study with topology = "hosts": real machines reached over ssh.

    topology = "hosts"
    [hosts]
    active = "root@192.0.2.10"            # ssh destinations: [user@]host[:port] ([v6]:port)
    passive = "lab@192.0.2.20:2222"
    identity = "~/.ssh/id_lab"            # optional: ssh -i (else the user's ssh config decides)
    ssh_config = "lab-ssh.conf"           # optional: ssh -F (relative to the study file)
    netperfmeter = "netperfmeter"         # optional: the program on the hosts
    base_port = 9000                      # optional: flow i's passive on base_port + 10 i
    max_clock_offset_ms = 1.0             # optional: the hosts' clocks, for one-way delays
    shared_clock = false                  # optional: the hosts share one clock (containers)
    service = { control_port = 9001, key_file = "/etc/netperfmeter.key" }   # optional
    [[hosts.pairs]]                       # optional: more pairs of hosts (--parallel)
    active = "root@192.0.2.30"
    passive = "root@192.0.2.40"
    paths = [{ active = "10.2.1.1", passive = "10.2.1.2" }]
    [[hosts.cross_traffic]]               # optional: a host that loads a path during each run,
                                          # its START at the flows' (netperfmeter --start-at)
    host = "root@192.0.2.50"
    path = 1
    flows = ["-tcp", "const0:const1400"]
    [[paths]]                             # the first pair's address of each path on each host
    name = "wan1"
    active = "10.1.1.1"
    passive = "10.1.1.2"

Checked as the rest of a study file (study._Checker): one line naming the file, line and key.
Nothing here touches the network; hosts.py reaches the hosts.
"""

import ipaddress
import os
import re

_USER = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_DESTINATION = re.compile(rf"(?:(?P<user>{_USER})@)?(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>{_NAME}))"
                          r"(?::(?P<port>[0-9]{1,5}))?")
FLOW_OPTIONS = ("-tcp", "-mptcp", "-udp", "-sctp", "-dccp")


class Destination:
    """An ssh destination: user@host (what ssh is given) and its port (None: ssh's default or
    the ssh config's)."""

    def __init__(self, text, login, port):
        self.text, self.login, self.port = text, login, port

    def __str__(self):
        return self.text

    def __eq__(self, other):
        return isinstance(other, Destination) and (self.login, self.port) == (other.login, other.port)

    def __hash__(self):
        return hash((self.login, self.port))


def parse_destination(text):
    """"[user@]host[:port]" (an IPv6 address in brackets) -> Destination; ValueError if it is not one."""
    m = _DESTINATION.fullmatch(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"\"{text}\" is not an ssh destination ([user@]host[:port], an IPv6 address in [ ])")
    host = m.group("v6") or m.group("host")
    if m.group("v6"):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"\"{text}\": [{host}] is not an IPv6 address") from None
    port = int(m.group("port")) if m.group("port") else None
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"\"{text}\": port {port} is not 1 to 65535")
    login = (m.group("user") + "@" if m.group("user") else "") + host
    return Destination(text, login, port)


class HostPath:
    """A path between two real hosts: its name and an address on each."""

    def __init__(self, name, active, passive):
        self.name, self.active, self.passive = name, active, passive

    def key(self):
        return (self.name, self.active, self.passive)


class HostPair:
    """An active and a passive host and the addresses of each path on them. Pairs are
    interchangeable test beds: a study's runs go to whichever pair is free (--parallel)."""

    def __init__(self, number, active, passive, paths):
        self.number, self.active, self.passive, self.paths = number, active, passive, paths


class Service:
    """A netperfmeter.service already running on the passive host: its control port (the
    passive's port is one below), the key file on the active host, its userland SCTP port."""

    def __init__(self, control_port, key_file, sctp_udp_port):
        self.control_port, self.key_file, self.sctp_udp_port = control_port, key_file, sctp_udp_port

    @property
    def port(self):
        return self.control_port - 1


class CrossTraffic:
    """A host that runs netperfmeter flows towards a path's passive address during each run."""

    def __init__(self, number, host, path, flows):
        self.number, self.host, self.path, self.flows = number, host, path, flows


class HostsSpec:
    def __init__(self):
        self.pairs = []
        self.identity = None
        self.ssh_config = None
        self.netperfmeter = "netperfmeter"
        self.base_port = 9000
        self.max_clock_offset_ms = None
        self.shared_clock = False
        self.service = None
        self.cross_traffic = []

    def hosts(self):
        """Every distinct host of the study: [(destination, roles)], in the order first named."""
        seen = {}
        for pair in self.pairs:
            for role, host in (("active", pair.active), ("passive", pair.passive)):
                seen.setdefault(host, set()).add(role)
        for x in self.cross_traffic:
            seen.setdefault(x.host, set()).add("cross-traffic")
        return list(seen.items())

    def describe(self):
        """A JSON-able description (results.sqlite's meta, lab.json)."""
        return {"pairs": [{"active": str(p.active), "passive": str(p.passive),
                           "paths": [{"name": q.name, "active": q.active, "passive": q.passive} for q in p.paths]}
                          for p in self.pairs],
                "service": None if self.service is None else {"control_port": self.service.control_port,
                                                              "key_file": self.service.key_file,
                                                              "sctp_udp_port": self.service.sctp_udp_port},
                "cross_traffic": [{"host": str(x.host), "path": x.path, "flows": x.flows} for x in self.cross_traffic],
                "max_clock_offset_ms": self.max_clock_offset_ms, "shared_clock": self.shared_clock,
                "base_port": self.base_port}


def _address(checker, key, value):
    if not isinstance(value, str):
        checker.fail(key, "must be an IP address (a string)")
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        checker.fail(key, f"\"{value}\" is not an IP address")


def _destination(checker, key, value, what="an ssh destination"):
    if value is None:
        checker.fail(key, f"is missing: {what} ([user@]host[:port])")
    try:
        return parse_destination(value)
    except ValueError as e:
        checker.fail(key, str(e))


def _paths(checker, key, entries, names):
    """The addresses of each path on each host: entries are tables of active and passive (and
    name, only in [[paths]])."""
    out = []
    for i, entry in enumerate(entries):
        where = f"{key}[{i + 1}]" if key == "paths" else key
        if not isinstance(entry, dict):
            checker.fail(where, "each path is a table { active = ADDRESS, passive = ADDRESS }")
        for k in entry:
            if k not in ("active", "passive") + (("name",) if key == "paths" else ()):
                checker.fail(f"{where}.{k}" if key == "paths" else where,
                             f"unknown key {k} (known: active, passive{', name' if key == 'paths' else ''})")
        active = _address(checker, f"{where}.active" if key == "paths" else where, entry.get("active"))
        passive = _address(checker, f"{where}.passive" if key == "paths" else where, entry.get("passive"))
        if ipaddress.ip_address(active).version != ipaddress.ip_address(passive).version:
            checker.fail(where, f"{active} and {passive} are not of one IP version")
        name = entry.get("name", names[i] if i < len(names) else f"path{i + 1}")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            checker.fail(f"{where}.name", "must be a name of letters, digits, '-', '_' and '.'")
        out.append(HostPath(name, active, passive))
    return out


def _port(checker, key, value, low=1, high=65535):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        checker.fail(key, f"must be a port number, {low} to {high}")
    return value


def _path_of_file(study_path, value):
    """~ expanded; relative to the study file's directory."""
    value = os.path.expanduser(value)
    return value if os.path.isabs(value) else os.path.join(os.path.dirname(os.path.abspath(study_path)), value)


def _entries(checker, table, name, known):
    """(index, key, table) of each [[hosts.NAME]], each checked to hold known keys only."""
    entries = table.get(name, [])
    what = ", ".join(known)
    if not isinstance(entries, list):
        checker.fail(f"hosts.{name}", f"must be an array of tables ([[hosts.{name}]]: {what})")
    for i, raw in enumerate(entries):
        key = f"hosts.{name}[{i + 1}]"
        if not isinstance(raw, dict):
            checker.fail(key, f"must be a table ({what})")
        for k in raw:
            if k not in known:
                checker.fail(f"{key}.{k}", f"unknown key (known: {what})")
        yield i, key, raw


def parse(checker, data, raw_paths):
    """The HostsSpec of a study's [hosts] table and its [[paths]] (raw tables); fails with the
    checker's one line."""
    table = data.get("hosts")
    if not isinstance(table, dict):
        checker.fail("hosts", "the hosts topology needs a [hosts] table (active, passive: ssh destinations)")
    for k in table:
        if k not in ("active", "passive", "identity", "ssh_config", "netperfmeter", "base_port",
                     "max_clock_offset_ms", "shared_clock", "service", "pairs", "cross_traffic"):
            checker.fail(f"hosts.{k}", "unknown key (known: active, base_port, cross_traffic, identity, "
                         "max_clock_offset_ms, netperfmeter, pairs, passive, service, shared_clock, ssh_config)")
    spec = HostsSpec()
    if len(raw_paths) > 8:
        checker.fail("paths", "a study has 1 to 8 paths")
    first = HostPair(1, _destination(checker, "hosts.active", table.get("active"), "the active host's ssh destination"),
                     _destination(checker, "hosts.passive", table.get("passive"),
                                  "the passive host's ssh destination"),
                     _paths(checker, "paths", raw_paths, []))
    if first.active == first.passive:
        checker.fail("hosts.passive", "is the active host: a pair is two hosts")
    spec.pairs.append(first)
    names = [p.name for p in first.paths]
    for i, key, raw in _entries(checker, table, "pairs", ("active", "passive", "paths")):
        active = _destination(checker, f"{key}.active", raw.get("active"), "the active host's ssh destination")
        passive = _destination(checker, f"{key}.passive", raw.get("passive"), "the passive host's ssh destination")
        paths = raw.get("paths")
        if not isinstance(paths, list) or len(paths) != len(first.paths):
            checker.fail(f"{key}.paths", f"must list the addresses of all {len(first.paths)} path(s), as "
                         "[{ active = ADDRESS, passive = ADDRESS }, ...] in the order of [[paths]]")
        if active == passive:
            checker.fail(f"{key}.passive", "is the active host: a pair is two hosts")
        spec.pairs.append(HostPair(i + 2, active, passive, _paths(checker, f"{key}.paths", paths, names)))
    used = {}
    for pair in spec.pairs:
        for host in (pair.active, pair.passive):
            if host in used and used[host] != pair.number:
                checker.fail(f"hosts.pairs[{pair.number - 1}]", f"{host} is in pair {used[host]} (of [hosts] and "
                             f"[[hosts.pairs]]) and pair {pair.number}: every pair needs hosts of its own")
            used[host] = pair.number

    for k in ("identity", "ssh_config"):
        if k in table:
            value = table[k]
            if not isinstance(value, str) or not value:
                checker.fail(f"hosts.{k}", "must be a file name")
            # whether it exists is the pre-flight's question: `plot` and `db` read a study's copy
            # in its results directory, and reach no host
            setattr(spec, k, _path_of_file(checker.path, value))
    program = table.get("netperfmeter", spec.netperfmeter)
    if not isinstance(program, str) or not re.fullmatch(r"[A-Za-z0-9_./+-]+", program) or program.startswith("-"):
        checker.fail("hosts.netperfmeter", "must be a program name or path on the hosts (letters, digits, / . _ + -)")
    spec.netperfmeter = program
    spec.base_port = _port(checker, "hosts.base_port", table.get("base_port", spec.base_port), 1024, 65000)
    if "max_clock_offset_ms" in table:
        bound = table["max_clock_offset_ms"]
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not 0 < bound <= 60000:
            checker.fail("hosts.max_clock_offset_ms", "must be a number of milliseconds above 0 (at most 60000)")
        spec.max_clock_offset_ms = float(bound)
    if "shared_clock" in table:
        if not isinstance(table["shared_clock"], bool):
            checker.fail("hosts.shared_clock", "must be true or false")
        spec.shared_clock = table["shared_clock"]
    if "service" in table:
        service = table["service"]
        if not isinstance(service, dict):
            checker.fail("hosts.service", "must be a table { control_port = 9001, key_file = \"/etc/...\" }")
        for k in service:
            if k not in ("control_port", "key_file", "sctp_udp_port"):
                checker.fail("hosts.service", f"unknown key {k} (known: control_port, key_file, sctp_udp_port)")
        control = _port(checker, "hosts.service", service.get("control_port", 9001), 2, 65535)
        key_file = service.get("key_file")
        if key_file is not None and (not isinstance(key_file, str) or not key_file.startswith("/")):
            checker.fail("hosts.service", "key_file must be an absolute path on the active host(s)")
        udp = _port(checker, "hosts.service", service.get("sctp_udp_port", 9899))
        spec.service = Service(control, key_file, udp)
    for i, key, raw in _entries(checker, table, "cross_traffic", ("host", "path", "flows")):
        host = _destination(checker, f"{key}.host", raw.get("host"), "the cross-traffic host's ssh destination")
        if host in used:
            checker.fail(f"{key}.host", f"{host} is a host of pair {used[host]}")
        path = raw.get("path", 1)
        if isinstance(path, bool) or not isinstance(path, int) or not 1 <= path <= len(first.paths):
            checker.fail(f"{key}.path", f"must be a path's number, 1 to {len(first.paths)}")
        flows = raw.get("flows")
        if not isinstance(flows, list) or len(flows) < 2 or not all(isinstance(a, str) and a for a in flows) \
                or flows[0] not in FLOW_OPTIONS:
            checker.fail(f"{key}.flows", "must be netperfmeter's flow arguments, e.g. [\"-tcp\", \"const0:const1400\"]")
        spec.cross_traffic.append(CrossTraffic(i + 1, host, path, flows))
    return spec
