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
}
_filedir() { COMPREPLY=("<files>"); }
complete() { :; }
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
finish
