"""Study files: TOML that describes a topology, flows, a sweep and the metrics of a study.

Everything is checked before anything is built; an error names the file, the line and the key
(StudyError's str() is the one line to print).
"""

import itertools
import re
import tomllib

from . import expr, hostspec
from .errors import StudyError  # (study.StudyError: its old home)

PROTOCOLS = ("tcp", "mptcp", "udp", "sctp", "dccp", "quic")
PATH_KEYS = {"name", "rate", "reverse_rate", "queue", "reverse_queue", "delay_ms", "reverse_delay_ms", "loss",
             "reverse_loss", "ber", "aqm", "red", "codel", "pie"}
# A path's queue discipline (aqm): drop-tail in tbf, or an AQM in netperfmeter-delayline, with the
# parameters of its table (netperfmeter-delayline(1), -a) and their ranges.
AQMS = {"droptail": {}, "red": {"wq": (0, 1), "min": (0, 1e6), "max": (0, 1e6), "maxp": (0, 1), "gentle": (0, 1),
                                "mean": (1, 65536), "ecn": (0, 1)},
        "codel": {"target": (0, 1e5), "interval": (0, 1e5), "ecn": (0, 1)},
        "pie": {"target": (0, 1e5), "tupdate": (0, 1e5), "alpha": (0, 100), "beta": (0, 100), "burst": (0, 1e5),
                "ecn": (0, 1)}}
FLAGS = ("gentle", "ecn")  # AQM parameters that are true or false
AQM_QUEUE_PACKETS = 8192  # the delay line's largest queue (-q)
HOST_PATH_KEYS = {"name", "active", "passive"}  # topology "hosts": a path is an address on each host
HOSTS_KEYS = {"active", "passive", "identity", "ssh_config", "netperfmeter", "base_port", "max_clock_offset_ms",
              "service", "pairs", "cross_traffic"}
_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_BYTES = {"b": 1, "kb": 1000, "kib": 1024, "mb": 1e6, "mib": 1 << 20}
FRAME_BYTES = 1514  # a full Ethernet frame as tbf counts it: 1500 IP + 14 Ethernet
CAPTURE_SECONDS = 3.0  # each run's evidence capture, from the run's start, unless `capture` says otherwise
# The user data of one SCTP packet in such a frame: the 1500-byte MTU less IPv4 20, the UDP
# encapsulation (userland SCTP) 8, the SCTP common header 12, a DATA chunk's header 16.
SCTP_DATA_PER_PACKET = FRAME_BYTES - 14 - 20 - 8 - 12 - 16


class _Value(str):
    """A sweep value in a template: itself, and with [derive.VARIABLE] its derived fields as
    {VARIABLE.FIELD}."""

    def __new__(cls, value, fields):
        obj = super().__new__(cls, value)
        obj._fields = fields
        return obj

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(name) from None


class _Checker:
    """Finds the line of a key in the study's text, for error messages."""

    def __init__(self, path, text):
        self.path = path
        self.lines = text.splitlines()

    def _header(self, number):
        m = re.match(r"^\s*\[\[?\s*([A-Za-z0-9_.]+)\s*\]", self.lines[number])
        return m.group(1) if m else None

    def _find_in_block(self, start, leaf):
        """The line of `leaf = ...` from line index start to the next table header."""
        pattern = re.compile(r"^\s*" + re.escape(leaf) + r"\s*=")
        for i in range(start, len(self.lines)):
            if i > start and self._header(i) is not None:
                break
            if pattern.match(self.lines[i]):
                return i + 1
        return None

    def line_of(self, key):
        """The line a key such as 'runtime', 'sweep.rho', 'paths[2].rate' is on (None if not found)."""
        parts = key.split(".")
        for j, part in enumerate(parts):
            m = re.fullmatch(r"([A-Za-z0-9_]+)\[(\d+)\]", part)
            if not m:
                continue
            # the n-th [[table]] (or [[outer.table]]), then the key inside it
            table, rest = ".".join(parts[:j] + [m.group(1)]), parts[j + 1:]
            seen = 0
            for i in range(len(self.lines)):
                if self._header(i) == table and self.lines[i].lstrip().startswith("[["):
                    seen += 1
                    if seen == int(m.group(2)):
                        return (self._find_in_block(i, rest[0]) if rest else None) or i + 1
            return self._find_in_block(0, m.group(1))  # written inline: name = [...]
        if len(parts) > 1:
            for i in range(len(self.lines)):
                if self._header(i) == ".".join(parts[:-1]):
                    return self._find_in_block(i, parts[-1]) or i + 1
            for i in range(len(self.lines)):  # dotted keys: quick.sweep.rho = [...] or [quick] sweep.rho = ...
                if re.match(r"^\s*" + re.escape(".".join(parts[1:])) + r"\s*=", self.lines[i]) or \
                        re.match(r"^\s*" + re.escape(key) + r"\s*=", self.lines[i]):
                    return i + 1
        for i in range(len(self.lines)):
            if self._header(i) == key:
                return i + 1
        return self._find_in_block(0, key)

    def fail(self, key, message):
        line = self.line_of(key)
        where = f"{self.path}:{line}" if line else self.path
        raise StudyError(f"{where}: {key}: {message}")

    def expect(self, key, value, kinds, what):
        """`value` if it is of `kinds` (not a bool), else fails naming `key`: "must be {what}"."""
        if isinstance(value, bool) or not isinstance(value, kinds):
            self.fail(key, f"must be {what}")
        return value

    def tables(self, data, name, known, needed=None):
        """The array of tables [[name]]: each a table of known keys only; `needed` says what one holds
        when at least one is required."""
        tables = self.expect(name, data.get(name, []), list, f"an array of tables ([[{name}]])")
        if needed and not tables:
            self.fail(name, f"a study needs at least one [[{name}]] ({needed})")
        for i, table in enumerate(tables):
            if not isinstance(table, dict):
                self.fail(f"{name}[{i + 1}]", f"must be a table ([[{name}]])")
            for k in table:
                if known is not None and k not in known:
                    self.fail(f"{name}[{i + 1}].{k}", f"unknown key (known: {', '.join(sorted(known))})")
        return tables


def parse_rate(text):
    """'10mbit', '800kbit', '1.5 Mbit', or a bare number of Mbit/s -> bit/s."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text) * 1e6
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]+)(/s)?\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"\"{text}\" is not a rate (e.g. 10mbit, 800kbit, or a number of Mbit/s)")
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def _queue_bytes(text):
    """'64kB', '150000' (bytes), '100p' (full-size packets) -> bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        return int(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m:
        raise ValueError(f"\"{text}\" is not a queue size (e.g. 64kB, 150000, 100p)")
    unit = m.group(2).lower()
    if unit in ("p", "pkt", "packets"):
        return int(float(m.group(1)) * FRAME_BYTES)
    if unit not in _BYTES and unit != "":
        raise ValueError(f"\"{text}\" is not a queue size (units: B, kB, KiB, MB, MiB, p)")
    return int(float(m.group(1)) * _BYTES.get(unit, 1))


class Path:
    """One path of a disjoint topology, both directions (forward = active -> passive)."""

    def __init__(self, name, rate, reverse_rate, queue, reverse_queue, delay_ms, reverse_delay_ms, loss,
                 reverse_loss, ber=0.0, aqm="droptail", aqm_params=None):
        self.name = name
        self.rate, self.reverse_rate = rate, reverse_rate          # bit/s, None = unshaped
        self.queue, self.reverse_queue = queue, reverse_queue      # bytes
        self.delay_ms, self.reverse_delay_ms = delay_ms, reverse_delay_ms
        self.loss, self.reverse_loss = loss, reverse_loss          # percent
        # bit error rate of SCTP over UDP, both directions (netperfmeter-delayline -b): the packets
        # arrive, SCTP's CRC32c finds the error
        self.ber = ber
        # the queue discipline of its shaped directions: "droptail" (tbf), or "red", "codel", "pie"
        # in the delay line, with its parameters ((name, value) pairs, sorted)
        self.aqm = aqm
        self.aqm_params = tuple(sorted(dict(aqm_params or {}).items()))

    def key(self):
        return tuple(sorted(vars(self).items()))

    def needs_delay_line(self):
        return self.aqm != "droptail" or any(v > 0 for v in (self.delay_ms, self.reverse_delay_ms, self.loss,
                                                             self.reverse_loss, self.ber))


def spec_options(spec):
    """{name: value} of a FLOWSPEC's name=value options (the traffic fields hold no '=')."""
    options = {}
    for field in spec.split(":"):
        name, eq, value = field.partition("=")
        if eq:
            options[name.strip()] = value.strip()
    return options


def _fraction(text):
    try:
        return float(text)
    except ValueError:
        return None


def _quic_refusal(option, value):
    """Why netperfmeter refuses this option of a QUIC flow (src/flowspec/flowspec.cc), or None."""
    number = _fraction(value)
    if option in ("unordered", "unreliable", "ordered", "reliable", "rtx_timeout", "rtx_trials"):
        neutral = {"unordered": 0.0, "unreliable": 0.0, "ordered": 1.0, "reliable": 1.0}.get(option)
        if neutral is None or number != neutral:
            return "a QUIC stream is ordered and reliable (unordered=, unreliable=, rtx_timeout= and rtx_trials= " \
                   "apply to SCTP)"
    elif option in ("rcvbuf", "sndbuf"):
        if number != 0:
            return "the streams of a QUIC connection share its UDP socket, and QUIC's flow control windows bound " \
                   "what is buffered"
    elif option == "nodelay":
        if value not in ("off", "0", "false", "no"):
            return "applies to TCP, MPTCP and SCTP flows, not to QUIC"
    elif option == "ccid":
        if number != 0:
            return "applies only to DCCP flows"
    elif option == "cc":
        if value not in ("reno", "cubic", "default", ""):
            return "a QUIC connection's congestion control is reno, cubic or default (Reno)"
    return None


class Flow:
    def __init__(self, protocol, spec, description, number=0):
        self.protocol, self.spec, self.description = protocol, spec, description
        self.number = number  # the flow's place in the study (0, 1, ...): its id= and goodput(number)

    def argument(self):
        spec = self.spec + (f":description={self.description}" if self.description else "")
        return ["-" + self.protocol, spec]


class Metric:
    def __init__(self, name, formula, unit, tree, bimodal=False):
        self.name, self.formula, self.unit, self.tree = name, formula, unit, tree
        self.bimodal = bimodal  # summary.csv adds the median and the two modes


class Study:
    """A parsed and checked study. Templates ({variable}) are filled per parameter combination."""

    def __init__(self):
        self.path = None
        self.name = self.description = self.reproduces = ""
        self.topology = "disjoint"
        self.runtime = 10.0
        self.warmup = 0.0          # seconds of each run that its scalars leave out (--warmup)
        self.capture = CAPTURE_SECONDS  # seconds of each run that its evidence capture covers
        self.repetitions = 3
        self.min_repetitions, self.max_repetitions = 2, 20
        self.sweep = {}            # variable -> list of values (file order)
        self.paths = []            # raw dicts with templates
        self.bottleneck = None     # raw dict (topology "shared")
        self.flows = []            # raw dicts with templates
        self.metrics = []          # Metric, the first is the main metric
        self.active_args, self.passive_args = [], []
        self.plot = {}
        self.sysctls = {}
        self.compare = None        # {"variable": name, "baseline": value}: paired differences
        self.exclude = []          # [{variable: value}]: combinations that are not run
        self.derive = {}           # variable -> {value: {field: text}}: {variable.field} in templates
        self.paper = []            # [{"metric", "values": {variable: value}, "value", "bound", "source"}]
        # [{"quantity", "path", "flow", "paper" (number or formula), "tolerance", "reason", "source",
        #   "values": {variable: value}}]: the paper's regime (npmlab/regime.py)
        self.regime = []
        # [{"key", "claim", "metric", "arm", "against", "where", "direction", "effect", "band", "paper",
        #   "test", "alpha", "source"}]: the verdict rules (npmlab/verdict.py)
        self.verdicts = []
        self.unused = []           # sweep variables that no template uses: their runs differ in name only
        self.short_tails = []      # SCTP message sizes that leave a nearly empty last packet (warnings)
        self.hosts = None          # hostspec.HostsSpec (topology "hosts")
        self._checker = None

    @property
    def variables(self):
        return list(self.sweep)

    def combinations(self):
        names = self.variables
        for values in itertools.product(*(self.sweep[n] for n in names)):
            combination = dict(zip(names, values))
            if not any(all(str(combination[k]) == str(v) for k, v in rule.items()) for rule in self.exclude):
                yield combination

    def _fill(self, key, template, values):
        if not isinstance(template, str):
            return template
        mapping = {k: _Value(str(v), self.derive.get(k, {}).get(str(v), {})) for k, v in values.items()}
        try:
            return template.format_map(mapping)
        except KeyError as e:
            self._checker.fail(key, f"{{{e.args[0]}}} is not a variable of the sweep")
        except AttributeError as e:
            self._checker.fail(key, f"bad template \"{template}\": no field {e.args[0]} in [derive] for these values")
        except (ValueError, IndexError) as e:
            self._checker.fail(key, f"bad template \"{template}\": {e}")

    def paths_for(self, values):
        if self.topology == "hosts":  # addresses, no shaping: the first pair's (hostspec.HostPath)
            return list(self.hosts.pairs[0].paths)
        return [self._path(f"paths[{i + 1}]", raw, f"path{i + 1}", values) for i, raw in enumerate(self.paths)]

    def bottleneck_for(self, values):
        return self._path("bottleneck", self.bottleneck, "bottleneck", values) if self.bottleneck is not None else None

    def _path(self, key, raw, default_name, values):
        def get(k, default=None):
            return self._fill(f"{key}.{k}", raw.get(k, default), values)

        def convert(k, parse, default):
            if raw.get(k) is None:
                return default
            try:
                return parse(get(k))
            except ValueError as e:
                self._checker.fail(f"{key}.{k}", str(e))

        rate = convert("rate", parse_rate, None)
        reverse_rate = convert("reverse_rate", parse_rate, rate)
        queue = convert("queue", _queue_bytes, 100 * FRAME_BYTES)
        reverse_queue = convert("reverse_queue", _queue_bytes, queue)
        for k, v in (("rate", rate), ("reverse_rate", reverse_rate)):
            if v is not None and not 8000 <= v <= 100e9:
                self._checker.fail(f"{key}.{k}", "must be 8 kbit/s to 100 Gbit/s")
        numbers = {}
        for k in ("delay_ms", "reverse_delay_ms", "loss", "reverse_loss"):
            v = get(k, None)
            if v is None:
                v = numbers.get(k.replace("reverse_", ""), 0)
            try:
                v = float(v)
            except (TypeError, ValueError):
                self._checker.fail(f"{key}.{k}", f"\"{v}\" is not a number")
            limit = 100 if "loss" in k else 60000
            if not 0 <= v <= limit:
                self._checker.fail(f"{key}.{k}", f"{v} is outside 0 to {limit}")
            numbers[k] = v
        ber = get("ber", 0)
        try:
            ber = float(ber)
        except (TypeError, ValueError):
            self._checker.fail(f"{key}.ber", f"\"{ber}\" is not a number")
            ber = 0.0
        if not 0 <= ber < 1:
            self._checker.fail(f"{key}.ber", f"{ber} is outside 0 to below 1 (a bit error rate, e.g. 5e-6)")
        aqm, params = self._aqm(key, raw, values, rate, reverse_rate)
        for k, v in (("queue", queue), ("reverse_queue", reverse_queue)):
            if aqm != "droptail" and v > AQM_QUEUE_PACKETS * FRAME_BYTES:
                self._checker.fail(f"{key}.{k}", f"at most {AQM_QUEUE_PACKETS}p with an AQM (the delay line's queue)")
        return Path(raw.get("name", default_name), rate, reverse_rate, queue, reverse_queue, ber=ber, aqm=aqm,
                    aqm_params=params, **numbers)

    def _aqm(self, key, raw, values, rate, reverse_rate):
        """A path's aqm and the parameters of its table (red = {...}, codel = {...}, pie = {...}; the
        tables of the others may be there, for a sweep over aqm)."""
        aqm = self._fill(f"{key}.aqm", raw.get("aqm", "droptail"), values)
        if aqm not in AQMS:
            self._checker.fail(f"{key}.aqm", f"\"{aqm}\" is not one of {', '.join(AQMS)}")
        if aqm != "droptail" and rate is None and reverse_rate is None:
            self._checker.fail(f"{key}.aqm", f"{aqm} needs a rate (its queue builds up at the path's bottleneck)")
        table = raw.get(aqm) or {}
        if not isinstance(table, dict):
            self._checker.fail(f"{key}.{aqm}", "must be a table, e.g. {wq = 0.002, min = 20, max = 80, maxp = 0.02}")
        params = {}
        for name, value in table.items():
            if name not in AQMS[aqm]:
                self._checker.fail(f"{key}.{aqm}.{name}", f"not a parameter of {aqm} ({', '.join(AQMS[aqm])})")
            low, high = AQMS[aqm][name]
            value = self._fill(f"{key}.{aqm}.{name}", value, values)
            try:
                number = float(value)
            except (TypeError, ValueError):
                self._checker.fail(f"{key}.{aqm}.{name}", f"\"{value}\" is not a number")
            if not low <= number <= high or (number == low and name not in FLAGS):
                self._checker.fail(f"{key}.{aqm}.{name}", f"{value} is outside {low:g} (excluded) to {high:g}")
            params[name] = bool(value) if name in FLAGS else number
        if aqm == "red" and params.get("min", 20) >= params.get("max", 80):
            self._checker.fail(f"{key}.red", "min must be below max")
        return aqm, params

    def flows_for(self, values):
        """The flows of a combination, in order; a [[flows]] entry with count = N (or a
        {variable}) stands for N such flows."""
        flows = []
        quic_cc = []  # [key, cc] of the first QUIC flow
        for i, raw in enumerate(self.flows):
            key = f"flows[{i + 1}]"
            protocol = self._fill(f"{key}.protocol", raw["protocol"], values)
            if protocol not in PROTOCOLS:
                self._checker.fail(f"{key}.protocol", f"\"{protocol}\" is not one of {', '.join(PROTOCOLS)}")
            count = self._fill(f"{key}.count", raw.get("count", 1), values)
            try:
                count = int(count)
            except (TypeError, ValueError):
                self._checker.fail(f"{key}.count", f"\"{count}\" is not a number of flows")
            if not 1 <= count <= 64:
                self._checker.fail(f"{key}.count", "must be 1 to 64")
            spec = self._fill(f"{key}.spec", raw["spec"], values)
            if protocol == "quic":
                self._check_quic(key, spec, quic_cc)
            for _ in range(count):
                flows.append(Flow(protocol, spec, self._fill(f"{key}.description", raw.get("description", ""), values),
                                  number=len(flows)))
        return flows

    def _check_quic(self, key, spec, first_cc):
        """A QUIC flow's FLOWSPEC: what netperfmeter refuses for QUIC, said before anything runs;
        `first_cc` holds [key, cc] of the run's first QUIC flow (all share one connection)."""
        if self.hosts is not None and self.hosts.service is not None:
            self._checker.fail(f"{key}.protocol", "a QUIC flow needs a passive with the study's certificate "
                               "(-tls-key, -tls-cert), and the running netperfmeter.service (hosts.service) has its "
                               "own or none: leave out service, and the lab starts the passives")
        options = spec_options(spec)
        for option, value in options.items():
            why = _quic_refusal(option, value)
            if why:
                self._checker.fail(f"{key}.spec", f"{option}={value}: {why}")
        cc = options.get("cc", "default")
        cc = "default" if cc == "" else cc
        if not first_cc:
            first_cc += [key, cc]
        elif cc != first_cc[1]:
            self._checker.fail(f"{key}.spec", f"cc={cc}: the QUIC flows of a run are streams of one connection, which "
                               f"has one congestion control ({first_cc[0]} has cc={first_cc[1]})")

    def regime_paper_value(self, row, values):
        """The paper's value of a [[regime]] row at a sweep point (a number, or its formula with the
        point's {variables} filled)."""
        paper = row["paper"]
        if isinstance(paper, float):
            return paper
        try:
            return expr.evaluate(expr.compile_formula(self._fill(row["key"] + ".paper", paper, values)), {})
        except (expr.FormulaError, KeyError, ValueError, ZeroDivisionError) as e:
            self._checker.fail(row["key"] + ".paper", f"\"{paper}\" is not a number's formula ({e})")

    def metric_tree(self, metric, values):
        """A metric's formula for a combination (its {variable}s filled)."""
        if "{" not in metric.formula:
            return metric.tree
        return expr.compile_formula(self._fill("metrics", metric.formula, values))

    def args_for(self, which, values):
        return [self._fill(which, a, values) for a in (self.active_args if which == "active" else self.passive_args)]

    def check_templates(self):
        """Fills every template with the first combination, so that errors show before anything runs."""
        for values in itertools.islice(self.combinations(), 1):
            self.paths_for(values)
            self.bottleneck_for(values)
            self.flows_for(values)
            self.args_for("active", values)
            self.args_for("passive", values)


_TOP_KEYS = {"name", "description", "reproduces", "topology", "runtime", "warmup", "repetitions", "min_repetitions",
             "max_repetitions", "sweep", "paths", "flows", "metrics", "netperfmeter", "plot", "quick", "sysctl",
             "bottleneck", "compare", "exclude", "derive", "paper", "capture", "hosts", "regime", "verdict",
             "traces"}


def load(path, quick=False):
    """The study in the file `path` (its quick form with `quick`), checked completely; raises StudyError."""
    try:
        with open(path, "rb") as f:
            raw_bytes = f.read()
    except OSError as e:
        raise StudyError(f"{path}: {e.strerror}")
    try:
        text = raw_bytes.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError:
        raise StudyError(f"{path}: not a UTF-8 text file")
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column \d+\)", str(e))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(e))
        raise StudyError(f"{path}:{m.group(1)}: {message}" if m else f"{path}: {message}")
    checker = _Checker(path, text)
    study = Study()
    study.path, study._checker = path, checker
    _check_keys(checker, data)
    full_sweep = _apply_quick(checker, data, quick)
    _parse_basics(checker, study, data)
    _parse_sweep(checker, study, data)
    _parse_paths(checker, study, data)
    _parse_flows(checker, study, data)
    _parse_options(checker, study, data)
    _parse_metrics(checker, study, data)
    _parse_sweep_rules(checker, study, data, full_sweep)
    _parse_paper(checker, study, data, full_sweep)
    _parse_regime(checker, study, data, full_sweep)
    from . import verdict  # verdict uses this module's helpers
    verdict.parse(checker, study, data, full_sweep)
    from . import traces  # [traces]: the window traces of a representative run per cell
    traces.parse(checker, study, data)
    _parse_compare(checker, study, data)
    _parse_plot(checker, study, data)
    _finish(study, data)
    return study


def _check_keys(checker, data):
    """Only the keys a study file knows."""
    for key in data:
        if key not in _TOP_KEYS:
            checker.fail(key, f"unknown key (known: {', '.join(sorted(_TOP_KEYS))})")


def _apply_quick(checker, data, quick):
    """The study's full sweep (what [[paper]] rows must lie on); with `quick`, its [quick] table applied to `data`."""
    # the study's own sweep, before a quick form narrows it: what [[paper]] rows must lie on
    full_sweep = {k: list(v) for k, v in data["sweep"].items() if isinstance(v, list)} \
        if isinstance(data.get("sweep"), dict) else {}
    if quick and isinstance(data.get("quick"), dict):
        quick_part = data["quick"]
        for key, value in quick_part.items():
            if key == "sweep":
                checker.expect("quick.sweep", value, dict, "a table of variable = [values]")
                for var, values in value.items():
                    if var not in data.get("sweep", {}):
                        checker.fail(f"quick.sweep.{var}", "is not a variable of the sweep")
                    data["sweep"][var] = values
            elif key in ("runtime", "warmup", "repetitions", "min_repetitions", "max_repetitions"):
                data[key] = value
            else:
                checker.fail(f"quick.{key}", "unknown key (runtime, warmup, repetitions, min_repetitions, "
                             "max_repetitions, sweep)")
    return full_sweep


def _parse_basics(checker, study, data):
    """name, description, reproduces, topology, runtime, warmup, capture, repetitions."""
    study.name = checker.expect("name", data.get("name", ""), str, "a string")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", study.name):
        checker.fail("name", "must be a name of letters, digits, '-', '_' and '.'")
    study.description = checker.expect("description", data.get("description", ""), str, "a string")
    study.reproduces = checker.expect("reproduces", data.get("reproduces", ""), str, "a string")
    study.topology = checker.expect("topology", data.get("topology", "disjoint"), str, "a string")
    from . import testbed  # the registered topologies (their modules import this one)
    if study.topology not in testbed.kinds():
        checker.fail("topology", f"\"{study.topology}\" is not a topology ({', '.join(testbed.kinds())})")
    study.runtime = float(checker.expect("runtime", data.get("runtime", 10), (int, float), "a number of seconds"))
    if not 0.5 <= study.runtime <= 86400:
        checker.fail("runtime", "must be 0.5 to 86400 seconds")
    study.warmup = float(checker.expect("warmup", data.get("warmup", 0), (int, float), "a number of seconds"))
    if not 0 <= study.warmup < study.runtime:
        checker.fail("warmup", f"must be 0 to less than the runtime ({study.runtime:g} s)")
    study.capture = float(checker.expect("capture", data.get("capture", CAPTURE_SECONDS), (int, float),
                                         "a number of seconds"))
    if not 0.5 <= study.capture <= study.runtime + 10:
        checker.fail("capture", f"must be 0.5 s to the runtime and 10 s ({study.runtime + 10:g} s)")
    for key in ("repetitions", "min_repetitions", "max_repetitions"):
        value = checker.expect(key, data.get(key, getattr(study, key)), int, "an integer")
        if not 1 <= value <= 10000:
            checker.fail(key, "must be 1 to 10000")
        setattr(study, key, value)
    if study.min_repetitions > study.max_repetitions:
        checker.fail("min_repetitions", "is above max_repetitions")


def _parse_sweep(checker, study, data):
    sweep = checker.expect("sweep", data.get("sweep", {}), dict, "a table of variable = [values]")
    for var, values in sweep.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var) or var in ("metric", "n", "mean", "ci_low", "ci_high",
                                                                       "repetition"):
            checker.fail(f"sweep.{var}", "a variable is a name of letters, digits and '_' (and not a summary column)")
        if not isinstance(values, list) or not values:
            checker.fail(f"sweep.{var}", "must be a non-empty list of values")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                checker.fail(f"sweep.{var}", "values are numbers or strings")
            if isinstance(v, str) and not re.fullmatch(r"[A-Za-z0-9_.+-]+", v):
                checker.fail(f"sweep.{var}", f"\"{v}\": string values are letters, digits and _ . + - only")
        if len(set(map(str, values))) != len(values):
            checker.fail(f"sweep.{var}", "has a value twice")
        study.sweep[var] = values


def _parse_paths(checker, study, data):
    """[[paths]] as the study's topology has them ([hosts] on hosts), the shared topology's [bottleneck]."""
    if study.topology == "hosts":
        study.paths = checker.tables(data, "paths", HOST_PATH_KEYS,
                                     needed="active and passive: the path's address on each host")
        study.hosts = hostspec.parse(checker, data, study.paths)
    else:
        if "hosts" in data:
            checker.fail("hosts", "only the hosts topology has a [hosts] table (topology = \"hosts\")")
        study.paths = checker.tables(data, "paths", PATH_KEYS, needed="rate, queue, delay_ms, loss, ...")
    if study.topology == "shared":
        bottleneck = checker.expect("bottleneck", data.get("bottleneck"), dict,
                                    "a table ([bottleneck] with rate, queue, delay_ms, ...) for the shared topology")
        for k in bottleneck:
            if k not in PATH_KEYS:
                checker.fail(f"bottleneck.{k}", f"unknown key (known: {', '.join(sorted(PATH_KEYS))})")
        study.bottleneck = bottleneck
    elif "bottleneck" in data:
        checker.fail("bottleneck", "only the shared topology has a bottleneck")
    if len(study.paths) > 8:
        checker.fail("paths", "a study has 1 to 8 paths")


def _parse_flows(checker, study, data):
    flows = checker.tables(data, "flows", {"protocol", "spec", "description", "count"}, needed="protocol and spec")
    for i, f in enumerate(flows):
        key = f"flows[{i + 1}]"
        protocol = f.get("protocol")
        if protocol not in PROTOCOLS and not (isinstance(protocol, str) and "{" in protocol):
            checker.fail(f"{key}.protocol", f"must be one of {', '.join(PROTOCOLS)} (or a {{variable}})")
        checker.expect(f"{key}.spec", f.get("spec"), str, "a FLOWSPEC string")
    study.flows = flows


def _parse_options(checker, study, data):
    """[netperfmeter] active and passive arguments, [sysctl]."""
    nm = checker.expect("netperfmeter", data.get("netperfmeter", {}), dict, "a table")
    for k, v in nm.items():
        if k not in ("active", "passive"):
            checker.fail(f"netperfmeter.{k}", "unknown key (known: active, passive)")
        if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
            checker.fail(f"netperfmeter.{k}", "must be a list of argument strings")
    study.active_args, study.passive_args = nm.get("active", []), nm.get("passive", [])

    sysctl = checker.expect("sysctl", data.get("sysctl", {}), dict, "a table of name = value")
    for k, v in sysctl.items():
        if study.topology == "hosts":
            checker.fail(f"sysctl.{k}", "the hosts topology changes nothing on the hosts: set it there "
                         "(each run records the hosts' settings)")
        if not re.fullmatch(r"net\.[a-z0-9_.]+", k):
            checker.fail(f"sysctl.{k}", "only net.* settings (they apply inside the lab's namespaces)")
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            checker.fail(f"sysctl.{k}", "must be an integer or a string")
    study.sysctls = sysctl


def _parse_metrics(checker, study, data):
    metrics = checker.tables(data, "metrics", {"name", "value", "unit", "bimodal"}, needed="name and value")
    for i, m in enumerate(metrics):
        key = f"metrics[{i + 1}]"
        name = checker.expect(f"{key}.name", m.get("name"), str, "a name")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            checker.fail(f"{key}.name", "a metric name is letters, digits and '_'")
        formula = checker.expect(f"{key}.value", m.get("value"), str, "an expression")
        try:
            # a formula may use {variable} (e.g. a path's rate); checked with the first combination
            first = next(study.combinations(), {})
            tree = expr.compile_formula(study._fill(f"{key}.value", formula, first) if "{" in formula else formula)
        except expr.FormulaError as e:
            checker.fail(f"{key}.value", str(e))
        bimodal = m.get("bimodal", False)
        if not isinstance(bimodal, bool):
            checker.fail(f"{key}.bimodal", "must be true or false")
        study.metrics.append(Metric(name, formula, m.get("unit", ""), tree, bimodal))


def _parse_sweep_rules(checker, study, data, full_sweep):
    """[derive.VARIABLE] and [[exclude]]."""
    derive = checker.expect("derive", data.get("derive", {}), dict, "a table of [derive.VARIABLE]")
    for var, table in derive.items():
        if var not in study.sweep:
            checker.fail(f"derive.{var}", "is not a variable of the sweep")
        if not isinstance(table, dict):
            checker.fail(f"derive.{var}", "must be a table of value = { field = text, ... }")
        fields = None
        for value in map(str, study.sweep[var]):
            entry = table.get(value)
            if not isinstance(entry, dict) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                                      for v in entry.values()):
                checker.fail(f"derive.{var}", f"needs a table of fields for the value \"{value}\"")
            if fields is not None and set(entry) != fields:
                checker.fail(f"derive.{var}", f"\"{value}\" has other fields than the values before it")
            fields = set(entry)
        study.derive[var] = {value: {k: str(v) for k, v in entry.items()} for value, entry in table.items()}

    exclude = data.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(rule, dict) and rule for rule in exclude):
        checker.fail("exclude", "must be a list of tables of variable = value ([[exclude]] or exclude = [{...}])")
    for rule in exclude:
        for k, v in rule.items():
            if k not in study.sweep:
                checker.fail("exclude", f"\"{k}\" is not a variable of the sweep")
            # a value of the study's own sweep: a quick form that narrows it leaves the rule idle
            if str(v) not in map(str, full_sweep.get(k, study.sweep[k])):
                checker.fail("exclude", f"\"{v}\" is not a value of {k}")
    study.exclude = exclude
    if not any(True for _ in study.combinations()):
        checker.fail("exclude", "leaves no combination to run")


def _parse_paper(checker, study, data, full_sweep):
    names = {m.name for m in study.metrics}
    for i, entry in enumerate(checker.tables(data, "paper", None)):
        key = f"paper[{i + 1}]"
        metric = entry.get("metric")
        if metric not in names:
            checker.fail(f"{key}.metric", f"\"{metric}\" is not a metric of the study")
        value = entry.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            checker.fail(f"{key}.value", "must be a number (the paper's value, in the metric's unit)")
        values = {}
        for k, v in entry.items():
            if k in ("metric", "value", "source", "bound"):
                continue
            if k not in study.sweep:
                checker.fail(f"{key}.{k}", "is not a variable of the sweep (or metric, value, source)")
            if str(v) not in map(str, full_sweep.get(k, study.sweep[k])):
                checker.fail(f"{key}.{k}", f"\"{v}\" is not a value of the sweep's {k} "
                             f"({', '.join(map(str, full_sweep.get(k, study.sweep[k])))}): the paper's point "
                             "would be drawn nowhere")
            values[k] = v
        bound = entry.get("bound", "value")
        if bound not in ("value", "upper", "lower"):
            checker.fail(f"{key}.bound", "must be \"upper\" or \"lower\" (the paper gives a bound, not a value)")
        study.paper.append({"metric": metric, "values": values, "value": float(value), "bound": bound,
                            "source": str(entry.get("source", ""))})


def _parse_compare(checker, study, data):
    if "compare" in data:
        compare = checker.expect("compare", data["compare"], dict, "a table (variable, baseline)")
        for k in compare:
            if k not in ("variable", "baseline"):
                checker.fail(f"compare.{k}", "unknown key (known: variable, baseline)")
        variable = compare.get("variable")
        if variable not in study.sweep:
            checker.fail("compare.variable", f"\"{variable}\" is not a variable of the sweep")
        if str(compare.get("baseline")) not in map(str, study.sweep[variable]):
            checker.fail("compare.baseline", f"\"{compare.get('baseline')}\" is not a value of {variable}")
        study.compare = {"variable": variable, "baseline": compare["baseline"]}


def _parse_plot(checker, study, data):
    plot = checker.expect("plot", data.get("plot", {}), dict, "a table")
    for k, v in plot.items():
        if k not in ("x", "colour", "xlab", "ylab", "x_unit", "y_unit", "title"):
            checker.fail(f"plot.{k}", "unknown key (known: x, colour, xlab, ylab, x_unit, y_unit, title)")
        if k in ("x", "colour") and v not in study.sweep:
            checker.fail(f"plot.{k}", f"\"{v}\" is not a variable of the sweep")
    study.plot = plot


def _finish(study, data):
    """What needs the whole study: its templates, every combination's QUIC flows, unused variables, short SCTP tails."""
    study.check_templates()
    if any(f.get("protocol") == "quic" or "{" in str(f.get("protocol")) for f in study.flows):
        for values in study.combinations():  # every combination's QUIC flows, before anything runs
            study.flows_for(values)
    study.unused = _unused_variables(data, study.sweep)
    if study.topology != "hosts":
        study.short_tails = _short_tails(study)


def _parse_regime(checker, study, data, full_sweep):
    """[[regime]]: the dimensionless quantities of the paper's setup (npmlab/regime.py)."""
    from . import regime  # regime uses this module's Path and constants
    for i, entry in enumerate(checker.tables(data, "regime", None)):
        key = f"regime[{i + 1}]"
        quantity = entry.get("quantity")
        if quantity not in regime.QUANTITIES:
            checker.fail(f"{key}.quantity", f"\"{quantity}\" is not one of {', '.join(regime.QUANTITIES)}")
        path = entry.get("path")
        if quantity in regime.PATH_QUANTITIES:
            n = len(study.paths)
            if not (path == "bottleneck" and study.bottleneck is not None) and \
                    not (isinstance(path, int) and not isinstance(path, bool) and 1 <= path <= n):
                checker.fail(f"{key}.path", f"{quantity} is a path's: path = 1 to {n}"
                             + (" or \"bottleneck\"" if study.bottleneck is not None else ""))
        elif path is not None:
            checker.fail(f"{key}.path", f"{quantity} is not a path's")
        flow = entry.get("flow", 0)
        if isinstance(flow, bool) or not isinstance(flow, int) or not 0 <= flow < 64:
            checker.fail(f"{key}.flow", "must be a flow's number (0, 1, ...)")
        paper = entry.get("paper")
        if isinstance(paper, bool) or not isinstance(paper, (int, float, str)):
            checker.fail(f"{key}.paper", "must be the paper's value: a number, or a formula of {variables}")
        tolerance = entry.get("tolerance", regime.TOLERANCE)
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance <= 10:
            checker.fail(f"{key}.tolerance", "must be a relative tolerance above 0 (0.25 = 25 %)")
        for k in ("reason", "source"):
            if not isinstance(entry.get(k, ""), str):
                checker.fail(f"{key}.{k}", "must be a string")
        if "reason" in entry and not entry["reason"].strip():
            checker.fail(f"{key}.reason", "an empty reason excuses nothing: say why the study differs")
        values = {}
        for k, v in entry.items():
            if k in ("quantity", "path", "flow", "paper", "tolerance", "reason", "source"):
                continue
            if k not in study.sweep:
                checker.fail(f"{key}.{k}", "is not a variable of the sweep (or quantity, path, flow, paper, "
                             "tolerance, reason, source)")
            if str(v) not in map(str, full_sweep.get(k, study.sweep[k])):
                checker.fail(f"{key}.{k}", f"\"{v}\" is not a value of the sweep's {k}")
            values[k] = v
        study.regime.append({"key": key, "quantity": quantity, "path": path, "flow": flow,
                             "paper": float(paper) if not isinstance(paper, str) else paper,
                             "tolerance": float(tolerance), "reason": entry.get("reason", ""),
                             "source": entry.get("source", ""), "values": values})
    for values in itertools.islice(study.combinations(), 1):  # a formula's errors before anything runs
        for row in study.regime:
            if all(str(values.get(k)) == str(v) for k, v in row["values"].items()):
                study.regime_paper_value(row, values)


def _short_tails(study):
    """[(flow number, direction, message size, bytes in its last packet)] of the SCTP flows whose
    constant message size leaves a last fragment of at most a quarter of a packet on the test
    bed's links: each message then costs a nearly empty packet more (1452 bytes, a "full" packet
    of a kernel SCTP without encapsulation, goes out as 1444 + 8 here), which changes the packet
    rate, the queues' content in packets and the payload a path carries."""
    found = {}  # in the order found (a dict: each once)
    for values in study.combinations():
        for flow in study.flows_for(values):
            if flow.protocol != "sctp":
                continue
            fields = flow.spec.split(":")
            for direction, index in (("outbound", 1), ("inbound", 3)):
                match = re.fullmatch(r"const(\d+)", fields[index].strip()) if len(fields) > index else None
                size = int(match.group(1)) if match else 0
                tail = size % SCTP_DATA_PER_PACKET
                if size > SCTP_DATA_PER_PACKET and 0 < tail <= SCTP_DATA_PER_PACKET // 4:
                    found[(flow.number, direction, size, tail)] = None
    return list(found)


# Sections that name variables without making runs differ: a variable used only there is a mistake.
_NOT_USES = {"name", "description", "reproduces", "sweep", "quick", "plot", "compare", "exclude", "paper", "regime",
             "verdict"}


def _unused_variables(data, sweep):
    """The sweep variables with more than one value that no {variable} or {variable.field} in the
    rest of the study uses (paths, flows, metrics, sysctls, netperfmeter options, ...)."""
    texts = []

    def collect(value):
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)
        elif isinstance(value, list):
            for v in value:
                collect(v)

    for key, value in data.items():
        if key not in _NOT_USES:
            collect(value)
    used = set()
    for text in texts:
        used.update(re.findall(r"\{(\w+)(?:\.\w+)?\}", text))
    return [var for var, values in sweep.items() if len(values) > 1 and var not in used]
