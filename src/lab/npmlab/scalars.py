"""The lab's one reader of scalar files (netperfmeter -scalar=NAME.sca[.bz2|.gz]), for every part
of the lab that reads them: the figures of runs made before the lab asked for the JSON document
(stats.read_scalars), the CPU's idle share (stats.read_cpu_idle), results.sqlite's scalars table
(resultsdb) and which file of a pair is its scalar file (runner, resultsdb). Standard library only.

A line is read by the rules of the C++ reader (src/common/scalar_line.h, scalarLine and
scalarOrigin), which the active (its passive's upload) and the tools share:
  - a scalar line begins, after blanks (spaces or TABs), with the word `scalar` and a blank;
  - then the object and the statistic's name, each a word "quoted" (a backslash takes the next
    character as it is: \\" is a quote) or bare (up to the next blank);
  - the rest of the line, without its blanks and a trailing CR, is the value as written;
  - a scalar line without them is an error: "object name expected after \"scalar\"",
    "statistic name expected after the object", "value expected after the statistic name".
Of the other lines, blank ones, # comments and the OMNeT++ keywords createsummary skips (version,
attr, bin, par, param, config, itervar, file, run) are skipped; anything else is "not a scalar line"
(a garbled file: createsummary, which the lab runs on the same files, refuses it too; the lab has no
place for an OMNeT++ statistic's fields). Lines end at LF alone, as in C++ (a CR elsewhere is part
of the line). The value is a decimal number, inf or nan ("numeric value expected, got '12abc'").
Every error names the file and the line: "FILE:LINE: why"; an unreadable, truncated or corrupt file
"FILE: why". All are ValueError.
"""

import bz2
import collections
import gzip
import os
import re
import zlib

# Which file of a pair is its scalar file where there are several: .bz2 (what the lab writes)
# before .gz before plain.
SUFFIXES = (".sca.bz2", ".sca.gz", ".sca")
SIDES = ("active", "passive")
# Lines of an OMNeT++ scalar file that are no scalar and no error (createsummary's list).
SKIPPED_KEYWORDS = ("version", "attr", "bin", "par", "param", "config", "itervar", "file", "run")

_BLANKS = " \t"
_QUOTED = re.compile(r'[ \t]*"((?:[^"\\]|\\.)*)"', re.S)
_BARE = re.compile(r'[ \t]*([^ \t"][^ \t]*)', re.S)
_ESCAPE = re.compile(r"\\(.)", re.S)
_NUMBER = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)", re.I)
_INDEX = re.compile(r"\[([0-9]{1,18})\]")


class ScalarLineError(ValueError):
    """A line beginning with the word `scalar` that lacks its object, name or value; the message
    says which (as the C++ reader's), without file or line."""


ScalarOrigin = collections.namedtuple("ScalarOrigin", "side flow path connection")
ScalarOrigin.__doc__ = """Where a scalar belongs: side "active", "passive" or None; flow ("flow[N]" right after the
side, N 1 to 18 digits) and path ("path[N]" right after the flow) numbers or None; connection:
"connection" right after the flow."""


def starts_with_keyword(line, keyword):
    """True if `line` (blanks before it allowed) begins with the word `keyword` and a blank."""
    line = line.lstrip(_BLANKS)
    return len(line) > len(keyword) and line.startswith(keyword) and line[len(keyword)] in _BLANKS


def _word(line, at):
    """(word, index after it) of the next word of `line` from `at`: quoted or bare; None if there is
    none or its quote is not closed."""
    m = _QUOTED.match(line, at)
    if m is not None:
        return _ESCAPE.sub(r"\1", m.group(1)), m.end()
    m = _BARE.match(line, at)
    return (m.group(1), m.end()) if m is not None else None


def scalar_line(line):
    """(object, name, value as written) of a scalar line (its LF, if any, is not part of it); None
    for any other line. Raises ScalarLineError on a scalar line without its parts."""
    if line.endswith("\n"):
        line = line[:-1]
    if not starts_with_keyword(line, "scalar"):
        return None
    at = len(line) - len(line.lstrip(_BLANKS)) + len("scalar")
    obj = _word(line, at)
    if obj is None:
        raise ScalarLineError('object name expected after "scalar"')
    name = _word(line, obj[1])
    if name is None:
        raise ScalarLineError("statistic name expected after the object")
    value = line[name[1]:].lstrip(_BLANKS).rstrip(_BLANKS + "\r")
    if not value:
        raise ScalarLineError("value expected after the statistic name")
    return obj[0], name[0], value


def _skipped(line):
    """True for a line that is no scalar and no error: blank, a # comment, a keyword createsummary
    skips (alone or followed by a blank)."""
    text = line.rstrip("\n").strip(_BLANKS + "\r")
    return (not text or text.startswith("#") or text in SKIPPED_KEYWORDS or
            any(starts_with_keyword(text, k) for k in SKIPPED_KEYWORDS))


def open_scalar_file(path):
    """A scalar file as text, its compression told by its content (as createsummary does), whatever
    its name: bzip2, gzip or plain. Lines end at LF alone; undecodable bytes are replaced."""
    with open(path, "rb") as f:
        magic = f.read(3)
    if magic == b"BZh":
        return bz2.open(path, "rt", errors="replace", newline="\n")
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rt", errors="replace", newline="\n")
    return open(path, errors="replace", newline="\n")


def scalar_lines(path):
    """Yields (line number, object, name, value as written) of every scalar line of a scalar file;
    raises ValueError "FILE:LINE: why" on a broken line, "FILE: why" on an unreadable, truncated or
    corrupt file."""
    try:
        with open_scalar_file(path) as f:
            for number, line in enumerate(f, 1):
                try:
                    fields = scalar_line(line)
                except ScalarLineError as e:
                    raise ValueError(f"{path}:{number}: {e}") from None
                if fields is not None:
                    yield (number, *fields)
                elif not _skipped(line):
                    raise ValueError(f"{path}:{number}: not a scalar line: {line.strip()[:80]!r}")
    except (OSError, EOFError, zlib.error) as e:
        raise ValueError(f"{path}: {e}") from None


def scalar_value(text):
    """The number a scalar's value text says (a decimal number, inf or nan, case ignored); raises
    ValueError "numeric value expected, got '...'"."""
    if not _NUMBER.fullmatch(text):
        raise ValueError(f"numeric value expected, got {text!r}")
    return float(text)


def scalar_rows(path):
    """[(object, name, value)] of every scalar line of a scalar file, in the file's order (a
    repeated object and name as often as it is written; nan stays nan); raises ValueError naming the
    file and line."""
    rows = []
    for number, obj, name, text in scalar_lines(path):
        try:
            rows.append((obj, name, scalar_value(text)))
        except ValueError as e:
            raise ValueError(f"{path}:{number}: {e}") from None
    return rows


def scalar_origin(obj):
    """ScalarOrigin(side, flow, path, connection) of a scalar's object, by its parts between dots:
    "netPerfMeter.active.flow[3].path[1]" gives ("active", 3, 1, False),
    "netPerfMeter.passive.flow[3].connection" ("passive", 3, None, True),
    "netPerfMeter.passive.total" ("passive", None, None, False); an object whose second part is
    neither side has none of them (OMNeT++). The C++ rule (scalarOrigin), which createsummary
    --long applies."""
    parts = obj.split(".")
    if len(parts) < 2 or parts[1] not in SIDES:
        return ScalarOrigin(None, None, None, False)
    flow = _index(parts[2], "flow") if len(parts) > 2 else None
    path = _index(parts[3], "path") if flow is not None and len(parts) > 3 else None
    connection = flow is not None and len(parts) > 3 and parts[3] == "connection"
    return ScalarOrigin(parts[1], flow, path, connection)


def _index(part, kind):
    """N of "KIND[N]" (N: 1 to 18 digits); None for any other part."""
    m = _INDEX.fullmatch(part, len(kind)) if part.startswith(kind) else None
    return int(m.group(1)) if m else None


def scalar_file(pair_dir, side, stem="run"):
    """The scalar file of one side of a pair's directory (STEM-SIDE.sca.bz2, .sca.gz or .sca, the
    first of SUFFIXES there is); None if it has none."""
    for suffix in SUFFIXES:
        path = os.path.join(pair_dir, f"{stem}-{side}{suffix}")
        if os.path.exists(path):
            return path
    return None


def scalar_files(pair_dir, stem="run"):
    """{side: path} of a pair's scalar files (scalar_file()), the sides that have one."""
    found = {side: scalar_file(pair_dir, side, stem) for side in SIDES}
    return {side: path for side, path in found.items() if path is not None}
