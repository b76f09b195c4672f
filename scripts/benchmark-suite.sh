#!/usr/bin/env bash
# Generates the benchmark suite on the simulated cell, calibrates the published detector on each
# robot's own recordings, evaluates every variant and writes docs/benchmarks.md (with plots).
#
#   bash scripts/benchmark-suite.sh [OUT_DIR]        (about 15 minutes on the 2-core machine)
#
# Per robot: reference (7 cycles), 100 calibration cycles, 200 held-out nominal cycles, 100
# collision cycles (one contact each, 20-300 N, links 2..6, impacts and pushes, random phase and
# direction), and variants: speed override 70 % (nominal + collisions), friction drift +30 %
# (nominal + collisions), double payload (nominal + collisions), and an assembly task with snap-fit
# and screwing (own reference and calibration). Seeds are fixed: the same
# command gives the same numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/benchmarks}
bash scripts/install-deps.sh
if ! /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq --no-install-recommends python3-matplotlib > /dev/null
fi
bash scripts/build.sh > /dev/null
sim=build/samples/sim/warpguard-sim
wg=build/tools/warpguard
mkdir -p "$out"

run_robot() {
  local robot=$1 seed=$2
  local dir="$out/$robot" r="samples/robots/$robot.json" t="samples/tasks/$robot-pick-and-place.json"
  mkdir -p "$dir"
  local payload
  payload=$(/usr/bin/python3 -c "import json; print(2 * max(s.get('grasp', 0) for s in json.load(open('$t'))['steps']))")
  "$sim" record --robot "$r" --task "$t" --cycles 7 --seed $((seed + 1)) --out "$dir/reference.csv"
  "$sim" record --robot "$r" --task "$t" --cycles 100 --seed $((seed + 2)) --out "$dir/calibration.csv"
  "$sim" record --robot "$r" --task "$t" --cycles 200 --seed $((seed + 3)) --out "$dir/nominal.csv"
  "$sim" record --robot "$r" --task "$t" --cycles 101 --seed $((seed + 4)) --contacts 100 --out "$dir/collisions.csv"
  "$sim" record --robot "$r" --task "$t" --cycles 50 --seed $((seed + 5)) --override 0.7 --out "$dir/override70-nominal.csv"
  "$sim" record --robot "$r" --task "$t" --cycles 51 --seed $((seed + 6)) --override 0.7 --contacts 50 --out "$dir/override70-collisions.csv"
  "$sim" record --robot "$r" --task "$t" --cycles 50 --seed $((seed + 7)) --drift 0.3 --out "$dir/drift30-nominal.csv"
  "$sim" record --robot "$r" --task "$t" --cycles 51 --seed $((seed + 8)) --drift 0.3 --contacts 50 --out "$dir/drift30-collisions.csv"
  "$sim" record --robot "$r" --task "$t" --cycles 50 --seed $((seed + 9)) --payload "$payload" --out "$dir/payload2x-nominal.csv"
  "$sim" record --robot "$r" --task "$t" --cycles 51 --seed $((seed + 10)) --payload "$payload" --contacts 50 --out "$dir/payload2x-collisions.csv"
  "$wg" calibrate --reference "$dir/reference.csv" --reference-cycles 3 --nominal "$dir/calibration.csv" --out "$dir/profile.json"
  for variant in nominal collisions override70-nominal override70-collisions drift30-nominal drift30-collisions \
                 payload2x-nominal payload2x-collisions; do
    "$wg" evaluate --profile "$dir/profile.json" "$dir/$variant.csv" --out "$dir/$variant.evaluation.json"
  done
  # Contact tasks: snap-fit at three poses and screwing, with its own reference and calibration.
  local a="samples/tasks/$robot-assembly.json"
  "$sim" record --robot "$r" --task "$a" --cycles 7 --seed $((seed + 11)) --out "$dir/assembly-reference.csv"
  "$sim" record --robot "$r" --task "$a" --cycles 50 --seed $((seed + 12)) --out "$dir/assembly-calibration.csv"
  "$sim" record --robot "$r" --task "$a" --cycles 100 --seed $((seed + 13)) --out "$dir/assembly-nominal.csv"
  "$sim" record --robot "$r" --task "$a" --cycles 51 --seed $((seed + 14)) --contacts 50 --out "$dir/assembly-collisions.csv"
  "$wg" calibrate --reference "$dir/assembly-reference.csv" --reference-cycles 3 --nominal "$dir/assembly-calibration.csv" \
    --out "$dir/assembly-profile.json"
  for variant in assembly-nominal assembly-collisions; do
    "$wg" evaluate --profile "$dir/assembly-profile.json" "$dir/$variant.csv" --out "$dir/$variant.evaluation.json"
  done
}

run_robot ur5e-like 1000 > "$out/ur5e-like.log" 2>&1 &
run_robot irb120-like 2000 > "$out/irb120-like.log" 2>&1 &
wait
run_robot vp6242-like 3000 > "$out/vp6242-like.log" 2>&1
/usr/bin/python3 tools/benchmark_report.py "$out" docs/benchmarks.md docs/benchmarks
echo "wrote docs/benchmarks.md"
