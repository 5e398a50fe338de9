#!/usr/bin/env bash
# The plot programs read options as netperfmeter does (getopt_long_only): every option their
# --help documents is accepted with two dashes and with one, its value after "=" or as the next
# word; -version, --version and -v print the line netperfmeter --version begins with.
# Usage: e2e-options.sh BUILD_RPLOT_DIR TESTS_DIR VERSION [NETPERFMETER]
set -euo pipefail
rplot=$1 tests=$2 version=$3 npm=${4:-}
. "$tests/lib.sh"
need Rscript r-base-core
need_npmplot

expected="NetPerfMeter $version"
if [[ -n $npm ]]; then
  line=$("$npm" --version | head -1)
  [[ $line == "$expected" ]] || fail "netperfmeter --version begins with \"$line\", expected \"$expected\""
fi
for prog in plot-netperfmeter-results plot-netperfmeter-summary; do
  for v in --version -version -v; do
    out=$("$rplot/$prog" "$v" 2>&1) || fail "$prog $v failed: $out"
    [[ $out == "$expected" ]] || fail "$prog $v printed \"$out\", expected \"$expected\""
  done
  help=$("$rplot/$prog" --help) || fail "$prog --help failed"
  # The documented long options: --NAME=VALUE takes a value, --NAME alone is a flag.
  mapfile -t documented < <(grep -o -- '--[a-z][a-z0-9-]*\(=[A-Z]\)\?' <<<"$help" | sort -u)
  ((${#documented[@]} >= 15)) || fail "$prog --help documents only ${#documented[@]} long options"
  # One dash with the values after "=", two dashes with the values as the next words; -help
  # last is honoured only after every word was parsed: an option misread is an error.
  for dashes in - --; do
    args=()
    for d in "${documented[@]}"; do
      name=${d#--}
      if [[ $name != *=* ]]; then args+=("$dashes$name")
      elif [[ $dashes == - ]]; then args+=("-${name%=*}=1")
      else args+=("--${name%=*}" 1)
      fi
    done
    out=$("$rplot/$prog" "${args[@]}" "${dashes}help" 2>&1) ||
      fail "$prog rejects its documented options written with '$dashes': $out"
    grep -q "^Usage: $prog " <<<"$out" || fail "$prog with its documented options ('$dashes'): $out"
  done
  echo "ok: $prog accepts its ${#documented[@]} documented long options with one dash and with two"
done
echo "PASS"
