"""The test beds the run loop drives: the Testbed protocol and the registry of topologies.

A study's `topology` names a registered class (register()): "disjoint" and "shared" are
topology.Disjoint and topology.Shared (namespaces on this machine), "hosts" is hosts.PairBed (a
pair of real hosts over ssh). The study file's check of `topology` takes its names from here
(kinds()), and the command line from the class: whether the lab builds the bed on this machine
(`remote` False: root, namespaces, a capture of every run) or reaches it over ssh, and which run
loop drives it (runner_class()). Adding a topology: see src/lab/README.md ("Adding a topology").

A Testbed is what the run loop needs of a bed, no more:

  up(), down()             bring it up, tear it down
  paths                    the study's paths on it (Path objects, or hostspec's on hosts)
  address(side, path)      the address of "active"/"passive" on path `path` (0, 1, ...)
  active_addresses()       the active's addresses on every path (SCTP's -L)
  ns(side, *cmd)           runs a command on a side (evidence.py's ss and nstat): its output
  program(side, netperfmeter)  the start of a netperfmeter command line on a side
  describe()               what decides a run's result on it (environment.txt)
  counters()               its counters now (queues, delay lines, both hosts' MIBs): evidence.delta()
                           of two is a run's counters.json
  capture(path, seconds)   a capture of a run's first seconds (evidence.Capture), or None where
                           the bed captures nothing (its checks that need one stay unverified)
  begin(repetition)        before a run's measurement: its own random decisions, this repetition's
  record()                 after it: what its own machinery did in the run (delay_lines.json), or None
"""

from typing import Protocol

# the modules whose classes register the shipped topologies (imported on the first look-up)
BUILT_IN = ("topology", "hosts")

_REGISTRY = {}


class Testbed(Protocol):
    remote: bool
    paths: list

    def up(self): ...

    def down(self): ...

    def address(self, side, path): ...

    def active_addresses(self): ...

    def ns(self, side, *cmd, check=True, timeout=30): ...

    def program(self, side, netperfmeter): ...

    def describe(self): ...

    def counters(self): ...

    def capture(self, path, seconds): ...

    def begin(self, repetition): ...

    def record(self): ...


def register(kind):
    """Class decorator: the class is the test bed of studies with topology = `kind`."""
    def add(cls):
        if kind in _REGISTRY and _REGISTRY[kind] is not cls:
            raise ValueError(f"topology {kind!r} is registered twice ({_REGISTRY[kind].__name__}, {cls.__name__})")
        cls.kind = kind
        _REGISTRY[kind] = cls
        return cls
    return add


def _load_built_in():
    import importlib
    for module in BUILT_IN:
        importlib.import_module(f"{__package__}.{module}")


def kinds():
    """The registered topologies' names, in the order they registered."""
    _load_built_in()
    return tuple(_REGISTRY)


def get(kind):
    """The test bed class of topology `kind` (KeyError if none is registered)."""
    _load_built_in()
    return _REGISTRY[kind]
