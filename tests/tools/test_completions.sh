#!/usr/bin/env bash
# Bash completions: load with stubbed bash-completion helpers, complete a few words, and check
# that every long option of --help is offered.
source "$(dirname "$0")/lib.sh"
BIN=$1
DIR=$2
_init_completion() {
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  words=("${COMP_WORDS[@]}")
  cword=$COMP_CWORD
  split=false
}
_filedir() { COMPREPLY+=("<files>"); }
complete() { :; }
compopt() { :; }
complete_words() { # complete_words <function> <words...>: completes the last word
  local fn=$1
  shift
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  "$fn"
  echo "${COMPREPLY[*]}"
}
for tool in createsummary combinesummaries extractvectors runtimeestimator; do
  bash -n "$DIR/$tool" || { fail "$tool completion has a syntax error"; continue; }
  source "$DIR/$tool"
done
[ "$(complete_words _createsummary createsummary --comp)" == "--compress --compression" ] &&
  pass "createsummary --comp -> --compress --compression" || fail "createsummary --comp"
[ "$(complete_words _createsummary createsummary --compression g)" == "gzip" ] &&
  pass "--compression g -> gzip" || fail "createsummary --compression g"
[ "$(complete_words _createsummary createsummary --compression '')" == "bzip2 gzip none" ] &&
  pass "--compression kinds" || fail "createsummary --compression kinds"
[ "$(complete_words _createsummary createsummary -c 1)" == "1" ] && pass "-c levels" ||
  fail "createsummary -c 1"
[ "$(complete_words _combinesummaries combinesummaries out)" == "<files>" ] &&
  pass "combinesummaries completes files" || fail "combinesummaries files"
[ "$(complete_words _runtimeestimator runtimeestimator st)" == "<files>" ] &&
  pass "runtimeestimator completes the start file" || fail "runtimeestimator"
for tool in createsummary combinesummaries extractvectors; do
  offered=$(complete_words "_$tool" "$tool" -)
  for option in $("$BIN/$tool" --help | sed -n '/^Options:/,/^$/p' | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
    grep -qw -- "$option" <<<"$offered" || fail "$tool completion does not offer $option"
  done
  pass "$tool completion offers all options"
done

# The other programs' completions (packaging/completions, getabstime's here).
PACKAGING=$(cd "$(dirname "$0")/../../packaging/completions" && pwd)
for file in "$DIR/getabstime" "$PACKAGING"/*; do
  bash -n "$file" || { fail "$(basename "$file") completion has a syntax error"; continue; }
  source "$file"
done
# offers_help_options <function> <program> <its path>: every long option of its --help is
# offered when completing "-"
offers_help_options() {
  local fn=$1 program=$2 path=$3 offered option missing=""
  offered=$(complete_words "$fn" "$program" -)
  for option in $("$path" --help 2>&1 | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
    grep -qE -- "(^| )$option(=| |$)" <<<"$offered" || missing+=" $option"
  done
  [ -z "$missing" ] && pass "$program completion offers all options" ||
    fail "$program completion does not offer:$missing"
}
[ "$(complete_words _getabstime getabstime --v)" == "--version" ] && pass "getabstime --v -> --version" ||
  fail "getabstime --v"
# netperfmeter: every option but the reference's QUIC ones, which this build refuses or ignores
offered=$(complete_words _netperfmeter netperfmeter -)
missing=""
for option in $("$BIN/../app/netperfmeter" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
  case $option in --quic|--tls-*) continue ;; esac
  grep -qE -- "(^| )$option(=| |$)" <<<"$offered" || missing+=" $option"
done
[ -z "$missing" ] && pass "netperfmeter completion offers all options" ||
  fail "netperfmeter completion does not offer:$missing"

LAB="$BIN/../lab/netperfmeter-lab"
[ "$(complete_words _netperfmeter_lab "$LAB" r)" == "run" ] && pass "netperfmeter-lab r -> run" ||
  fail "netperfmeter-lab r: $(complete_words _netperfmeter_lab "$LAB" r)"
offered=$(complete_words _netperfmeter_lab "$LAB" run --dry-run buffer)
grep -qw buffer-splitting <<<"$offered" && grep -qF "<files>" <<<"$offered" &&
  pass "netperfmeter-lab run completes the shipped studies and study files" ||
  fail "netperfmeter-lab run buffer: $offered"
offered=$(complete_words _netperfmeter_lab "$LAB" run -)
missing=""
for option in $("$LAB" run --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
  grep -qw -- "$option" <<<"$offered" || missing+=" $option"
done
[ -z "$missing" ] && pass "netperfmeter-lab run completion offers all options" ||
  fail "netperfmeter-lab run completion does not offer:$missing"
[ "$(complete_words _netperfmeter_lab "$LAB" plot res)" == "<files>" ] &&
  pass "netperfmeter-lab plot completes directories" || fail "netperfmeter-lab plot"

[ "$(complete_words _netperfmeter_cc_loader netperfmeter-cc-loader st)" == "start stop status" ] &&
  pass "netperfmeter-cc-loader st -> start stop status" || fail "netperfmeter-cc-loader st"
grep -qw lo <<<"$(complete_words _netperfmeter_delayline netperfmeter-delayline -l 0.01 l)" &&
  pass "netperfmeter-delayline completes interfaces" ||
  fail "netperfmeter-delayline: $(complete_words _netperfmeter_delayline netperfmeter-delayline -l 0.01 l)"

# (the build tree's plotters, which load the R package npmplot built into the build tree)
if command -v Rscript >/dev/null && [ -d "$BIN/../../rplot/library/npmplot" ]; then
  RPLOT=$(cd "$BIN/../../rplot" && pwd)
  offers_help_options _plot_netperfmeter_results plot-netperfmeter-results "$RPLOT/plot-netperfmeter-results"
  offers_help_options _plot_netperfmeter_summary plot-netperfmeter-summary "$RPLOT/plot-netperfmeter-summary"
  table=$(mktemp --suffix=.data)
  printf 'Gamma rhoDFN active.flow value\ncmt 1 0 2.5\n' > "$table"
  [ "$(complete_words _plot_netperfmeter_summary plot-netperfmeter-summary "$table" -x rh)" == "rhoDFN" ] &&
    pass "plot-netperfmeter-summary -x completes the table's columns" ||
    fail "plot-netperfmeter-summary -x rh: $(complete_words _plot_netperfmeter_summary plot-netperfmeter-summary "$table" -x rh)"
  bzip2 -k "$table"
  [ "$(complete_words _plot_netperfmeter_summary plot-netperfmeter-summary "$table.bz2" -c G)" == "Gamma" ] &&
    pass "... also of a .bz2 table" || fail "plot-netperfmeter-summary -c G (bz2)"
  rm -f "$table" "$table.bz2"
else
  echo "NOTE: Rscript or the R package npmplot of the build tree is missing: the plotters' completions are not compared with their --help"
fi
finish
