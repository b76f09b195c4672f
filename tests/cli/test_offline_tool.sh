#!/usr/bin/env bash
# The offline tool as a user runs it: generate recordings, calibrate, evaluate, match, envelope, residual,
# and the error paths (one-line message, non-zero exit). Usage: test_offline_tool.sh WARPGUARD PLANAR_ARM WORKDIR
set -u
wg=$1; arm=$2; work=$3
tools=$(cd "$(dirname "$0")/../../tools" && pwd)
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 2
failures=0; checks=0
check() {  # check "description" command...
  local what=$1; shift
  checks=$((checks + 1))
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failures=$((failures + 1)); fi
}

"$arm" --out ref.csv --cycles 3 --seed 31 >/dev/null || exit 2
"$arm" --out nom.csv --cycles 12 --seed 32 >/dev/null || exit 2
"$arm" --out col.csv --cycles 6 --seed 33 --collisions 5 --min-force 150 --max-force 300 >/dev/null || exit 2

"$wg" calibrate --reference ref.csv --nominal nom.csv --window 16 --out profile.json > calibrate.txt 2>&1
check "calibrate exits 0" test $? -eq 0
check "calibrate writes a profile" grep -q '"format": "warpguard-profile"' profile.json
check "calibrate prints the thresholds table" grep -q '^3 ' calibrate.txt
check "calibrate says how the margin was derived" grep -qi 'margin' calibrate.txt
check "calibrate names the calibration cycles that set the limits, widest CUSUM first" python3 - <<'PY'
import json, re
d = json.load(open("profile.json"))["phase_aware"]["derivation"]
line = next(l for l in open("calibrate.txt") if "widest calibration cycles" in l)
first = re.search(r"nom\.csv: cycle (\d+) ([0-9.]+) / ([0-9.]+)", line)
assert first, line
w = d["widest_cycles"][0]
assert int(first.group(1)) == w["cycle"] and w["file"] == "nom.csv", (line, w)
assert abs(float(first.group(3)) - max(d["cusum_cycle_maxima"])) < 0.005, (line, max(d["cusum_cycle_maxima"]))
assert any(abs(c["ratio"] - max(d["cycle_maxima"])) < 1e-12 for c in d["widest_cycles"])
PY
"$wg" calibrate --detector published --reference ref.csv --nominal nom.csv --window 16 --out published.json > published.txt 2>&1
check "the published detector calibrates too" grep -q '"detector": "published"' published.json
"$wg" calibrate --reference ref.csv --nominal nom.csv --window 16 --cusum-reference 0.8 --out cusum.json > cusum.txt 2>&1
check "--cusum-reference reaches the profile" grep -q '"cusum_reference": 0.8' cusum.json
check "the calibration output names the CUSUM reference it used" grep -q 'CUSUM of the ratio over 0.80' cusum.txt
"$wg" calibrate --reference ref.csv --nominal nom.csv --cusum-reference -1 --out x.json > cusum-bad.txt 2>&1
check "a negative --cusum-reference is refused" test $? -ne 0
check "the refusal names the option and the value" grep -q -- '--cusum-reference.*-1\|-1.*--cusum-reference' cusum-bad.txt
"$arm" --out few-nominal.csv --cycles 4 --seed 34 >/dev/null || exit 2
"$wg" calibrate --reference ref.csv --nominal few-nominal.csv --out x.json > few-nominal.txt 2>&1
check "the default detector refuses too few nominal cycles" test $? -ne 0
check "too few nominal cycles is explained" grep -q "nominal cycles" few-nominal.txt

"$wg" evaluate --profile profile.json col.csv --out result.json > evaluate.txt 2>&1
check "evaluate exits 0" test $? -eq 0
check "evaluate reports 5 collisions" grep -q '"collisions": 5' result.json
check "evaluate lists stop events with t, index, joint, rule, value and threshold" \
  grep -q '"rule": "' result.json
check "every stop event has a start time" grep -q '"t": ' result.json
detected=$(sed -n 's/.*"detected": \([0-9]*\),$/\1/p' result.json | tail -1)
check "all 5 collisions of 150-300 N are detected (got $detected)" test "$detected" = 5
check "each detection records the contact force at the STOP" grep -q '"force_at_detection": ' result.json
python3 "$tools/collision_delays.py" result.json > delays.txt 2>&1
check "collision_delays.py summarises the run: 5 of 5 detected" grep -q '^all: 5/5 detected, >= 50 N 5/5; delay median' delays.txt

# Several recordings in one call are runs of their own: what one taught the detector (a friction
# drift of +30 % over 12 cycles) does not carry into the next (it left this nominal run with 100
# false stops while each recording was only reset() before it).
"$arm" --out drift.csv --cycles 12 --seed 35 --drift 0.3 >/dev/null || exit 2
"$arm" --out nom2.csv --cycles 6 --seed 36 >/dev/null || exit 2
"$wg" evaluate --profile profile.json drift.csv nom2.csv --out both.json > both.txt 2>&1
check "evaluate of two recordings exits 0" test $? -eq 0
"$wg" evaluate --profile profile.json nom2.csv --out one.json > one.txt 2>&1
check "a recording evaluated after another gets exactly its result alone" python3 - both.json one.json <<'PY'
import json, sys
both, one = json.load(open(sys.argv[1]))["runs"], json.load(open(sys.argv[2]))["runs"]
assert [r["file"] for r in both] == ["drift.csv", "nom2.csv"], [r["file"] for r in both]
assert both[1] == one[0], (len(both[1]["stop_events"]), len(one[0]["stop_events"]))
assert one[0]["clean_cycles"] == 6, one[0]["clean_cycles"]
PY

"$wg" match --profile profile.json --run col.csv --index 500 --joint 2 --json > match.json 2>&1
check "match exits 0" test $? -eq 0
check "match reports the span" grep -q '"reference_start"' match.json
# Several indices: one replay, a JSON array whose entries are what single calls print; --window
# matches a longer window than the profile's m (thesis §4.5's whole sections).
"$wg" match --profile profile.json --run col.csv --index 300,500 --joint 2 --json > match2.json 2>&1
check "match with two indices exits 0" test $? -eq 0
check "match with two indices gives the single call's answer for each" python3 - match2.json match.json <<'PY'
import json, subprocess, sys
both, single = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert isinstance(both, list) and [d["index"] for d in both] == [300, 500], both
for key in ("reference_start", "reference_end", "cost", "joints"):
    assert both[1][key] == single[key], (key, both[1][key], single[key])
PY
"$wg" match --profile profile.json --run col.csv --index 500 --joint 2 --window 120 --json > match-long.json 2>&1
check "match --window 120 matches a 120-sample window" python3 -c "
import json, sys
d = json.load(open('match-long.json'))
assert d['window'] == 120 and d['reference_end'] >= d['reference_start'], d
assert json.load(open('match.json'))['window'] == 16" 
"$wg" match --profile profile.json --run col.csv --index 500,300 > match-order.txt 2>&1
check "decreasing indices are refused, naming both" grep -q -- "--index: 300 after 500" match-order.txt
"$wg" match --profile profile.json --run col.csv --index 500 --window 1 > match-w1.txt 2>&1
check "--window 1 is refused" grep -q -- "--window 1: mDTW needs a window of >= 2 samples" match-w1.txt

"$wg" envelope ref.csv --out limits.json > envelope.txt 2>&1
check "envelope exits 0" test $? -eq 0
"$wg" evaluate --envelope limits.json nom.csv --out env_result.json > /dev/null 2>&1
check "evaluate with envelope limits exits 0" test $? -eq 0
# The model-based residual needs a profile with an arm model (a signed torque calibrated with --model).
"$wg" residual nom.csv --profile profile.json --out residual.json > residual.txt 2>&1
check "residual without an arm model is refused, naming the profile" grep -q "profile.json: has no arm model" residual.txt
"$wg" evaluate --profile profile.json --envelope limits.json nom.csv --out x.json > two.txt 2>&1
check "evaluate refuses a profile and limits together" grep -q "give exactly one of --profile PROFILE.json, --envelope" two.txt

# Error paths: a malformed CSV gives one line with file:line:column and a non-zero exit.
{ head -7 nom.csv; echo "0.5,1,1,0,1.0,oops,1.0,0,0,0,0,0,0"; } > bad.csv
"$wg" evaluate --profile profile.json bad.csv --out bad.json > bad.txt 2>&1
code=$?
check "malformed CSV exits non-zero (got $code)" test $code -ne 0
check "malformed CSV error is one line" test "$(wc -l < bad.txt)" -eq 1
check "malformed CSV error names file, line and column" grep -q "bad.csv:8:6: column 'tau2' expects a finite number (got 'oops')" bad.txt
"$wg" calibrate --reference nom.csv --nominal nom.csv --reference-cycles 15 --out x.json > few.txt 2>&1
check "too few reference cycles exits non-zero" test $? -ne 0
check "too few reference cycles is explained" grep -q "needs 15 complete cycles" few.txt
"$wg" calibrate --reference ref.csv --nominal nom.csv --method ka-mdtw --out x.json > ka.txt 2>&1
check "KA-mDTW without a model is refused" grep -q "needs --model" ka.txt

echo "$((checks - failures)) passed, $failures failed"
test $failures -eq 0
