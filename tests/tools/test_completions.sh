#!/usr/bin/env bash
# The bash completions of every program of the tool-chain, in real bash with the real
# bash-completion (Debian's package): each is loaded by its command's name, as bash-completion
# loads it at the first TAB, and `complete -p` must name its function; the function is then
# called as bash calls it, with COMP_LINE, COMP_POINT and COMP_WORDS split at COMP_WORDBREAKS
# ("-scalar=r" is the three words "-scalar" "=" "r", "localhost:9" the three "localhost" ":" "9").
#
# Checks per program: every long option of its --help is offered (with its "=" where the help
# shows a value), and every option offered but not in its --help is one the program takes
# (PROGRAM OPTION --help or PROGRAM OPTION 1 --help exits 0), so the lists cannot drift apart;
# netperfmeter and the result tools, which take -name for --name, offer -name as well; values and
# file names after "=" and after the option as a word of its own.
#
#   test_completions.sh COMPLETIONS_DIR NAME=PATH...    the programs to check and their binaries
DIR=$1
shift
BASH_COMPLETION=${NPM_BASH_COMPLETION:-/usr/share/bash-completion/bash_completion}
if [ ! -r "$BASH_COMPLETION" ]; then
  echo "SKIP: bash-completion is not installed ($BASH_COMPLETION; apt-get install bash-completion)" >&2
  exit 77
fi
# shellcheck source=/dev/null  # the system's bash-completion, not part of the tree
source "$BASH_COMPLETION"
source "$(dirname "$0")/lib.sh"
set +u  # bash-completion's functions read unset variables
setup_tmp

# The programs, and the completions as installed: the result tools share netperfmeter-tools,
# installed under each one's name (src/tools/CMakeLists.txt).
declare -A PROGRAM=()
mkdir -p "$TMP/user/completions" "$TMP/bin"
for arg in "$@"; do
  name=${arg%%=*}
  PROGRAM[$name]=${arg#*=}
  ln -s "${PROGRAM[$name]}" "$TMP/bin/$name"
  case $name in
    createsummary|combinesummaries|extractvectors|exportvectors|getabstime|runtimeestimator) file=netperfmeter-tools ;;
    *) file=$name ;;
  esac
  ln -s "$(cd "$DIR" && pwd)/$file" "$TMP/user/completions/$name"
done
export PATH="$TMP/bin:$PATH"
export BASH_COMPLETION_USER_DIR="$TMP/user"
# the programs that take a long option with one dash (-runtime=10) as with two
SINGLE_DASH="netperfmeter createsummary combinesummaries extractvectors exportvectors"

for name in "${!PROGRAM[@]}"; do
  if __load_completion "$name" && [[ $(complete -p "$name" 2>/dev/null) == "complete -F _"*" $name" ]]; then
    pass "$name: bash-completion loads its completion by name: $(complete -p "$name")"
  else
    fail "$name: no completion loaded by name from $DIR (complete -p: $(complete -p "$name" 2>&1))"
  fi
done

# split_words LINE: the words bash makes of LINE for COMP_WORDS (blanks separate words; a run
# of the other characters of COMP_WORDBREAKS is a word of its own), into WORDS; the last is the
# word being completed (empty after a blank).
split_words() {
  local line=$1 i c kind previous="" word="" breaks=${COMP_WORDBREAKS//[[:space:]\"\']/}
  WORDS=()
  for ((i = 0; i < ${#line}; i++)); do
    c=${line:i:1}
    if [[ $c == [[:space:]] ]]; then
      [[ -n $word ]] && WORDS+=("$word")
      word="" previous=""
      continue
    fi
    kind=word
    [[ $breaks == *"$c"* ]] && kind="break"
    if [[ -n $word && $kind != "$previous" ]]; then
      WORDS+=("$word")
      word=""
    fi
    word+=$c previous=$kind
  done
  WORDS+=("$word")
}

# complete_line LINE: what the completion of LINE's command offers for LINE's last word, sorted,
# on one line
complete_line() {
  local fn
  split_words "$1"
  fn=$(complete -p "${WORDS[0]}" 2>/dev/null | sed -n 's/^complete -F \([^ ]*\) .*/\1/p')
  [ -n "$fn" ] || return
  COMP_LINE=$1 COMP_POINT=${#1} COMP_CWORD=$((${#WORDS[@]} - 1))
  COMP_WORDS=("${WORDS[@]}")
  COMPREPLY=()
  local previous=""
  ((COMP_CWORD > 0)) && previous=${WORDS[COMP_CWORD - 1]}
  "$fn" "${WORDS[0]}" "${WORDS[COMP_CWORD]}" "$previous" 2>/dev/null
  printf '%s\n' "${COMPREPLY[@]}" | sed '/^$/d' | sort -u | paste -sd' '
}

# expect LINE EXPECTED: completing LINE offers exactly EXPECTED (sorted, space-separated)
expect() {
  local got
  got=$(complete_line "$1")
  [ "$got" == "$2" ] && pass "\"$1\" -> $2" || fail "\"$1\" offers \"$got\", expected \"$2\""
}

# help_options PATH [ARGS...]: the long options of its --help (above a "Commands" section, the
# tools' stdin language): --name, or --name= where the help shows a value after the name
# anywhere (--name=X, --name X, "--name[=X]" gives both)
help_options() {
  "$@" --help 2>&1 | sed '/^Commands/,$d' | grep -oE -- '--[a-z][a-z0-9-]*(\[=|=| [A-Z])?' |
    awk '{ name = $0; sub(/(\[=|=| [A-Z])$/, "", name)
           if ($0 ~ /\[=$/) optional[name] = 1; else if ($0 != name) value[name] = 1; seen[name] = 1 }
         END { for (n in seen) { if (!(n in value) || (n in optional)) print n; if (n in value || n in optional) print n "=" } }' |
    sort -u
}

# accepted PATH [ARGS...] OPTION: the program takes OPTION: a flag, or with a value (--name=)
accepted() {
  local option=${!#} command=("${@:1:$#-1}")
  if [[ $option == *= ]]; then
    "${command[@]}" "${option}1" --help >/dev/null 2>&1
  else
    "${command[@]}" "$option" --help >/dev/null 2>&1 || "${command[@]}" "$option" 1 --help >/dev/null 2>&1
  fi
}

# check_options NAME LINE [ARGS...]: the long options offered for LINE (ending in "--") against
# those of NAME's --help (with ARGS before --help). A name the help shows only in passing
# ("also --color") counts as a flag there; offered with "=" it must take a value.
check_options() {
  local name=$1 line=$2 path=${PROGRAM[$1]} offered help option missing="" stale="" single=""
  shift 2
  offered=$(complete_line "$line" | tr ' ' '\n' | grep -E '^--')
  help=$(help_options "$path" "$@")
  for option in $help; do
    grep -qxF -- "$option" <<<"$offered" && continue
    grep -qxF -- "$option=" <<<"$offered" && accepted "$path" "$@" "$option=" && continue
    missing+=" $option"
  done
  for option in $offered; do
    grep -qxF -- "$option" <<<"$help" && continue
    accepted "$path" "$@" "$option" && continue
    stale+=" $option"
  done
  [ -z "$missing" ] && pass "$name: every long option of its --help is offered" ||
    fail "$name: its completion does not offer:$missing"
  [ -z "$stale" ] && pass "$name: every option offered is one it takes" ||
    fail "$name: its completion offers options it does not take (or takes without a value):$stale"
  [[ " $SINGLE_DASH " == *" $name "* ]] || return 0
  for option in $offered; do  # (completing -name, without its "=")
    grep -qxF -- "${option#-}" <<<"$(complete_line "${line%--}$(sed 's/^-//; s/=$//' <<<"$option")" | tr ' ' '\n')" ||
      single+=" ${option#-}"
  done
  [ -z "$single" ] && pass "$name: every long option is offered with one dash as well (-name)" ||
    fail "$name: not offered with one dash:$single"
}

# the files a completion may offer
mkdir "$TMP/work"
cd "$TMP/work" || exit 1
mkdir results
touch run.config run.sca.bz2 start.file

for name in "${!PROGRAM[@]}"; do
  case $name in
    netperfmeter-lab) check_options "$name" "$name --"
                      check_options "$name" "$name run --" run ;;
    runtimeestimator|getabstime) ;;  # below
    *) check_options "$name" "$name --" ;;
  esac
done

# the result tools
if [ -n "${PROGRAM[createsummary]}" ]; then
  expect "createsummary --comp" "--compress= --compression="
  expect "createsummary -comp" "-compress= -compression="
  expect "createsummary --compression=g" "gzip"
  expect "createsummary -compression=g" "gzip"
  expect "createsummary --compression " "bzip2 gzip none"
  expect "createsummary -c " "0 1 2 3 4 5 6 7 8 9"
  expect "createsummary -compress=" "0 1 2 3 4 5 6 7 8 9"
  expect "createsummary --jobs=" ""
  expect "createsummary r" ""  # its inputs are named on standard input
fi
[ -n "${PROGRAM[combinesummaries]}" ] && expect "combinesummaries r" "results run.config run.sca.bz2" &&
  expect "combinesummaries -c " "1 2 3 4 5 6 7 8 9" && expect "combinesummaries -separator=" ""
[ -n "${PROGRAM[extractvectors]}" ] && expect "extractvectors run.sca.bz2 -split" "-split -splitall" &&
  expect "extractvectors ru" "run.config run.sca.bz2"
if [ -n "${PROGRAM[getabstime]}" ]; then
  expect "getabstime -" "--help --version -h -v"
  expect "getabstime --v" "--version"
  expect "getabstime --version " ""
  check_options getabstime "getabstime --"
fi
if [ -n "${PROGRAM[runtimeestimator]}" ]; then
  expect "runtimeestimator st" "start.file"
  expect "runtimeestimator -" "--help --version -h -v"
  expect "runtimeestimator start.file 10 " ""
  check_options runtimeestimator "runtimeestimator --"
fi

# netperfmeter: values, files after "=" and after the option, addresses and FLOWSPECs (":" a
# word break)
if [ -n "${PROGRAM[netperfmeter]}" ]; then
  expect "netperfmeter localhost:9000 -scalar=" "results run.config run.sca.bz2 start.file"
  expect "netperfmeter localhost:9000 --scalar=run" "run.config run.sca.bz2"
  expect "netperfmeter localhost:9000 -config=r" "results run.config run.sca.bz2"
  expect "netperfmeter localhost:9000 -C r" "results run.config run.sca.bz2"
  expect "netperfmeter localhost:9000 -vector=results/" ""
  expect "netperfmeter localhost:9000 -runt" "-runtime="
  expect "netperfmeter localhost:9000 -runtime=" ""
  expect "netperfmeter localhost:9000 -loglevel=" "0 1 2 3 4 5"
  expect "netperfmeter localhost:9000 --sctp-stack=u" "userland"
  expect "netperfmeter localhost:9000 -sctp-stack=k" "kernel"
  expect "netperfmeter localh" "localhost:9000"
  expect "netperfmeter localhost:9" "9000"
  expect "netperfmeter localhost:9000 -tcp const0:con" "const"
  expect "netperfmeter localhost:9000 -tcp const0:const1400:const0:const1400:no" "nodelay="
  expect "netperfmeter localhost:9000 -tcp const0:n" "normal"
  expect "netperfmeter localhost:9000 -tcp " "const0:const1400:const0:const1400 const10:const1000:const10:const1000 default"
  expect "netperfmeter 9000 -nod" "-nodisplay"
fi

# netperfmeter-lab: commands, shipped studies and study files, directories
if [ -n "${PROGRAM[netperfmeter-lab]}" ]; then
  expect "netperfmeter-lab r" "run"
  expect "netperfmeter-lab -" "--help --version -h -v"
  got=$(complete_line "netperfmeter-lab run --dry-run buffer")
  grep -qw buffer-splitting <<<"$got" && pass "netperfmeter-lab run completes the shipped studies" ||
    fail "netperfmeter-lab run buffer: $got"
  expect "netperfmeter-lab run --output=r" "results"
  expect "netperfmeter-lab run -o r" "results"
  expect "netperfmeter-lab run --par" "--parallel="
  expect "netperfmeter-lab plot r" "results"
fi

if [ -n "${PROGRAM[netperfmeter-cc-loader]}" ]; then
  expect "netperfmeter-cc-loader st" "start status stop"
  expect "netperfmeter-cc-loader -" "--help --verbose --version -h -v"
  expect "netperfmeter-cc-loader --verbose st" "start status stop"
fi

if [ -n "${PROGRAM[netperfmeter-delayline]}" ]; then
  got=$(complete_line "netperfmeter-delayline -l 0.01 l")
  grep -qw lo <<<"$got" && pass "netperfmeter-delayline completes interfaces" ||
    fail "netperfmeter-delayline -l 0.01 l: $got"
  got=$(complete_line "netperfmeter-delayline --loss=0.01 l")
  grep -qw lo <<<"$got" && pass "netperfmeter-delayline --loss=0.01 completes interfaces" ||
    fail "netperfmeter-delayline --loss=0.01 l: $got"
  expect "netperfmeter-delayline --ber-port=" "9899"
fi

# the plotters: their tables' columns
if [ -n "${PROGRAM[plot-netperfmeter-summary]}" ]; then
  printf 'Gamma rhoDFN active.flow value\ncmt 1 0 2.5\n' >table.data
  expect "plot-netperfmeter-summary table.data -x rh" "rhoDFN"
  bzip2 -k table.data
  expect "plot-netperfmeter-summary table.data.bz2 -c G" "Gamma"
fi

finish
