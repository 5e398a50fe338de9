#!/usr/bin/env bash
# ShellCheck on the tree's shell scripts, with the tree's .shellcheckrc: every tracked *.sh and
# every tracked file with an sh or bash shebang, without the Jinja templates (*.j2) and
# packaging/debian/rules (a Makefile); the files as lib.sh's tree_files lists them. Runs
# `shellcheck -x -S warning` from the tree's root, so that the sourced test libraries are found.
#   check-shell.sh SOURCE_DIR
# Prints the findings, one per line (FILE:LINE:COLUMN: SEVERITY: message [SCnnnn]); exits 1 when
# there is any, 77 (skipped) when shellcheck is not installed, 0 otherwise.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

style_start check-shell.sh shellcheck shellcheck "$@"
style_files "shell scripts" '*.sh' '^#![[:space:]]*(/usr)?/bin/(env[[:space:]]+)?(ba)?sh([[:space:]]|$)' \
  '*.j2' packaging/debian/rules
cd "$src"
shellcheck -x -S warning -f gcc -- "${files[@]}"
