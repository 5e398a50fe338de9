"""The lab's one reader of scalar files (npmlab/scalars.py) by the rules of the C++ reader
(src/common/scalar_line.h, tests/unit/test_scalar_line.cc): what a scalar line is, its words and
value, its errors with the file and line, the compressions, where an object belongs; and the lab's
readers built on it (stats.read_scalars, stats.read_cpu_idle, resultsdb.read_scalars,
runner.pair_scalar_file). No root, no network.

usage: test_scalars.py LAB_SOURCE_DIR
"""

import bz2
import gzip
import math
import os
import re
import shutil
import sys
import tempfile
import unittest

LAB_SRC = sys.argv.pop(1)
sys.path.insert(0, LAB_SRC)
from npmlab import resultsdb, runner, scalars, stats  # noqa: E402
from npmlab.errors import LabError  # noqa: E402

line = scalars.scalar_line
origin = scalars.scalar_origin


class Lines(unittest.TestCase):
    """One line: the cases of tests/unit/test_scalar_line.cc and more."""

    def test_quoted_and_bare_words_and_the_value_as_written(self):
        self.assertEqual(line('scalar "netPerfMeter.active.flow[3]" "Transmitted Bytes"      1000000\r\n'),
                         ("netPerfMeter.active.flow[3]", "Transmitted Bytes", "1000000"))
        # bare words and blanks before the keyword (the reference's older files, OMNeT++)
        self.assertEqual(line("\t scalar net.host rtt  0.5e-3 "), ("net.host", "rtt", "0.5e-3"))
        self.assertEqual(line('scalar\tnet.host "round trip"\t1'), ("net.host", "round trip", "1"))
        # a bare word runs to the next blank, quotes and all
        self.assertEqual(line('scalar a"b c 1'), ('a"b', "c", "1"))
        # a quoted word needs no blank after it
        self.assertEqual(line('scalar "a""b"1'), ("a", "b", "1"))
        # the value is the rest of the line: what it says is the numbers' business
        self.assertEqual(line("scalar a b 1 2 "), ("a", "b", "1 2"))

    def test_a_backslash_takes_the_next_character(self):
        self.assertEqual(line(r'scalar "a \"b\"" "c d" nan'), ('a "b"', "c d", "nan"))
        self.assertEqual(line(r'scalar "back\\slash" "x\y" 1'), ("back\\slash", "xy", "1"))
        # outside quotes a backslash is a character like another
        self.assertEqual(line(r"scalar a\b c 1"), ("a\\b", "c", "1"))

    def test_cr_and_blanks_around_the_value(self):
        for text in ("scalar a b 7\r", "scalar a b 7 \r", "scalar a b\t7\t\r\r", "scalar a b 7\r\n"):
            self.assertEqual(line(text), ("a", "b", "7"), repr(text))
        # a CR inside a quoted word is part of it
        self.assertEqual(line('scalar a "b\rc" 7'), ("a", "b\rc", "7"))

    def test_other_lines_are_no_scalar_lines(self):
        for text in ("", "\n", "   ", '# scalar "a" "b" 1', '  # scalar "a" "b" 1', "run 1", "version 2",
                     "statistic a b", "scalars a b 1", "scalar", "scalar\r", "scalar\n", "attr scalar x",
                     "xscalar a b 1"):
            self.assertIsNone(line(text), repr(text))

    def test_a_scalar_line_without_its_parts_says_which(self):
        cases = {"scalar ": 'object name expected after "scalar"',
                 "scalar \t ": 'object name expected after "scalar"',
                 'scalar "unterminated': 'object name expected after "scalar"',
                 'scalar "a\\"': 'object name expected after "scalar"',
                 "scalar a": "statistic name expected after the object",
                 'scalar "a" "b': "statistic name expected after the object",
                 'scalar "a" "b"   \r': "value expected after the statistic name",
                 "scalar a b": "value expected after the statistic name",
                 "scalar a b\r": "value expected after the statistic name"}
        for text, message in cases.items():
            with self.assertRaises(scalars.ScalarLineError, msg=repr(text)) as e:
                line(text)
            self.assertEqual(str(e.exception), message, repr(text))
            self.assertIsInstance(e.exception, ValueError)

    def test_keywords(self):
        self.assertTrue(scalars.starts_with_keyword("  run 4", "run"))
        self.assertTrue(scalars.starts_with_keyword("\trun\t4", "run"))
        self.assertFalse(scalars.starts_with_keyword("runs 4", "run"))
        self.assertFalse(scalars.starts_with_keyword("run", "run"))

    def test_values(self):
        value = scalars.scalar_value
        self.assertEqual(value("1000000"), 1e6)
        self.assertEqual(value("-1.5e3"), -1500.0)
        self.assertEqual(value("+.5"), 0.5)
        self.assertEqual(value("7."), 7.0)
        self.assertEqual(value("inf"), math.inf)
        self.assertEqual(value("-Infinity"), -math.inf)
        self.assertTrue(math.isnan(value("nan")))
        self.assertTrue(math.isnan(value("NaN")))
        for text in ("12abc", "1 2", "0x10", "1_000", "", ".", "e5", "nan(1)", "--1"):
            with self.assertRaises(ValueError, msg=repr(text)) as e:
                value(text)
            self.assertEqual(str(e.exception), f"numeric value expected, got {text!r}")


class Origins(unittest.TestCase):
    """Where an object belongs: the cases of tests/unit/test_scalar_line.cc and more."""

    def test_side_flow_path_and_connection(self):
        self.assertEqual(origin("netPerfMeter.active.flow[3].path[1]"), ("active", 3, 1, False))
        self.assertEqual(origin("netPerfMeter.passive.flow[12].connection"), ("passive", 12, None, True))
        self.assertEqual(origin("netPerfMeter.active.flow[0]"), ("active", 0, None, False))
        self.assertEqual(origin("netPerfMeter.passive.total"), ("passive", None, None, False))
        self.assertEqual(origin("netPerfMeter.active.totalCPU"), ("active", None, None, False))
        self.assertEqual(origin("netPerfMeter.active"), ("active", None, None, False))
        o = origin("netPerfMeter.active.flow[3].path[1]")
        self.assertEqual((o.side, o.flow, o.path, o.connection), ("active", 3, 1, False))

    def test_no_side_is_nothing(self):
        for obj in ("scenario.host.flow[1]", "netPerfMeter", "", "netPerfMeter.Active.flow[1]",
                    "netPerfMeter.activex.flow[1]"):
            self.assertEqual(origin(obj), (None, None, None, False), obj)
        # the first part is anything
        self.assertEqual(origin("scenario.active.flow[1]"), ("active", 1, None, False))

    def test_an_index_is_1_to_18_digits(self):
        self.assertEqual(origin("netPerfMeter.active.flow[123456789012345678]").flow, 123456789012345678)
        self.assertEqual(origin("netPerfMeter.active.flow[007]").flow, 7)
        for part in ("flow[]", "flow[1x]", "flow[-1]", "flow[ 1]", "flow[1234567890123456789]", "flow[\u0661]",
                     "flow1", "flow[1", "flows[1]", "Flow[1]", "flow[1]x"):
            self.assertEqual(origin(f"netPerfMeter.active.{part}"), ("active", None, None, False), part)
            # without the flow there is no path or connection below it
            self.assertEqual(origin(f"netPerfMeter.active.{part}.path[1]"), ("active", None, None, False), part)
            self.assertEqual(origin(f"netPerfMeter.active.{part}.connection"), ("active", None, None, False), part)
        self.assertIsNone(origin("netPerfMeter.active.flow[1].path[-1]").path)
        self.assertIsNone(origin("netPerfMeter.active.flow[1].path[1234567890123456789]").path)
        self.assertIsNone(origin("netPerfMeter.active.path[1]").path)

    def test_a_path_or_the_connection_is_the_part_after_the_flow(self):
        self.assertEqual(origin("netPerfMeter.active.flow[1].path[2].more"), ("active", 1, 2, False))
        self.assertEqual(origin("netPerfMeter.active.flow[1].connection.more"), ("active", 1, None, True))
        self.assertEqual(origin("netPerfMeter.active.flow[1].connections"), ("active", 1, None, False))
        self.assertEqual(origin("netPerfMeter.active.flow[1].x.path[2]"), ("active", 1, None, False))


class Files(unittest.TestCase):
    """Whole files: the lines the reader skips, those it refuses, the compressions."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="npmlab-scalars-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        return path

    TEXT = ("# a comment\n"
            "version 2\n"
            "run r1\n"
            "attr configname General\n"
            "\n"
            '  scalar "netPerfMeter.active.flow[0]" "Transmitted Bytes"   1000\r\n'
            "\t\r\n"
            "par x 1\n"
            'scalar netPerfMeter.active.flow[0] "Lost Bytes" nan\n'
            'scalar "netPerfMeter.active.flow[0].path[1]" "Mean RTT" 12.5  \n'
            "run\n"
            'scalar "netPerfMeter.active.flow[0]" "Transmitted Bytes" 2000')
    ROWS = [(6, "netPerfMeter.active.flow[0]", "Transmitted Bytes", "1000"),
            (9, "netPerfMeter.active.flow[0]", "Lost Bytes", "nan"),
            (10, "netPerfMeter.active.flow[0].path[1]", "Mean RTT", "12.5"),
            (12, "netPerfMeter.active.flow[0]", "Transmitted Bytes", "2000")]

    def rows(self, path):
        return [(o, n, "nan" if math.isnan(v) else v) for o, n, v in scalars.scalar_rows(path)]

    def test_scalar_lines_with_their_numbers_the_rest_skipped(self):
        path = self.write("run-active.sca", self.TEXT)
        self.assertEqual(list(scalars.scalar_lines(path)), self.ROWS)
        # every row as often as it is written, in the file's order
        self.assertEqual(self.rows(path), [(o, n, "nan" if t == "nan" else float(t)) for _, o, n, t in self.ROWS])

    def test_three_compressions_told_by_content(self):
        data = self.TEXT.encode()
        for name, content in {"a.sca.bz2": bz2.compress(data), "a.sca.gz": gzip.compress(data),
                              "a.sca": data, "gz-named.sca.bz2": gzip.compress(data),
                              "bz2-named.sca": bz2.compress(data)}.items():
            self.assertEqual(list(scalars.scalar_lines(self.write(name, content))), self.ROWS, name)

    def test_a_line_ends_at_lf_alone(self):
        path = self.write("cr.sca", 'scalar a "b\rc" 1\rscalar d e 2\n')
        self.assertEqual(list(scalars.scalar_lines(path)), [(1, "a", "b\rc", "1\rscalar d e 2")])
        with self.assertRaisesRegex(ValueError, r"cr\.sca:1: numeric value expected, got '1\\rscalar d e 2'"):
            scalars.scalar_rows(path)

    def test_each_error_names_the_file_and_the_line(self):
        cases = {'scalar "a" "b" 1\nscalar \n': 'object name expected after "scalar"',
                 'scalar "a" "b" 1\nscalar "a\n': 'object name expected after "scalar"',
                 'scalar "a" "b" 1\nscalar "a" "b\n': "statistic name expected after the object",
                 'scalar "a" "b" 1\nscalar "a" "b"  \r\n': "value expected after the statistic name",
                 'scalar "a" "b" 1\nscalar "a" "b" 12abc\n': "numeric value expected, got '12abc'",
                 'scalar "a" "b" 1\nscalar "a" "b" 1 2\n': "numeric value expected, got '1 2'",
                 'scalar "a" "b" 1\ngarbage\n': "not a scalar line: 'garbage'",
                 'scalar "a" "b" 1\nscalar\n': "not a scalar line: 'scalar'",
                 'scalar "a" "b" 1\nscalars a b 1\n': "not a scalar line: 'scalars a b 1'",
                 # the lab has no place for an OMNeT++ statistic's fields
                 'scalar "a" "b" 1\nstatistic a b\n': "not a scalar line: 'statistic a b'"}
        for i, (text, message) in enumerate(cases.items()):
            for name, data in ((f"e{i}.sca", text.encode()), (f"e{i}.sca.gz", gzip.compress(text.encode()))):
                path = self.write(name, data)
                with self.assertRaises(ValueError, msg=text) as e:
                    scalars.scalar_rows(path)
                self.assertEqual(str(e.exception), f"{path}:2: {message}", text)
                with self.assertRaises(LabError, msg=text) as e:
                    resultsdb.read_scalars(path)
                self.assertEqual(str(e.exception), f"{path}:2: {message}", text)
        # a line's problem is said before its value is read
        path = self.write("early.sca", "scalar a b 1\nscalar \n")
        lines = scalars.scalar_lines(path)
        self.assertEqual(next(lines), (1, "a", "b", "1"))
        with self.assertRaisesRegex(ValueError, r"early\.sca:2: object name expected"):
            next(lines)

    def test_unreadable_truncated_and_corrupt_files_name_the_file(self):
        text = ((self.TEXT + "\n") * 200).encode()
        for name, content in {"cut.sca.bz2": bz2.compress(text)[:len(bz2.compress(text)) // 2],
                              "cut.sca.gz": gzip.compress(text)[:300],
                              "corrupt.sca.bz2": b"BZh9" + b"\x00" * 100}.items():
            path = self.write(name, content)
            with self.assertRaisesRegex(ValueError, "^" + re.escape(path) + ": "):
                scalars.scalar_rows(path)
        missing = os.path.join(self.dir, "missing.sca")
        with self.assertRaisesRegex(ValueError, "^" + re.escape(missing) + ": .*No such file"):
            scalars.scalar_rows(missing)

    def test_which_file_of_a_pair(self):
        d = self.dir
        self.assertEqual(scalars.scalar_files(d), {})
        self.assertIsNone(scalars.scalar_file(d, "active"))
        self.assertEqual(runner.pair_scalar_file(d, "active"), os.path.join(d, "run-active.sca.bz2"))
        for suffix in (".sca", ".sca.gz", ".sca.bz2"):
            self.write("run-active" + suffix, "")
            self.assertEqual(scalars.scalar_files(d), {"active": os.path.join(d, "run-active" + suffix)})
            self.assertEqual(runner.pair_scalar_file(d, "active"), os.path.join(d, "run-active" + suffix))
        self.write("cross-passive.sca.gz", "")
        self.assertEqual(scalars.scalar_files(d, "cross"), {"passive": os.path.join(d, "cross-passive.sca.gz")})


class Readers(unittest.TestCase):
    """The lab's readers on scalars.py: the figures of a side, the CPU's idle share, results.sqlite's rows."""

    def setUp(self):
        fd, self.path = tempfile.mkstemp(suffix=".sca")
        with os.fdopen(fd, "w") as f:
            f.write('scalar "netPerfMeter.active.flow[0]" "Transmitted Bit Rate" 1000.0\n'
                    'scalar "netPerfMeter.active.flow[0]" "Transmitted Bit Rate" 1500.0\n'  # the last counts
                    'scalar "netPerfMeter.active.flow[0].path[02]" "Bytes Sent" 12345\n'
                    'scalar "netPerfMeter.active.flow[0].connection" "Mean Rwnd" 65536\n'
                    'scalar "netPerfMeter.active.flow[0]" "Jitter" nan\n'
                    'scalar "netPerfMeter.active.flow[0].other" "Samples" 1\n'  # neither path nor connection
                    'scalar "netPerfMeter.active.flow[0].path[1].x" "Samples" 2\n'
                    'scalar "netPerfMeter.active.flow[1234567890123456789]" "Jitter" 3\n'  # no flow
                    'scalar "netPerfMeter.passive.flow[0]" "Received Bit Rate" 900.0\n'
                    'scalar "netPerfMeter.active.totalCPU" "Idle" 80\n'
                    'scalar "netPerfMeter.active.totalCPU" "Idle" 75\n'
                    'scalar "netPerfMeter.passive.totalCPU" "Idle" nan\n')

    def tearDown(self):
        os.unlink(self.path)

    def test_a_sides_figures(self):
        figures = stats.read_scalars(self.path, "active")
        self.assertTrue(math.isnan(figures.pop(("active", 0, "Jitter"))))
        self.assertEqual(figures, {("active", 0, "Transmitted Bit Rate"): 1500.0,
                                   ("active", 0, "path[2] Bytes Sent"): 12345.0,
                                   ("active", 0, "connection Mean Rwnd"): 65536.0})
        self.assertEqual(stats.read_scalars(self.path, "passive"), {("passive", 0, "Received Bit Rate"): 900.0})

    def test_a_file_without_flow_scalars(self):
        fd, path = tempfile.mkstemp(suffix=".sca")
        with os.fdopen(fd, "w") as f:
            f.write('scalar "netPerfMeter.active.totalCPU" "Idle" 80\n')
        try:
            with self.assertRaisesRegex(ValueError, re.escape(path) + ": no flow scalars"):
                stats.read_scalars(path, "active")
        finally:
            os.unlink(path)

    def test_the_cpus_idle_share(self):
        self.assertEqual(stats.read_cpu_idle(self.path, "active"), 75.0)
        self.assertIsNone(stats.read_cpu_idle(self.path, "passive"))  # nan
        self.assertIsNone(stats.read_cpu_idle(self.path + ".missing", "active"))

    def test_results_sqlite_rows(self):
        rows = resultsdb.read_scalars(self.path)
        self.assertEqual(len(rows), 12)
        self.assertEqual(rows[4], ("netPerfMeter.active.flow[0]", "Jitter", None))
        self.assertEqual(rows[1], ("netPerfMeter.active.flow[0]", "Transmitted Bit Rate", 1500.0))


if __name__ == "__main__":
    unittest.main(verbosity=2)
