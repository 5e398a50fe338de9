#!/usr/bin/env python3
"""Size figures of the C++ sources, for comparing two states of the tree (not a test):

    python3 tests/bench/code_metrics.py [REV ...]      default: HEAD

For each git revision: the source lines of src/ and dissectors/, the longest files, the files
of src/control/ above 400 lines, and the longest functions (a brace-matching reading of C++
that skips comments, strings and character literals; lambdas count with the function that
holds them). Repeated code is what the `duplicates` command lists; run it with `--repo` on a
checkout of each revision.
"""

import re
import subprocess
import sys

TOP = 12
HEADER_END = re.compile(r"\)\s*(const|override|final|noexcept|mutable|volatile|&|&&|->\s*[\w:<>,\s*&]+|\s)*$")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|return|try)\b")
TYPE = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def files_at(rev):
    out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "src", "dissectors"], capture_output=True,
                         text=True, check=True).stdout.split()
    return [f for f in out if f.endswith((".cc", ".h", ".c"))]


def text_at(rev, path):
    return subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, errors="replace",
                          check=True).stdout


def strip(source):
    """The source with comments, strings and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * source.count("\n", i, j))
            i = j
        elif source.startswith('R"', i) and (m := re.match(r'R"([^(\s]*)\(', source[i:])):
            end = source.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * source.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(source):
    """(name, first line, line count) of each function body in a C++ source."""
    code = strip(source)
    found, stack, statement, line = [], [], [], 1
    for c in code:
        if c == "\n":
            line += 1
        if c == "{":
            head = "".join(statement).strip()
            if TYPE.search(head) and "(" not in head:
                kind = "scope"
            elif not any(k == "function" for k, _, _ in stack) and "(" in head and HEADER_END.search(
                    head.split("{")[-1]) and not CONTROL.match(head) and not head.rstrip().endswith("="):
                kind = "function"
            else:
                kind = "block"
            name = ""
            if kind == "function":
                m = re.search(r"([~\w:]+(?:<[^()]*>)?|operator\S+)\s*\(", head)
                name = m.group(1) if m else head[:40]
            stack.append((kind, line, name))
            statement = []
        elif c == "}":
            if stack:
                kind, first, name = stack.pop()
                if kind == "function":
                    found.append((name, first, line - first + 1))
            statement = []
        elif c == ";":
            statement = []
        else:
            statement.append(c)
    return found


def report(rev):
    sizes, funcs = [], []
    for path in files_at(rev):
        source = text_at(rev, path)
        sizes.append((source.count("\n"), path))
        funcs += [(length, f"{path}:{first} {name}") for name, first, length in functions(source)]
    sizes.sort(reverse=True)
    funcs.sort(reverse=True)
    print(f"== {rev} "
          f"({subprocess.run(['git', 'rev-parse', '--short', rev], capture_output=True, text=True).stdout.strip()})")
    print(f"{sum(s for s, _ in sizes)} lines in {len(sizes)} C/C++ files; {len(funcs)} functions, "
          f"{sum(1 for f in funcs if f[0] > 60)} over 60 lines, {sum(1 for f in funcs if f[0] > 100)} over 100")
    print("longest files:")
    for size, path in sizes[:TOP]:
        print(f"  {size:6d}  {path}")
    control = [(s, p) for s, p in sizes if p.startswith("src/control/") and s > 400]
    print(f"src/control/ files above 400 lines: {', '.join(f'{p} ({s})' for s, p in control) or 'none'}")
    print("longest functions:")
    for length, where in funcs[:TOP]:
        print(f"  {length:6d}  {where}")
    print()


if __name__ == "__main__":
    for rev in sys.argv[1:] or ["HEAD"]:
        report(rev)
