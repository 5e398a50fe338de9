#!/usr/bin/env python3
"""The include graph of src/ runs one way: each folder includes only the folders below it.

    check_layers.py SRC_DIR

Fails, naming the file and the include, when a folder reaches one it may not (a cycle such as
transport <-> sctp starts that way)."""

import os
import re
import sys

# What each folder may include besides itself, bottom to top.
ALLOWED = {
    "common": set(),
    "npmp": {"common"},
    "flowspec": {"common", "npmp"},
    "transport": {"common", "npmp"},
    "sctp": {"common", "npmp", "flowspec", "transport"},
    "quic": {"common", "npmp", "transport"},
    "measure": {"common", "npmp", "flowspec", "transport"},
    "control": {"common", "npmp", "flowspec", "transport", "sctp", "quic", "measure"},
    "app": {"common", "npmp", "flowspec", "transport", "sctp", "quic", "measure", "control"},
    "tools": {"common"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def main():
    src = sys.argv[1]
    wrong = []
    for folder, allowed in ALLOWED.items():
        for directory, _, files in os.walk(os.path.join(src, folder)):
            for name in files:
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as f:
                    for target in INCLUDE.findall(f.read()):
                        if target != folder and target not in allowed:
                            wrong.append(f"{os.path.relpath(path, src)} includes {target}/ "
                                         f"({folder}/ may include: {', '.join(sorted(allowed)) or 'nothing'})")
    folders = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
    for d in sorted(folders - set(ALLOWED) - {"cc", "lab"}):
        wrong.append(f"{d}/ has no place in the layer table of {sys.argv[0]}")
    for line in wrong:
        print(line)
    print(f"{len(wrong)} include(s) against the layers" if wrong else "the include graph runs one way")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
