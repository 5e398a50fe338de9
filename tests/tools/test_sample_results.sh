#!/usr/bin/env bash
# The sample results of netperfmeter-examples (packaging/examples/results) are what a new user
# can try the tool-chain on: every tool that reads such files reads them.
#   test_sample_results.sh TOOLS_BIN RESULTS_DIR NPMP_LUA PLOT_RESULTS
# * run/: the config names the files that are there, with the seed that made them; the JSON
#   document agrees with the scalar files on a figure; the per-run plot is made again from the
#   vectors (Rscript); tshark decodes the capture as NPMP with the
#   Lua dissector (as an unprivileged user: root ignores personal plugins), without malformed
#   frames;
# * study/: createsummary makes the same tables again from results.summary.
source "$(dirname "$0")/lib.sh"
BIN=$1
RESULTS=$2
LUA=$3
PLOT=$4
setup_tmp
run=$RESULTS/run
study=$RESULTS/study

# --- the run
[ "$(grep -c '^SEED=20261128$' "$run/run.config")" = 1 ] && pass "run.config records the seed" ||
  fail "run.config has no SEED=20261128"
for key in SCALAR_ACTIVE_NODE SCALAR_PASSIVE_NODE VECTOR_ACTIVE_NODE VECTOR_PASSIVE_NODE; do
  name=$(sed -n "s/^$key=\"\\(.*\\)\"$/\\1/p" "$run/run.config")
  [ -n "$name" ] && [ -f "$run/$name" ] && pass "$key $name is there" || fail "$key \"$name\" is missing"
done
python3 - "$run" <<'PY' && pass "run.json: the passive's received bytes of every flow as in its scalar file" ||
import bz2, json, re, sys
run = sys.argv[1]
doc = json.load(open(f"{run}/run.json"))
scalars = {}
for line in bz2.open(f"{run}/run-passive.sca.bz2", "rt"):
    m = re.match(r'scalar\s+"netPerfMeter\.passive\.flow\[(\d+)\]"\s+"Received Bytes"\s+(\S+)', line)
    if m:
        scalars[int(m.group(1))] = int(float(m.group(2)))
got = {f["flow_id"]: f["active_to_passive"]["received"]["bytes"] for f in doc["flows"]}
assert doc["seed"] == 20261128, doc["seed"]
assert got == scalars and len(got) == 3 and all(v > 0 for v in got.values()), (got, scalars)
PY
  fail "run.json does not match run-passive.sca.bz2"
if command -v Rscript >/dev/null && [ -x "$PLOT" ]; then
  cp -a "$run" "$TMP/run"
  if (cd "$TMP/run" && "$PLOT" run.config -o again.pdf >/dev/null 2>"$TMP/plot.err") && [ -s "$TMP/run/again.pdf" ]; then
    pass "plot-netperfmeter-results plots the run"
  else
    fail "plot-netperfmeter-results: $(tail -3 "$TMP/plot.err")"
  fi
else
  echo "note: no Rscript or no built plotter ($PLOT), the plot is not made again"
fi
if command -v tshark >/dev/null; then
  zcat "$run/run.pcapng.gz" >"$TMP/run.pcapng"
  # tshark runs as nobody, who may not read the source tree (a checkout under /root): the
  # capture and the Lua twin go to the test's own folder
  cp "$LUA" "$TMP/npmp.lua"
  chmod 755 "$TMP"; chmod 644 "$TMP/run.pcapng" "$TMP/npmp.lua"
  fields=$(runuser -u nobody -- tshark -r "$TMP/run.pcapng" -X "lua_script:$TMP/npmp.lua" -o udp.try_heuristic_first:TRUE \
             -T fields -e npmp.type -e _ws.malformed 2>"$TMP/tshark.err")
  types=$(tr '\t,' '\n\n' <<<"$fields" | grep -c '^[0-9]')
  malformed=$(grep -c '_ws.malformed\|Malformed' <<<"$fields" || true)
  if [ "$types" -gt 300 ] && [ "$malformed" = 0 ] && grep -qx "2" <(tr '\t,' '\n\n' <<<"$fields"); then
    pass "tshark decodes $types NPMP messages in the capture (ADD_FLOW among them), none malformed"
  else
    fail "tshark: $types NPMP messages, $malformed malformed: $(head -3 "$TMP/tshark.err")"
  fi
else
  echo "note: no tshark, the capture is not decoded"
fi

# --- the study
cp -a "$study" "$TMP/study"
rm -f "$TMP"/study/*.data.bz2
(cd "$TMP/study" && "$BIN/createsummary" --batch --quiet <results.summary) 2>"$TMP/cs.err" ||
  fail "createsummary: $(cat "$TMP/cs.err")"
shipped=$(cd "$study" && ls *.data.bz2 | sort)
made=$(cd "$TMP/study" && ls *.data.bz2 2>/dev/null | sort)
if [ -n "$shipped" ] && [ "$shipped" = "$made" ]; then
  pass "createsummary makes the study's $(wc -l <<<"$shipped") tables again"
  table=passive.flow-ReceivedBitRate.data.bz2
  cmp -s <(bzcat "$study/$table") <(bzcat "$TMP/study/$table") && pass "$table: the same rows" ||
    fail "$table differs from the shipped one"
else
  fail "tables: shipped $(wc -w <<<"$shipped"), made $(wc -w <<<"$made")"
fi
