#!/usr/bin/env bash
# flake8 on the tree's Python, with the tree's .flake8: every tracked *.py and every tracked file
# with a python3 shebang (src/lab/netperfmeter-lab.in); the files as lib.sh's tree_files lists
# them.
#   check-python.sh SOURCE_DIR
# Prints the findings, one per line (FILE:LINE:COLUMN: CODE message); exits 1 when there is any,
# 77 (skipped) when flake8 is not installed, 0 otherwise.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

style_start check-python.sh flake8 flake8 "$@"
style_files "Python files" '*.py' '^#!.*[/ ]python3?([[:space:]]|$)'
cd "$src"
flake8 --config "$src/.flake8" -- "${files[@]}"
