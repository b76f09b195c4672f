#!/usr/bin/env bash
# Checks a calibrated robot while the operator turns the speed override during the run, as a user
# does at the teach pendant (or a safety function slowing the robot): every 12 s of the run the
# override goes to the next of 70, 100, 85, 70, 90, 100, 75, 100, 80, 95 % (then again), each turn
# followed smoothly by the controller (warpguard-sim --override-change, --override-ramp; the same
# turns as the suite's variant "override turned every 12 s", other seeds and twice its cycles). The
# profiles are the ones calibrated at 100 % (`bash scripts/benchmark-suite.sh` or
# `bash scripts/held-out-check.sh`); they never saw a turn. Records 100 nominal cycles and 51
# cycles with 50 contacts, evaluates the default and the published detector, prints false stops and
# detections. About 3 minutes per robot.
#
#   bash scripts/override-turns-check.sh [--ramp S] [--seed N] [--reported] PROFILE_DIR ROBOT.json TASK.json [OUT_DIR]
#
# PROFILE_DIR holds profile-phase.json (default detector) and profile.json (published), e.g.
# build/benchmarks/ur5e-like. --ramp: seconds a change of 100 % takes (default: the simulator's, 0.5).
# WARPGUARD_BUILD: the build directory whose programs run (default build).
# --reported: the robot's task reports the override with every sample (warpguard-sim
# --report-override, column 'override'; the same runs otherwise), as the detector can then use it.
set -euo pipefail
cd "$(dirname "$0")/.."
ramp="" seed=9100 reported=0
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do
  case "$1" in
    --ramp) ramp=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --reported) reported=1; shift ;;
    *) echo "override-turns-check: unknown option '$1' (expected --ramp S, --seed N or --reported)" >&2; exit 2 ;;
  esac
done
if [ $# -lt 3 ]; then
  echo "usage: bash scripts/override-turns-check.sh [--ramp S] [--seed N] [--reported] PROFILE_DIR ROBOT.json TASK.json [OUT_DIR]" >&2
  exit 2
fi
dir=$1 robot=$2 task=$3
for f in "$dir/profile-phase.json" "$dir/profile.json" "$robot" "$task"; do
  [ -s "$f" ] || { echo "override-turns-check: '$f' is not a readable file (expected calibrated profiles, a robot description and a task)" >&2; exit 2; }
done
out=${4:-$dir/override-turns}
mkdir -p "$out"
sim=${WARPGUARD_BUILD:-build}/samples/sim/warpguard-sim
wg=${WARPGUARD_BUILD:-build}/tools/warpguard

. scripts/record-helper.sh
override_turns
[ -n "$ramp" ] && turns+=(--override-ramp "$ramp")
[ "$reported" = 1 ] && turns+=(--report-override)

"$sim" record --robot "$robot" --task "$task" --cycles 100 --seed "$seed" "${turns[@]}" --out "$out/nominal.csv" &
"$sim" record --robot "$robot" --task "$task" --cycles 51 --seed $((seed + 1)) --contacts 50 "${turns[@]}" --out "$out/collisions.csv" &
wait
for variant in nominal collisions; do
  "$wg" evaluate --profile "$dir/profile-phase.json" "$out/$variant.csv" --out "$out/$variant.phase.evaluation.json" > /dev/null &
  "$wg" evaluate --profile "$dir/profile.json" "$out/$variant.csv" --out "$out/$variant.evaluation.json" > /dev/null &
  wait
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
for label, suffix in (("default (phase-aware)", ".phase"), ("published", "")):
    nom = json.load(open(f"{out}/nominal{suffix}.evaluation.json"))
    events = nom["runs"][0]["stop_events"]
    col = json.load(open(f"{out}/collisions{suffix}.evaluation.json"))["runs"][0]["summary"]
    big = [c for c in col["collision_details"] if c["peak_force"] >= 50]
    joints = sorted({e["joint"] for e in events})
    print(f"{label}, override turned every 12 s: false stop events {nom['totals']['false_stop_events']} in "
          f"{nom['totals']['clean_cycles']} nominal cycles (joints {joints or '-'}); collisions >= 50 N detected "
          f"{sum(c['detected'] for c in big)}/{len(big)}, all {col['detected']}/{col['collisions']}, median delay "
          + (f"{1e3 * col['delay_median']:.0f} ms" if col.get("delay_median") is not None else "-"))
PY
